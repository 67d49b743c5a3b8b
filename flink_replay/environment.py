"""Where the PyFlink environment is and how the Java tap operator is built.

PyFlink (``apache-flink`` 2.3) pins numpy, pandas, pyarrow, py4j and apache-beam versions of
its own, so rollcheck runs its Flink jobs in a separate virtual environment, ``.venv-flink``
(``make flink-setup``), as a subprocess. This module finds that environment and compiles the
small Java operator (``RollcheckTap.java``, shipped as package data) with ``javac``
against the ``flink-dist`` jar of that PyFlink installation, once, into a cache folder.

Without the environment every ``rollcheck flink`` command is *inconclusive* (exit 3) and says
how to install it.
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

from rollcheck.pyimpl import children
from rollcheck.pyimpl.errors import InconclusiveError

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


def find_flink() -> FlinkEnvironment:
    """Locate the PyFlink environment.

    Looks at ``ROLLCHECK_FLINK_PYTHON``, then ``.venv-flink/bin/python`` in the working
    directory, its parents and the checkout this package was installed from, then the running
    interpreter (an environment with the extra ``rollcheck[flink]``).

    Raises
    ------
    InconclusiveError
        No interpreter with ``pyflink`` was found (the message says how to install it).
    """
    probe = "import os, pyflink, pyflink.version as v; print(os.path.dirname(pyflink.__file__)); print(v.__version__)"
    for cand in _candidates():
        if not cand.exists():
            continue
        try:
            r = children.run([str(cand), "-c", probe], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            lines = r.stdout.strip().splitlines()
            return FlinkEnvironment(cand, Path(lines[0]), lines[1] if len(lines) > 1 else "?")
    raise InconclusiveError(f"PyFlink is not installed: {INSTALL_HINT}")


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rollcheck" / "flink"


JAVA_SOURCES = ("RollcheckTap.java", "RollcheckKeyedTap.java", "RollcheckKeys.java", "RollcheckStateLog.java")


def tap_jar(env: FlinkEnvironment) -> Path:
    """Compile the Java operators (``JAVA_SOURCES``) against ``flink-dist`` (once; cached by content).

    Raises
    ------
    InconclusiveError
        ``javac`` is missing or the compilation failed (the message says why).
    """
    pkg = resources.files("rollcheck.flink_replay")
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
