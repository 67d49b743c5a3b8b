"""The pyspark release a recording runs on: one separate, cached virtual environment per release.

A user runs the Spark release they run in production, not the one rollcheck pins. ``rollcheck
spark record query --engine-version V`` (and the matrix's ``--engine-version V[,V2]``) records
the query on pyspark ``V``: :func:`spark_environment` makes once, and then reuses, a virtual
environment with ``pyspark==V`` and what the recorder's queries need on that release (pandas,
pyarrow and numpy of that release's era; protobuf from 4.0 on) in rollcheck's cache folder
(:func:`cache_root`: ``$ROLLCHECK_CACHE``, else the user cache folder), with the same isolation
as the Flink environment: the recorder runs there as a child process and sees nothing of
rollcheck's own environment but rollcheck's source packages, which the small import hook
:data:`BRIDGE` (installed into the environment as a ``.pth`` file) maps to the running
rollcheck's folders when, and only when, ``ROLLCHECK_SOURCES`` names them (the recorder's driver
and Spark's Python workers inherit it).

- Supported: pyspark ``3.4 <= V < 5`` (:data:`SUPPORTED`), a full release ``X.Y.Z`` that pip can
  install here; anything else is refused (exit 2) naming the release and pip's reason.
- The release of the running interpreter (the pinned one, rollcheck's own dependency) needs no
  environment: :func:`spark_environment` returns the running interpreter.
- A lock file (``pyspark-V.lock``) serialises the creation; an environment is used only when its
  stamp (:data:`STAMP`, written last, after the installed release was imported and its version
  read back) is there: a half-made one (a killed installation) is removed and made again.

References
----------
``docs/spark.md`` ("On the release you run"); the Flink environment, :mod:`rollcheck.flink_replay.environment`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path

from rollcheck.infra import children
from rollcheck.infra.release_envs import (
    STAMP,
    cache_root,
    install_step,
    make_environment,
    parse_engine_release,
)
from rollcheck.infra.release_envs import locked as _locked
from rollcheck.infra.release_envs import pip_reason as _pip_reason
from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "SUPPORTED",
    "STAMP",
    "BRIDGE",
    "SOURCES_VAR",
    "cache_root",
    "parse_release",
    "pinned_release",
    "companions",
    "spark_environment",
    "release_of",
    "sources_map",
    "child_environment",
    "HOME_VAR",
]

#: The supported pyspark releases: ``SUPPORTED[0] <= V < SUPPORTED[1]``.
SUPPORTED = ((3, 4, 0), (5, 0, 0))
#: The environment variable through which a recorder child finds rollcheck's source packages.
SOURCES_VAR = "ROLLCHECK_SOURCES"
#: The environment variable through which a child in a release environment finds rollcheck's own
#: interpreter and its pyspark release (a JSON object ``{"python": path, "pyspark": release}``):
#: :func:`spark_environment` there answers the pinned release with that interpreter.
HOME_VAR = "ROLLCHECK_HOME_PYTHON"
#: Seconds pip may take to make one environment (pyspark is a ~300 MB download and a build).
INSTALL_TIMEOUT_S = 1800.0
#: The packages whose folders the bridge maps (the installed layout's top-level subpackages).
_PACKAGES = ("rollcheck", "rollcheck.pyimpl", "rollcheck.infra", "rollcheck.spark_replay", "rollcheck.properties",
             "rollcheck.tla", "rollcheck.flink_replay")

#: The import hook put into every release environment (``_rollcheck_bridge.py`` with a ``.pth``
#: line that imports it): with ``ROLLCHECK_SOURCES`` set (a JSON object ``{package: folder}``)
#: those packages are imported from those folders; without it the environment is plain pyspark.
BRIDGE = '''"""rollcheck's import hook for a pyspark release environment (written by rollcheck)."""
import importlib.abc
import importlib.util
import json
import os
import sys


class _RollcheckSources(importlib.abc.MetaPathFinder):
    def __init__(self, folders):
        self.folders = folders

    def find_spec(self, fullname, path=None, target=None):
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])


def install():
    raw = os.environ.get("ROLLCHECK_SOURCES")
    if not raw:
        return
    try:
        folders = json.loads(raw)
    except ValueError:
        return
    if isinstance(folders, dict) and not any(isinstance(f, _RollcheckSources) for f in sys.meta_path):
        sys.meta_path.insert(0, _RollcheckSources({str(k): str(v) for k, v in folders.items()}))


install()
'''

def parse_release(version: str, location: str = "--engine-version") -> tuple[int, int, int]:
    """``"3.5.9"`` -> ``(3, 5, 9)``.

    Refusing anything but a supported full release
    (:func:`rollcheck.infra.release_envs.parse_engine_release` with :data:`SUPPORTED`).

    Parameters
    ----------
    version : str
        ``X.Y.Z``.
    location : str, optional
        The flag or field an error names.

    Raises
    ------
    InvalidInputError
        Not ``X.Y.Z``, or outside :data:`SUPPORTED` (naming the release and ``location``, the flag).

    Examples
    --------
    >>> parse_release("3.5.9")
    (3, 5, 9)
    >>> parse_release("3.3.4")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --engine-version: pyspark 3.3.4 is not supported: rollcheck supports pyspark 3.4.0 <= V < 5.0.0
    """
    return parse_engine_release(version, package="pyspark", supported=SUPPORTED, example="3.5.9", location=location)


def pinned_release() -> str:
    """The pyspark release of the running interpreter (rollcheck's pinned dependency)."""
    return importlib.metadata.version("pyspark")


#: What rollcheck's recorder imports in every release's environment besides pyspark's companions
#: (typing-extensions: the oracle marks the methods a protocol documents with its override).
RECORDER_PACKAGES = ("lz4>=4.3,<5", "xxhash>=3.4,<5", "psutil>=5.9,<8", "typing-extensions>=4.6")


def _stamped(root: Path, version: str) -> bool:
    """The environment is complete for what this rollcheck installs there.

    Its stamp lists :func:`companions`. One made by an older rollcheck gets the missing packages
    (under the lock).
    """
    try:
        stamp = json.loads((root / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp.get("packages") == companions(version)


def _top_up(root: Path, version: str) -> None:
    python = _env_python(root)
    _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *companions(version)],
         "pip install", version, INSTALL_TIMEOUT_S)
    stamp = json.loads((root / STAMP).read_text(encoding="utf-8"))
    tmp = root / (STAMP + ".tmp")
    tmp.write_text(json.dumps({**stamp, "packages": companions(version)}) + "\n", encoding="utf-8")
    os.replace(tmp, root / STAMP)


def companions(version: str) -> list[str]:
    """What the environment of pyspark ``version`` gets next to ``pyspark==version``.

    The pandas, pyarrow and numpy its pandas UDFs (``applyInPandasWithState``) were released
    against, and from 4.0 on protobuf (the state client of ``transformWithStateInPandas``).

    Examples
    --------
    >>> companions("3.5.9")[0]
    'pyspark==3.5.9'
    """
    v = parse_release(version)
    if v < (3, 5, 0):  # 3.4: pandas 2 removed iteritems, which its pandas conversion still calls
        extra = ["pandas>=1.5,<2", "numpy>=1.23,<1.27", "pyarrow>=11,<13"]
    elif v < (4, 0, 0):  # 3.5: numpy 2 removed np.NaN, which its pandas code still uses
        extra = ["pandas>=2.0,<2.3", "numpy>=1.26,<2", "pyarrow>=12,<17"]
    else:
        extra = ["pandas>=2.2,<3", "numpy>=1.26,<3", "pyarrow>=15", "protobuf>=4.25"]
    # what rollcheck's own recorder imports there: the state files' LZ4 blocks and checksums,
    # process trees (pyproject's dependencies of the same names)
    return [f"pyspark=={version}", *extra, *RECORDER_PACKAGES]


def _env_python(root: Path) -> Path:
    return root / "bin" / "python"


def _write_bridge(root: Path) -> None:
    """(Re)write the import hook and its ``.pth`` line into the environment's site-packages."""
    for site in sorted(root.glob("lib/python*/site-packages")):
        bridge = site / "_rollcheck_bridge.py"
        if not bridge.exists() or bridge.read_text(encoding="utf-8") != BRIDGE:
            tmp = bridge.with_name(bridge.name + ".tmp")
            tmp.write_text(BRIDGE, encoding="utf-8")
            os.replace(tmp, bridge)
        pth = site / "_rollcheck_bridge.pth"
        if not pth.exists():
            pth.write_text("import _rollcheck_bridge\n", encoding="utf-8")


def _run(argv: list[str], what: str, version: str, timeout: float) -> None:
    install_step(argv, what, package="pyspark", version=version, timeout=timeout)


def release_of(python: Path | str) -> str:
    """The pyspark release importable by ``python`` (raises ``InvalidInputError`` if none)."""
    r = children.run([str(python), "-s", "-c", "import pyspark; print(pyspark.__version__)"],
                     capture_output=True, text=True, timeout=300,
                     env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")})
    if r.returncode != 0 or not r.stdout.strip():
        raise InvalidInputError(f"no pyspark importable by {python}: {_pip_reason(r.stderr)}",
                                location="--engine-version")
    return r.stdout.strip().splitlines()[-1]


def spark_environment(version: str | None = None) -> Path:
    """The Python interpreter that runs recordings on pyspark ``version`` (made once, then reused).

    Parameters
    ----------
    version : str, optional
        A pyspark release ``X.Y.Z`` with ``3.4 <= V < 5``. None, or the release of the running
        interpreter (the pinned one): the running interpreter itself.

    Returns
    -------
    Path
        ``<cache>/spark/pyspark-V/bin/python`` (or ``sys.executable``). Run a recorder there
        with :func:`child_environment` (``ROLLCHECK_SOURCES``) in its environment.

    Raises
    ------
    InvalidInputError
        The release is malformed, out of range, or pip cannot install it (one line: the release
        and pip's reason; exit 2 on the command line).
    """
    if version is None:
        return Path(sys.executable)
    parse_release(version)
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        if pinned_release() == version:
            return Path(sys.executable)
    home = _home()
    if home is not None and home[1] == version:  # in a release environment: rollcheck's own interpreter
        return home[0]
    base = cache_root() / "spark"
    root = base / f"pyspark-{version}"
    python = _env_python(root)
    if (root / STAMP).exists() and python.exists() and _stamped(root, version):
        _write_bridge(root)
        return python
    with _locked(base / f"pyspark-{version}.lock"):
        if (root / STAMP).exists() and python.exists():  # made by another rollcheck meanwhile
            if not _stamped(root, version):  # made by an older rollcheck: what it lacks
                _top_up(root, version)
            _write_bridge(root)
            return python
        make_environment(root, python, package="pyspark", version=version, requirements=companions(version),
                         run=_run, installed=release_of, timeout=INSTALL_TIMEOUT_S, finish=_write_bridge,
                         stamp={"packages": companions(version)})
    return python


def _home() -> tuple[Path, str] | None:
    """The interpreter of rollcheck itself and its pyspark release (:data:`HOME_VAR`), or None."""
    try:
        doc = json.loads(os.environ.get(HOME_VAR) or "null")
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("python"), str) or not isinstance(doc.get("pyspark"), str):
        return None
    python = Path(doc["python"])
    return (python, doc["pyspark"]) if python.is_file() else None


def sources_map() -> dict[str, str]:
    """Where the running rollcheck's packages are: ``{package: folder}`` for :data:`BRIDGE`."""
    out: dict[str, str] = {}
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out[name] = str(list(spec.submodule_search_locations)[0])
    return out


def child_environment(python: Path | str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The process environment of a recorder child run by ``python``.

    For a release environment rollcheck's source folders (:data:`SOURCES_VAR`), rollcheck's own
    interpreter (:data:`HOME_VAR`, kept when the caller runs in a release environment itself) and
    nothing of the running environment's Python paths or Spark installation; for the running
    interpreter ``base`` unchanged.

    Parameters
    ----------
    python : Path or str
        The child's interpreter.
    base : dict, optional
        The environment to start from; None for this process's.

    Returns
    -------
    dict
        The child's environment.
    """
    env = dict(os.environ if base is None else base)
    if Path(python) == Path(sys.executable):
        return env
    for k in ("PYTHONPATH", "PYTHONHOME", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        env.pop(k, None)
    env[SOURCES_VAR] = json.dumps(sources_map())
    home = _home()
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        env[HOME_VAR] = json.dumps({"python": str(home[0]), "pyspark": home[1]} if home is not None
                                   else {"python": sys.executable, "pyspark": pinned_release()})
    return env
