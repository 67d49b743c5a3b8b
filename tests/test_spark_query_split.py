"""The query recorder's modules: one concept each, and ``spark_replay.query.record`` names them all.

``spark_replay/query/record.py`` was split at its seams (the user's module, the configuration, the work
folder's files, the state reader, whose failure it is, one start of the query, the recording in one
session); every name other code imports from ``rollcheck.spark_replay.query.record`` must stay importable
from it and be the very object of its new module, and each module stays small and documented.
"""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPLIT = ["module", "config", "files", "state", "failures", "run", "drive"]
#: the package of the recorder's modules, and its façade module
PKG, FACADE = "rollcheck.spark_replay.query", "record"
#: what the rest of the repository imports from the façade (grep ``spark_replay.query.record import``)
IMPORTED = ["QueryConfig", "record_query", "session_conf", "load_query", "OVERLOAD_SIGNS", "UserQuery",
            "engine_code_raised", "reference_failure_is_engines", "release_ran", "engine_failure",
            "StateUnreadable", "read_state_stores", "_state_or_reason", "_run_once", "_master"]


@pytest.mark.parametrize("name", [FACADE, *SPLIT])
def test_each_module_is_documented_small_and_exports_what_it_names(name: str) -> None:
    path = ROOT / "spark_replay" / "query" / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{name} has no module docstring"
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 500, name
    mod = importlib.import_module(f"{PKG}.{name}")
    assert mod.__all__ and all(hasattr(mod, n) for n in mod.__all__), name


@pytest.mark.parametrize("name", [FACADE, *SPLIT])
def test_doctests_moved_with_their_functions(name: str) -> None:
    mod = importlib.import_module(f"{PKG}.{name}")
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0, res


def test_the_facade_names_the_same_objects_as_the_modules() -> None:
    q = importlib.import_module(f"{PKG}.{FACADE}")
    homes = {m: importlib.import_module(f"{PKG}.{m}") for m in SPLIT}
    for name in [*q.__all__, *IMPORTED]:
        obj = getattr(q, name)
        if name == "record_query":
            assert obj.__module__ == f"{PKG}.{FACADE}"
            continue
        owners = [m for m in homes.values() if any(getattr(m, n, None) is obj for n in m.__all__)]
        assert owners, f"query.{name} is not a public name of one of the split modules"


def test_the_modules_import_one_another_without_a_cycle_and_never_the_facade() -> None:
    edges: dict[str, set[str]] = {}
    for name in SPLIT:
        tree = ast.parse((ROOT / "spark_replay" / "query" / f"{name}.py").read_text(encoding="utf-8"))
        deps = {n.module.rsplit(".", 1)[1] for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(f"{PKG}.")}
        assert FACADE not in deps, f"{name} imports the façade"
        edges[name] = deps & set(SPLIT)
    seen: list[str] = []

    def visit(n: str, path: tuple[str, ...]) -> None:
        assert n not in path, f"import cycle {' -> '.join((*path, n))}"
        for d in edges[n]:
            visit(d, (*path, n))
        seen.append(n)

    for n in SPLIT:
        visit(n, ())
