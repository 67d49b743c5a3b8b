"""The wheel: one top-level package, complete, and every command working from a fresh venv.

How the fresh environment is made, without downloading anything and in well under a minute:

1. **Build.** The files the build needs (``pyproject.toml``, ``README.md`` and the mapped
   folders, without ``__pycache__``) are copied to a temporary folder, so no ``build/`` or
   ``*.egg-info`` of the checkout can leak stale modules into the wheel and nothing is written
   into the checkout. ``pip wheel --no-deps --no-build-isolation --no-index`` builds it with the
   setuptools of the test's own environment (the ``dev`` extra requires one with ``bdist_wheel``
   built in), so no build environment is downloaded.
2. **Fresh venv.** ``python -m venv --without-pip``: empty site-packages, no system packages.
3. **Dependencies without a download.** A ``.pth`` file in the fresh venv's site-packages lists
   the test environment's site-packages *folders*. A folder named in a ``.pth`` file is only
   appended to ``sys.path``: the ``.pth`` files inside it are not processed, so the checkout's
   editable finder (installed by ``__editable__.rollcheck-*.pth`` of the development venv) is
   never activated, and the fresh venv's own site-packages comes first on ``sys.path``.
   ``--system-site-packages`` would not do: the dependencies live in the development venv, not
   in the system's site-packages.
4. **Install.** ``pip --python <fresh venv> install --no-deps --no-index <wheel>`` installs the
   wheel and its ``rollcheck`` console script into the fresh venv.

Every command then runs from an empty temporary folder with the fresh venv's ``rollcheck``, and
the test checks that every ``rollcheck`` module was imported from the fresh venv's
site-packages, not from the checkout.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
with (ROOT / "pyproject.toml").open("rb") as _f:
    PYPROJECT = tomllib.load(_f)
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
MAPPING: dict[str, str] = SETUPTOOLS["package-dir"]
FOLDERS = ("pyimpl", "infra", "properties", "tla", "spark_replay", "flink_replay", "rollcheck")
NOT_INSTALLED = ("pyimpl", "infra", "properties", "tla", "spark_replay", "flink_replay", "benchmarks", "tests", "examples", "specs", "docs")


def _ignore(_dir: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__" or n.endswith((".pyc", ".egg-info"))]


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSAFEPATH") and not k.startswith("PIP_")}
    env.update({"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}, **extra)
    return env


class Installed:
    """The built wheel and the fresh venv it is installed in."""

    def __init__(self, wheel: Path, venv: Path, empty: Path):
        self.wheel = wheel
        self.venv = venv
        self.empty = empty
        self.python = venv / "bin" / "python"
        self.site = Path(_run([str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              cwd=empty, env=_clean_env()).stdout.strip())

    def env(self) -> dict[str, str]:
        return _clean_env(PATH=f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")

    def rollcheck(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return _run([str(self.venv / "bin" / "rollcheck"), *args], cwd=self.empty, env=self.env(), timeout=timeout)

    def python_c(self, code: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.python), "-c", code], cwd=self.empty, env=self.env())

    def resource(self, package: str, name: str) -> str:
        """Path of a package-data file as the installed package finds it (importlib.resources)."""
        res = self.python_c(f"from importlib.resources import files; print(files({package!r}) / {name!r})")
        assert res.returncode == 0, res.stderr
        return res.stdout.strip()


def _build_and_install(base: Path) -> None:
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    assert (major, minor) >= (70, 1), (
        f"setuptools {setuptools.__version__} cannot build the wheel offline: run `make setup` "
        "(the dev extra requires setuptools>=70.1)")
    src = base / "src"
    src.mkdir()
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / f, src / f)
    for folder in sorted(set(MAPPING.values())):
        shutil.copytree(ROOT / folder, src / folder, ignore=_ignore)
    dist = base / "dist"
    res = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                "-q", "-w", str(dist), str(src)], cwd=base, env=_clean_env())
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = dist.glob("rollcheck-*.whl")
    venv = base / "venv"
    res = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=base, env=_clean_env())
    assert res.returncode == 0, res.stderr
    inst = Installed(wheel, venv, base)
    ours = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (inst.site / "zz-rollcheck-test-dependencies.pth").write_text("\n".join(ours) + "\n")
    res = _run([sys.executable, "-m", "pip", "--python", str(inst.python), "install", "--no-deps", "--no-index",
                "-q", str(wheel)], cwd=base, env=_clean_env())
    assert res.returncode == 0, res.stdout + res.stderr
    (base / "ready").touch()


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Built once per test session: under pytest-xdist the workers share one build (a file lock
    in the session's temporary folder; the second worker waits for the first)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this session's folder, common to its workers
    base = shared / "rollcheck-packaging"
    base.mkdir(exist_ok=True)
    with (shared / "rollcheck-packaging.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (base / "ready").exists():
                for child in base.iterdir():  # a build that failed half-way: start again
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
                _build_and_install(base)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    (wheel,) = (base / "dist").glob("rollcheck-*.whl")
    # each worker runs its commands from its own empty folder (its parent takes the outputs)
    empty = base / f"work-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}" / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    return Installed(wheel, base / "venv", empty)


# --------------------------------------------------------------------------- the wheel itself


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_wheel_has_exactly_one_top_level_package(installed: Installed) -> None:
    names = _wheel_names(installed.wheel)
    tops = {n.split("/", 1)[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"rollcheck"}, sorted(tops)
    assert len(dist_info) == 1
    for folder in NOT_INSTALLED:
        assert not any(n.startswith(folder + "/") for n in names), folder
    with zipfile.ZipFile(installed.wheel) as z:
        top_level = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        if top_level:
            assert z.read(top_level[0]).decode().split() == ["rollcheck"]


def _checkout_files() -> dict[str, Path]:
    """Installed name (``rollcheck/pyimpl/x.py``) -> checkout file, for every module and data file."""
    data_globs = ["*.py", *PYPROJECT["tool"]["setuptools"]["package-data"]["*"]]
    out: dict[str, Path] = {}
    for name, folder in MAPPING.items():
        base = ROOT / folder
        for dirpath, dirnames, _files in os.walk(base):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and not (name == "rollcheck" and d in MAPPING.values())]
            if not (here / "__init__.py").is_file():
                continue
            for pattern in data_globs:
                for f in here.glob(pattern):
                    out["/".join([*name.split("."), *f.relative_to(base).parts])] = f
    return out


def _checkout_packages() -> set[str]:
    """Installed names of every folder of the checkout that holds an ``__init__.py``."""
    found = set()
    for folder in FOLDERS:
        name = next(n for n, f in MAPPING.items() if f == folder)
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([name, *rel]))
    return found


def _package_gaps(listed: set[str]) -> tuple[set[str], set[str]]:
    """(packages of the checkout missing from ``listed``, listed packages not in the checkout)."""
    found = _checkout_packages()
    return found - listed, listed - found


def test_every_checkout_package_is_listed_in_pyproject() -> None:
    listed = set(SETUPTOOLS["packages"])
    missing, extra = _package_gaps(listed)
    assert missing == set(), f"add to [tool.setuptools] packages: {sorted(missing)}"
    assert extra == set(), f"listed but not in the checkout: {sorted(extra)}"
    # the check sees a package left out of the list (the deliberately broken variant)
    assert _package_gaps(listed - {"rollcheck.pyimpl.intervals"})[0] == {"rollcheck.pyimpl.intervals"}


def test_wheel_holds_exactly_the_checkout_modules_and_data(installed: Installed) -> None:
    in_wheel = {n for n in _wheel_names(installed.wheel) if n.startswith("rollcheck/")}
    expected = set(_checkout_files())
    assert expected - in_wheel == set(), f"missing from the wheel: {sorted(expected - in_wheel)}"
    assert in_wheel - expected == set(), f"in the wheel but not in the checkout: {sorted(in_wheel - expected)}"
    for must in ("rollcheck/pyimpl/schemas/pattern.schema.json", "rollcheck/tla/manifest.json",
                 "rollcheck/tla/models/RecoveryLine.tla", "rollcheck/data/useless.json"):
        assert must in in_wheel


# --------------------------------------------------------------------------- the fresh venv


IMPORT_ALL = """
import importlib, importlib.util, json, pkgutil, sys
import rollcheck
names = ["rollcheck"] + [m.name for m in pkgutil.walk_packages(rollcheck.__path__, "rollcheck.")]
files = {}
for n in names:
    try:
        files[n] = getattr(importlib.import_module(n), "__file__", None)
    except ModuleNotFoundError as e:
        # a Flink job shipped for verify runs under the PyFlink environment, not this one: it must
        # still be in the wheel (found by its spec) and be valid Python
        if not (n.startswith("rollcheck.data.") and (e.name or "").split(".")[0] == "pyflink"):
            raise
        origin = importlib.util.find_spec(n).origin
        compile(open(origin, encoding="utf-8").read(), origin, "exec")
        files[n] = origin
finders = [type(f).__name__ if not isinstance(f, type) else f.__name__ for f in sys.meta_path]
print(json.dumps({"files": files, "finders": finders}))
"""


def test_every_module_imports_from_the_installed_wheel(installed: Installed) -> None:
    res = installed.python_c(IMPORT_ALL)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    files = doc["files"]
    assert not any("Editable" in f for f in doc["finders"]), doc["finders"]
    expected = {n.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                for n in _checkout_files() if n.endswith(".py")}
    assert set(files) == expected
    site = installed.site.resolve()
    for name, f in files.items():
        assert f is not None and Path(f).resolve().is_relative_to(site), (name, f)


def test_validate_strict_on_shipped_example(installed: Installed) -> None:
    example = installed.resource("rollcheck.data", "useless.json")
    assert Path(example).resolve().is_relative_to(installed.site.resolve())
    res = installed.rollcheck("validate", "--strict", example)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "valid"
    bad = installed.empty.parent / "bad.json"
    bad.write_text(json.dumps({"format": "rollcheck.pattern/1", "processes": ["P0"], "events": [{"kind": "nope"}]}))
    res = installed.rollcheck("validate", "--strict", str(bad))
    assert res.returncode == 2 and "bad.json" in res.stderr and "Traceback" not in res.stderr


def test_tlc_on_bundled_models(installed: Installed) -> None:
    """A model that holds and one that is violated, both found through importlib.resources."""
    module = installed.resource("rollcheck.tla.models", "RecoveryLine.tla")
    assert Path(module).resolve().is_relative_to(installed.site.resolve())
    runs = {}
    for cfg, code in (("recovery-line-small.cfg", 0), ("recovery-line-single-pass-small.cfg", 1)):
        res = installed.rollcheck("tlc", module, "--config", installed.resource("rollcheck.tla.models", cfg),
                                  "--no-deadlock", "--json")
        assert res.returncode == code, res.stdout[-2000:] + res.stderr[-2000:]
        runs[cfg] = json.loads(res.stdout)
    ok, bad = runs["recovery-line-small.cfg"], runs["recovery-line-single-pass-small.cfg"]
    assert ok["status"] == "ok" and ok["distinct_states"] > 0
    assert bad["status"] == "violation" and bad["trace"]
    assert list(installed.empty.iterdir()) == []  # nothing left in the working directory


def test_check_protocol_from_the_installed_wheel(installed: Installed) -> None:
    """The contract's ``rollcheck check protocol SPEC --json`` on the reference HMNR protocol."""
    res = installed.rollcheck("check", "protocol", "hmnr", "--json", "--out", str(installed.empty.parent / "cex"))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "safe"
    assert doc["examples"] > 0
    assert doc["counterexample"] is None


# (arguments, expected exit code, check of the JSON document or None); {example} is the shipped
# example pattern, {out} a folder outside the working directory
COMMANDS = [
    (["useless", "{example}", "--json"], 0,
     lambda d: d["useless"] == [{"process": "P0", "index": 2}, {"process": "P1", "index": 1},
                                {"process": "P1", "index": 2}]),
    (["zpath", "{example}", "--from", "P1:1", "--to", "P1:1", "--json"], 0, lambda d: d["exists"] is True),
    (["recovery-line", "{example}", "--failed", "P1", "--json"], 0, lambda d: d["line"]["P1"] == 0),
    (["protocol", "hmnr", "{example}", "--json"], 0, lambda d: d["protocol"] == "hmnr" and d["forced"]),
    (["render", "{example}", "-o", "{out}/d.png", "--failed", "P1", "--zcycles"], 0, None),
    (["interval", "optimal", "--failure-rate", "0.005", "--checkpoint-cost", "5", "--json"], 0,
     lambda d: round(d["interval"], 3) == 46.452),
    (["trt", "--ci", "10", "--timeout", "5", "--recovery", "3", "--warmup", "2", "--ratio", "0.5", "--json"], 0,
     lambda d: d["trt"]["worst"] == 47.375),
    (["simulate", "--workload", "wordcount", "--protocol", "hmnr", "--records", "15", "--json"], 0,
     lambda d: d["metrics"]["verdict"] == "exactly-once"),
    (["simulate", "--workload", "nhop", "--protocol", "cl-aligned", "--interval", "5", "--records", "20", "--json"], 1,
     lambda d: d["deadlock"]["stuck"]),
    (["validate", "{out}/missing.json"], 2, None),
]


@pytest.mark.parametrize(("args", "code", "check"), COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_commands_from_the_installed_wheel(args: list[str], code: int, check: object, installed: Installed) -> None:
    out = installed.empty.parent / "out"
    out.mkdir(exist_ok=True)
    example = installed.resource("rollcheck.data", "useless.json")
    res = installed.rollcheck(*[a.format(example=example, out=out) for a in args])
    assert res.returncode == code, res.stdout[-2000:] + res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    if check is not None:
        assert check(json.loads(res.stdout)), res.stdout[-2000:]  # type: ignore[operator]
    if args[0] == "render":
        assert (out / "d.png").stat().st_size > 0
    assert list(installed.empty.iterdir()) == []
