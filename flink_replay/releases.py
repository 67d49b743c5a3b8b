"""The apache-flink release a recording runs on: one separate, cached virtual environment per release.

``rollcheck flink record job --engine-version V`` (and the matrix's ``--engine-version V[,V2]``)
records the job on apache-flink ``V``: :func:`flink_python` makes once, and then reuses, a virtual
environment with ``apache-flink==V`` in rollcheck's cache folder (``<cache>/flink/apache-flink-V``,
:func:`rollcheck.infra.release_envs.cache_root`), isolated as ``.venv-flink`` is. rollcheck's Java
operators are compiled against that release's own jars
(:func:`rollcheck.flink_replay.environment.tap_jar`, cached per release). Supported:
:data:`SUPPORTED` (anything else is refused, exit 2); the pinned release (:data:`PINNED`) uses the
default environment.

See docs/internals/flink-recording.md#releases for the lock and stamp of an environment and what
differs between the releases.

References
----------
``docs/flink.md`` ("On the release you run"); the Spark counterpart,
:mod:`rollcheck.spark_replay.releases`.
"""

from __future__ import annotations

from pathlib import Path

from rollcheck.infra import children
from rollcheck.infra.release_envs import (
    STAMP,
    cache_root,
    clean_environ,
    install_step,
    locked,
    make_environment,
    parse_engine_release,
    parse_full_release,
    pip_reason,
)
from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["SUPPORTED", "PINNED", "STAMP", "parse_release", "flink_python", "release_of",
           "cluster_config_name", "release_root"]

#: The supported apache-flink releases: ``SUPPORTED[0] <= V < SUPPORTED[1]``.
SUPPORTED = ((1, 19, 0), (3, 0, 0))
#: The release ``make flink-setup`` installs into ``.venv-flink`` (the default).
PINNED = "2.3.0"
#: Seconds pip may take to make one environment (apache-flink is a ~300 MB download and a build).
INSTALL_TIMEOUT_S = 1800.0
_FLAG = "--engine-version"


def parse_release(version: str, location: str = _FLAG) -> tuple[int, int, int]:
    """One apache-flink release as ``(X, Y, Z)``, within :data:`SUPPORTED`.

    :func:`rollcheck.infra.release_envs.parse_engine_release` decides, and its refusal (an
    ``InvalidInputError``) names the release and ``location``, the flag.

    Parameters
    ----------
    version : str
        The release, ``X.Y.Z``.
    location : str, optional
        The flag named in the refusal.

    Returns
    -------
    tuple of (int, int, int)
        ``(X, Y, Z)``.

    Examples
    --------
    >>> parse_release("1.20.5")
    (1, 20, 5)
    """
    return parse_engine_release(version, package="apache-flink", supported=SUPPORTED, example="1.20.5",
                                location=location)


def cluster_config_name(version: str) -> str:
    """The standalone cluster's configuration file of a release.

    ``config.yaml`` from 2.0 on (Flink 2 reads only that), ``flink-conf.yaml`` before (1.19/1.20 read
    the legacy file).

    Examples
    --------
    >>> cluster_config_name("1.20.5"), cluster_config_name("2.3.0")
    ('flink-conf.yaml', 'config.yaml')
    """
    v = parse_full_release(version)
    return "config.yaml" if v is None or v >= (2, 0, 0) else "flink-conf.yaml"


def release_root(version: str) -> Path:
    """The folder of release ``version``'s environment: ``<cache>/flink/apache-flink-V``."""
    return cache_root() / "flink" / f"apache-flink-{version}"


def _run(argv: list[str], what: str, version: str, timeout: float) -> None:
    install_step(argv, what, package="apache-flink", version=version, timeout=timeout)


def release_of(python: Path | str) -> str:
    """The apache-flink release importable by ``python`` (raises ``InvalidInputError`` if none)."""
    r = children.run([str(python), "-s", "-c", "import pyflink.version as v; print(v.__version__)"],
                     capture_output=True, text=True, timeout=300, env=clean_environ())
    if r.returncode != 0 or not r.stdout.strip():
        raise InvalidInputError(f"no pyflink importable by {python}: {pip_reason(r.stderr)}", location=_FLAG)
    return r.stdout.strip().splitlines()[-1]


def flink_python(version: str | None) -> Path | None:
    """The Python interpreter that runs Flink jobs on apache-flink ``version`` (made once, then reused).

    Parameters
    ----------
    version : str, optional
        An apache-flink release ``X.Y.Z`` with ``1.19.0 <= V < 3.0.0``. None: no environment of
        its own (the default ``.venv-flink`` is used; returns None). :func:`find_flink
        <rollcheck.flink_replay.environment.find_flink>` asks for :data:`PINNED` only when the
        default environment holds another release.

    Returns
    -------
    Path or None
        ``<cache>/flink/apache-flink-V/bin/python``.

    Raises
    ------
    InvalidInputError
        The release is malformed, out of range, or pip cannot install it (one line: the release and
        pip's reason; exit 2 on the command line).
    """
    if version is None:
        return None
    parse_release(version)
    version = version.strip()
    root = release_root(version)
    python = root / "bin" / "python"
    if (root / STAMP).exists() and python.exists():
        return python
    with locked(root.parent / f"apache-flink-{version}.lock"):
        if not ((root / STAMP).exists() and python.exists()):  # else made by another rollcheck meanwhile
            make_environment(root, python, package="apache-flink", version=version,
                             requirements=[f"apache-flink=={version}"], run=_run, installed=release_of,
                             timeout=INSTALL_TIMEOUT_S)
    return python
