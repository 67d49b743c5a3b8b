"""The layering contracts of ``pyproject.toml`` (``[tool.importlinter]``), checked with import-linter.

The contracts: ``rollcheck.pyimpl`` imports nothing else of ours; ``properties``, ``tla`` and
``spark_replay`` import only ``pyimpl``, each other and the package data (never the CLI, the
report sections, the suite or ``rollcheck.testing``); report sections do not import CLI modules;
no package has import cycles between its children.

import-linter (through grimp) finds a package by its folder, but the checkout is not laid out as
installed: ``pyimpl/`` is ``rollcheck.pyimpl`` only through setuptools' ``package-dir``. So the
test lays out a tree of symlinks exactly as installed (``rollcheck/pyimpl -> <checkout>/pyimpl``,
...) from the ``package-dir`` table and runs ``lint-imports`` with that tree as the working
directory (import-linter puts it first on ``sys.path``, ahead of the editable finder of the
checkout). Each contract is shown to catch a deliberately broken tree: one import line added to a
copy of one module.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"


def _config() -> dict:
    with PYPROJECT.open("rb") as f:
        return tomllib.load(f)


def build_tree(dest: Path) -> Path:
    """Lay out the checkout's packages as installed under ``dest`` (real folders, symlinked files).

    Returns ``dest``; ``dest/rollcheck`` is the root package.
    """
    mapping: dict[str, str] = _config()["tool"]["setuptools"]["package-dir"]
    mapped = {(ROOT / src).resolve() for name, src in mapping.items() if name != "rollcheck"}
    for name, src in sorted(mapping.items()):
        src_dir = (ROOT / src).resolve()
        target = dest.joinpath(*name.split("."))
        for dirpath, dirnames, filenames in os.walk(src_dir):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and (here / d).resolve() not in mapped]
            out = target / here.relative_to(src_dir)
            out.mkdir(parents=True, exist_ok=True)
            for fn in filenames:
                if not fn.endswith(".pyc"):
                    (out / fn).symlink_to(here / fn)
    return dest


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` (its console entry point) on ``tree`` with the contracts of ``pyproject.toml``."""
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return subprocess.run(
        [sys.executable, "-c", code, "--config", str(PYPROJECT), "--no-cache", "--no-logo"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120,
    )


def _broken(out: str) -> set[str]:
    # contract names may wrap onto a second line in the summary: join the lines first
    flat = re.sub(r"\s*\n\s*", " ", out)
    names = [c["name"] for c in _config()["tool"]["importlinter"]["contracts"]]
    return {n for n in names if f"{n} BROKEN" in flat}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tree(tmp_path_factory.mktemp("layout"))


def test_tree_is_laid_out_as_installed(tree: Path) -> None:
    for pkg in ("pyimpl", "infra", "infra/matrix", "pyimpl/intervals", "pyimpl/simulate", "properties", "tla", "spark_replay",
                "cli", "sections"):
        assert (tree / "rollcheck" / pkg / "__init__.py").is_file(), pkg
    assert not (tree / "pyimpl").exists()


def test_layering_contracts_hold(tree: Path) -> None:
    contracts = _config()["tool"]["importlinter"]["contracts"]
    assert len(contracts) >= 4
    res = lint_imports(tree)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Contracts: {len(contracts)} kept, 0 broken." in res.stdout, res.stdout
    analysed = re.search(r"Analyzed (\d+) files", res.stdout)
    assert analysed and int(analysed.group(1)) > 100, res.stdout  # the whole installed layout


BROKEN_TREES = [
    ("pyimpl/zpaths.py", "import rollcheck.cli.main", "pyimpl imports nothing of ours"),
    ("pyimpl/simulate/topology.py", "import rollcheck.properties.registry", "pyimpl imports nothing of ours"),
    ("tla/values.py", "import rollcheck.suite",
     "properties, tla and spark_replay import only pyimpl, infrastructure, each other and the package data"),
    ("properties/registry.py", "import rollcheck.cli.cmd_tlc",
     "properties, tla and spark_replay import only pyimpl, infrastructure, each other and the package data"),
    ("infra/matrix/run.py", "import rollcheck.spark_replay.matrix.run", "infrastructure imports only pyimpl"),
    ("infra/children.py", "import rollcheck.cli.main", "infrastructure imports only pyimpl"),
    ("rollcheck/sections/sec_tlc.py", "import rollcheck.cli.cmd_tlc", "report sections do not import CLI modules"),
    ("pyimpl/simulate/recovery.py", "import rollcheck.pyimpl.simulate.engine", "no import cycles between siblings"),
    ("pyimpl/intervals/utilization.py", "import rollcheck.pyimpl.intervals.sim", "no import cycles between siblings"),
]


def _installed_path(tree: Path, rel: str) -> Path:
    mapping: dict[str, str] = _config()["tool"]["setuptools"]["package-dir"]
    top, _, rest = rel.partition("/")
    for name, src in mapping.items():
        if src == top:
            return tree.joinpath(*name.split("."), rest)
    raise AssertionError(f"{rel} is in no mapped package")


@pytest.mark.parametrize(("module", "line", "contract"), BROKEN_TREES)
def test_contract_catches_broken_tree(module: str, line: str, contract: str, tmp_path: Path) -> None:
    broken = build_tree(tmp_path / "tree")
    target = _installed_path(broken, module)
    assert target.is_symlink(), target
    text = target.read_text(encoding="utf-8")
    target.unlink()
    target.write_text(text + f"\n{line}  # deliberately broken layering\n", encoding="utf-8")
    res = lint_imports(broken)
    assert res.returncode == 1, res.stdout + res.stderr
    assert contract in _broken(res.stdout), res.stdout
