"""What every engine-release environment shares: the cache folder, the creation lock, pip's reason.

rollcheck makes once, and reuses, a separate virtual environment per engine release a user asks
for (``--engine-version V``): pyspark in :mod:`rollcheck.spark_replay.releases`, apache-flink in
:mod:`rollcheck.flink_replay.releases`. Both keep them under :func:`cache_root` (``$ROLLCHECK_CACHE``,
else the user cache folder), one folder per engine; both serialise the creation of one release
with a lock file beside it (:func:`locked`) and word a failed installation as the release and
pip's own last error line (:func:`pip_reason`).

References
----------
``docs/spark.md`` and ``docs/flink.md`` ("On the release you run").
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from rollcheck.infra import children
from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["cache_root", "locked", "pip_reason", "clean_environ", "parse_full_release", "parse_engine_release",
           "STAMP", "install_step", "make_environment"]

#: The file that marks an environment as complete (written last).
STAMP = ".rollcheck-complete"


def cache_root() -> Path:
    """Rollcheck's cache folder: ``$ROLLCHECK_CACHE``, else the user cache folder.

    The user cache folder is ``platformdirs``' where installed, else ``$XDG_CACHE_HOME/rollcheck``
    or ``~/.cache/rollcheck``.

    Examples
    --------
    >>> import os
    >>> old = os.environ.get("ROLLCHECK_CACHE"); os.environ["ROLLCHECK_CACHE"] = "/tmp/rc-cache"
    >>> str(cache_root())
    '/tmp/rc-cache'
    >>> _ = os.environ.pop("ROLLCHECK_CACHE") if old is None else os.environ.update(ROLLCHECK_CACHE=old)
    """
    env = os.environ.get("ROLLCHECK_CACHE")
    if env:
        return Path(env)
    try:
        import platformdirs
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "rollcheck"
    return Path(platformdirs.user_cache_dir("rollcheck", appauthor=False))


def parse_full_release(version: str) -> tuple[int, int, int] | None:
    """``"1.20.5"`` -> ``(1, 20, 5)``; None for anything that is not ``X.Y.Z``.

    Examples
    --------
    >>> parse_full_release(" 1.20.5 ")
    (1, 20, 5)
    >>> parse_full_release("1.20") is None
    True
    """
    parts = version.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def parse_engine_release(version: str, *, package: str, supported: tuple[tuple[int, int, int], tuple[int, int, int]],
                         example: str, location: str = "--engine-version") -> tuple[int, int, int]:
    """``version`` as ``(X, Y, Z)``, refusing anything but a supported full release.

    A full release of ``package`` in ``supported[0] <= V < supported[1]`` (what
    ``--engine-version`` and ``--reference-version`` accept; pyspark's and apache-flink's
    ``parse_release`` call it with their range).

    Parameters
    ----------
    version : str
        The release as given (surrounding blanks ignored).
    package : str
        The engine's package, as the messages name it (``pyspark``, ``apache-flink``).
    supported : tuple
        The half-open range of supported releases.
    example : str
        A release the message of a malformed one suggests.
    location : str
        The flag the refusal names.

    Raises
    ------
    InvalidInputError
        Not ``X.Y.Z``, or outside ``supported`` (naming the package, the release and ``location``).

    Examples
    --------
    >>> parse_engine_release(" 1.20.5", package="apache-flink", supported=((1, 19, 0), (3, 0, 0)), example="1.20.5")
    (1, 20, 5)
    >>> parse_engine_release("9.0.0", package="pyspark", supported=((3, 4, 0), (5, 0, 0)), example="3.5.9",
    ...                      location="--reference-version")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --reference-version: pyspark 9.0.0 is not supported: rollcheck supports pyspark 3.4.0 <= V < 5.0.0
    """
    v = parse_full_release(version)
    if v is None:
        raise InvalidInputError(f"{package} {version!r} is not a release: give one like {example} (X.Y.Z)",
                                location=location)
    if not supported[0] <= v < supported[1]:
        lo, hi = (".".join(map(str, x)) for x in supported)
        raise InvalidInputError(f"{package} {version.strip()} is not supported: rollcheck supports "
                                f"{package} {lo} <= V < {hi}", location=location)
    return v


def pip_reason(stderr: str) -> str:
    r"""Pip's reason in one line: its last ``ERROR:`` line, else its last line.

    Examples
    --------
    >>> pip_reason("Looking in indexes\nERROR: No matching distribution found for apache-flink==1.99.0\n")
    'No matching distribution found for apache-flink==1.99.0'
    """
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR:")]
    pick = errors[-1] if errors else (lines[-1] if lines else "pip failed without a message")
    pick = pick.removeprefix("ERROR:").strip()
    return pick if len(pick) <= 300 else pick[:300] + " …"


def clean_environ() -> dict[str, str]:
    """The running process's environment without Python's path variables.

    A child that makes or probes another interpreter's environment runs with it.
    """
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created, with its folder).

    One rollcheck makes a given release's environment at a time; another one waits (and says so
    on stderr).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"rollcheck: waiting for another rollcheck that is making {path.stem} ...", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def install_step(argv: list[str], what: str, *, package: str, version: str, timeout: float) -> None:
    """Run one step of making ``package`` ``version``'s environment (``python -m venv``, ``pip install``).

    Parameters
    ----------
    argv : list of str
        The step's command.
    what : str
        The step in words (named in the error).
    package : str
        The engine's package.
    version : str
        Its release.
    timeout : float
        Seconds the step may take.

    Raises
    ------
    InvalidInputError
        The step failed or took more than ``timeout`` seconds: the release and pip's reason, in
        one line naming ``--engine-version``.
    """
    try:
        r = children.run(argv, capture_output=True, text=True, timeout=timeout, env=clean_environ())
    except subprocess.TimeoutExpired:
        raise InvalidInputError(f"{package} {version} cannot be installed: {what} took more than {timeout:.0f} s",
                                location="--engine-version") from None
    if r.returncode != 0:
        raise InvalidInputError(f"{package} {version} cannot be installed: {pip_reason(r.stderr or r.stdout)}",
                                location="--engine-version")


def make_environment(root: Path, python: Path, *, package: str, version: str, requirements: Sequence[str],
                     run: Callable[[list[str], str, str, float], None], installed: Callable[[Path], str],
                     timeout: float, finish: Callable[[Path], None] | None = None,
                     stamp: Mapping[str, object] | None = None) -> None:
    """Make ``package`` ``version``'s virtual environment in ``root``; call it holding :func:`locked`.

    A half-made folder (no :data:`STAMP`) is removed first; a failure removes what it made; the
    stamp is written last, so a folder with one is complete.

    Parameters
    ----------
    root, python : Path
        The environment's folder and its interpreter.
    package, version : str
        What pip installs, as messages name it.
    requirements : sequence of str
        ``pip install``'s arguments (the release and its companions).
    run : callable
        ``run(argv, what, version, timeout)``: one step (:func:`install_step` with the package).
    installed : callable
        ``installed(python) -> release``: the release the new environment imports.
    timeout : float
        Seconds ``pip install`` may take.
    finish : callable, optional
        Called with ``root`` once the release is installed and checked.
    stamp : mapping, optional
        More keys for the stamp (beside ``{package: version, "seconds": ...}``).

    Raises
    ------
    InvalidInputError
        A step failed, or pip installed another release.
    """
    if root.exists():  # half-made (no stamp): never reused
        shutil.rmtree(root)
    print(f"rollcheck: making the environment of {package} {version} in {root} (once) ...", file=sys.stderr)
    t0 = time.monotonic()
    try:
        run([sys.executable, "-m", "venv", str(root)], "python -m venv", version, 600)
        run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
            "pip install", version, timeout)
        got = installed(python)
        if got != version:
            raise InvalidInputError(f"{package} {version} cannot be installed: pip installed {got}",
                                    location="--engine-version")
        if finish is not None:
            finish(root)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    (root / STAMP).write_text(json.dumps({package: version, **(stamp or {}),
                                          "seconds": round(time.monotonic() - t0, 1)}) + "\n", encoding="utf-8")
    print(f"rollcheck: {package} {version} ready in {time.monotonic() - t0:.0f} s", file=sys.stderr)
