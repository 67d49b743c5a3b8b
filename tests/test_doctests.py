"""Doctests of the installed packages, imported under their installed names.

pytest's ``--doctest-modules`` would import ``pyimpl/...`` by its folder name (a second copy of every
module, outside the ``rollcheck`` package); here each module is imported as ``rollcheck.…`` and its
docstring examples are run with :mod:`doctest`.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import tempfile
from pathlib import Path

import pytest

import rollcheck

PACKAGES = ["rollcheck.pyimpl", "rollcheck.infra", "rollcheck.testing", "rollcheck.properties", "rollcheck.tla",
            "rollcheck.spark_replay", "rollcheck.flink_replay"]


def _modules() -> list[str]:
    names: list[str] = []
    for pkg_name in PACKAGES:
        pkg = importlib.import_module(pkg_name)  # a package that does not import is a failure
        names.append(pkg_name)
        if hasattr(pkg, "__path__"):
            for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
                names.append(info.name)
    return sorted(set(names))


MODULES = _modules()


def test_doctest_modules_found() -> None:
    assert rollcheck.__name__ == "rollcheck"
    assert len(MODULES) > 300, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a doctest's scratch folders (tempfile.mkdtemp) go inside the test's own, which pytest removes
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
