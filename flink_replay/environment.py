"""Where the PyFlink environment is and how the Java tap operator is built.

PyFlink (``apache-flink`` 2.3) pins numpy, pandas, pyarrow, py4j and apache-beam versions of
its own, so rollcheck runs its Flink jobs in a separate virtual environment, ``.venv-flink``
(``make flink-setup``), as a subprocess. This module finds that environment and compiles the
small Java operator (``RollcheckTap.java``, shipped as package data) with ``javac``
against the ``flink-dist`` jar of that PyFlink installation, once, into a cache folder.

Without the environment every ``rollcheck flink`` command is *inconclusive* (exit 3) and says
how to install it. ``find_flink(version)`` (``--engine-version V``) uses the environment of
apache-flink ``V`` that :mod:`rollcheck.flink_replay.releases` makes once in rollcheck's cache
folder; the Java operators are compiled against each release's own jars (cached per release).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rollcheck.flink_replay.releases import PINNED, flink_python, parse_release
from rollcheck.infra import children
from rollcheck.infra.release_envs import cache_root
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError

__all__ = ["FlinkEnvironment", "find_flink", "tap_jar", "INSTALL_HINT", "JAVA_SOURCES"]

INSTALL_HINT = ("install it with `make flink-setup` (a separate .venv-flink with apache-flink 2.3 "
                "and a JDK), or point ROLLCHECK_FLINK_PYTHON at a Python that has pyflink")


@dataclass(frozen=True)
class FlinkEnvironment:
    """A usable PyFlink installation.

    Attributes
    ----------
    python : Path
        The interpreter of the Flink environment.
    pyflink_dir : Path
        The installed ``pyflink`` package (its ``lib/`` holds ``flink-dist``).
    version : str
        The PyFlink version.
    """

    python: Path
    pyflink_dir: Path
    version: str

    @property
    def flink_dist(self) -> Path:
        """The ``flink-dist`` jar of the installation; raises :class:`InconclusiveError` when missing."""
        jars = sorted((self.pyflink_dir / "lib").glob("flink-dist*.jar"))
        if not jars:
            raise InconclusiveError(f"no flink-dist jar under {self.pyflink_dir / 'lib'}: {INSTALL_HINT}")
        return jars[0]


def _candidates() -> list[Path]:
    env = os.environ.get("ROLLCHECK_FLINK_PYTHON")
    if env:
        return [Path(env)]
    out = []
    for base in [Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parent.parent]:
        out.append(base / ".venv-flink" / "bin" / "python")
    # last: rollcheck's own interpreter, for one environment with the extra rollcheck[flink]
    out.append(Path(sys.executable))
    return out


_PROBE = "import os, pyflink, pyflink.version as v; print(os.path.dirname(pyflink.__file__)); print(v.__version__)"


def _probe(cand: Path) -> FlinkEnvironment | None:
    if not cand.exists():
        return None
    try:
        r = children.run([str(cand), "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    lines = r.stdout.strip().splitlines()
    return FlinkEnvironment(cand, Path(lines[0]), lines[1] if len(lines) > 1 else "?")


def find_flink(version: str | None = None) -> FlinkEnvironment:
    """Locate the PyFlink environment (of apache-flink ``version``, when given).

    Without ``version``: looks at ``ROLLCHECK_FLINK_PYTHON``, then ``.venv-flink/bin/python`` in
    the working directory, its parents and the checkout this package was installed from, then the
    running interpreter (an environment with the extra ``rollcheck[flink]``). With ``version``
    (``--engine-version``): that default environment when it holds that release, else the
    release's own environment in rollcheck's cache folder, made once
    (:func:`rollcheck.flink_replay.releases.flink_python`).

    Raises
    ------
    InconclusiveError
        No interpreter with ``pyflink`` was found (the message says how to install it).
    InvalidInputError
        ``version`` is malformed, unsupported or cannot be installed (exit 2 naming it and pip's reason).
    """
    if version is not None:
        parse_release(version)
        version = version.strip()
        if version == PINNED:
            for cand in _candidates():
                found = _probe(cand)
                if found is not None and found.version == version:
                    return found
        python = flink_python(version)
        found = _probe(python) if python is not None else None
        if found is None or found.version != version:
            raise InvalidInputError(f"apache-flink {version}: its environment ({python}) does not import "
                                    f"pyflink {version}", location="--engine-version")
        return found
    for cand in _candidates():
        found = _probe(cand)
        if found is not None:
            return found
    raise InconclusiveError(f"PyFlink is not installed: {INSTALL_HINT}")


def _cache_root() -> Path:
    """Where compiled operator jars are kept: ``<cache>/flink/<hash of the sources and the release's jar>``."""
    return cache_root() / "flink"


JAVA_SOURCES = ("RollcheckTap.java", "RollcheckKeyedTap.java", "RollcheckKeys.java", "RollcheckStateLog.java")


def tap_jar(env: FlinkEnvironment) -> Path:
    """Compile the Java operators (``JAVA_SOURCES``) against ``flink-dist`` (once; cached by content).

    Raises
    ------
    InconclusiveError
        ``javac`` is missing or the compilation failed (the message says why).
    """
    pkg = resources.files("rollcheck.flink_replay.job")
    srcs = {name: pkg.joinpath(name).read_bytes() for name in JAVA_SOURCES}
    dist = env.flink_dist
    # the user-state log subclasses PyFlink's embedded operators (flink-python) and names the
    # window type of the table runtime
    cp = [dist, *sorted((env.pyflink_dir / "opt").glob("flink-python*.jar")),
          *sorted((env.pyflink_dir / "lib").glob("flink-table-runtime*.jar"))]
    key = hashlib.sha256(b"".join(srcs.values()) + str(dist).encode()).hexdigest()[:16]
    target = _cache_root() / key / "rollcheck-tap.jar"
    if target.exists():
        return target
    javac = shutil.which("javac")
    jar = shutil.which("jar")
    if javac is None or jar is None:
        raise InconclusiveError("javac/jar not found (a JDK is needed to build rollcheck's Flink "
                                "checkpoint listener): install openjdk-17-jdk-headless or run `make flink-setup`")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        files = []
        for name, src in srcs.items():
            (Path(tmp) / name).write_bytes(src)
            files.append(str(Path(tmp) / name))
        classes = Path(tmp) / "classes"
        classes.mkdir()
        r = children.run([javac, "-nowarn", "-d", str(classes), "-cp", os.pathsep.join(map(str, cp)), *files],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise InconclusiveError(f"javac failed to build the Flink listener: {r.stderr.strip()[:400]}")
        part = Path(tmp) / "tap.jar"
        r = children.run([jar, "cf", str(part), "-C", str(classes), "."], capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            raise InconclusiveError(f"jar failed: {r.stderr.strip()[:400]}")
        os.replace(part, target)
    return target
