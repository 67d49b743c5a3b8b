"""Class-data archives (JDK AppCDS) for the short-lived Spark drivers of a verify section.

A dynamic archive (``-XX:ArchiveClassesAtExit``) maps already parsed and verified classes into
later JVMs of the same class path, which roughly halves a small Spark session's CPU (9.5 → 5.2
CPU s). :func:`use_class_archive` makes one per machine by a training run, under a file lock,
named by a hash of the Java binary and class path, and adds ``-XX:SharedArchiveFile`` to the
launcher's variable. Nothing depends on it: a failed training run leaves no file.
``ROLLCHECK_CLASS_ARCHIVES=0`` turns the archives off. Measurements (and why TLC and PyFlink do
not use it): docs/internals/verify.md#class-data-archives-rollchecksections_class_archive.

References
----------
JEP 350, Dynamic CDS Archiving (JDK 13); ``java`` manual, "Application Class Data Sharing".
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = ["ARCHIVE_LOGGING", "ArchiveKind", "archive_path", "make_archive", "use_class_archive", "KINDS"]

#: Unified logging of a JVM that uses or dumps an archive: errors only, on stderr.
ARCHIVE_LOGGING = ("-Xlog:disable", "-Xlog:all=error:stderr")

#: Seconds a training run may take before it is killed (and no archive is made).
TRAINING_LIMIT = 180.0


@dataclass(frozen=True)
class ArchiveKind:
    """One kind of JVM: the variable its launcher reads, its class path, how to train it."""

    name: str
    variable: str
    java: Callable[[], str | None]
    classpath: Callable[[], list[Path]]
    train: Callable[[list[str], Path], bool]  # (JVM options, scratch folder) -> ran to its end


def _fingerprint(java: str, files: Iterable[Path]) -> str:
    """A hash of the Java binary, its JVM library and the class path files (name, size, mtime)."""
    h = hashlib.sha256()
    real = Path(java).resolve()
    home = real.parent.parent
    for p in [real, home / "lib" / "server" / "libjvm.so", home / "lib" / "server" / "classes.jsa",
              *sorted(files)]:
        try:
            st = p.stat()
            h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{p}\0-\n".encode())
    return h.hexdigest()[:20]


def archive_path(kind: ArchiveKind) -> Path | None:
    """Where ``kind``'s archive lives for this Java and class path (None: no Java or no class path)."""
    from rollcheck.infra.release_envs import cache_root

    java = kind.java()
    files = kind.classpath()
    if java is None or not files:
        return None
    return cache_root() / "jvm-archives" / f"{kind.name}-{_fingerprint(java, files)}.jsa"


def make_archive(kind: ArchiveKind, log: Callable[[str], None] = print) -> Path | None:
    """``kind``'s archive, made by one training run when missing; None when it cannot be made."""
    from rollcheck.infra.release_envs import locked

    path = archive_path(kind)
    if path is None:
        return None
    if path.is_file():
        return path
    try:
        with locked(path.with_suffix(".lock")):
            if path.is_file():  # made by another process while this one waited
                return path
            tmp = path.with_name(f"{path.name}.{os.getpid()}.part")  # renamed only when complete
            try:
                with tempfile.TemporaryDirectory(prefix=f"rollcheck-{kind.name}-archive-") as d:
                    t0 = time.monotonic()
                    ok = kind.train([f"-XX:ArchiveClassesAtExit={tmp}", *ARCHIVE_LOGGING], Path(d))
                if not ok or not tmp.is_file() or tmp.stat().st_size == 0:
                    log(f"  {kind.name}: no class-data archive (its training run did not finish); "
                        "its JVMs start without one")
                    return None
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            log(f"  {kind.name}: class-data archive made in {time.monotonic() - t0:.0f} s ({path.name})")
            return path
    except OSError as e:  # a full disk or a read-only cache: an environment failure, not fatal here
        log(f"  {kind.name}: no class-data archive ({e.strerror or e}); its JVMs start without one")
        return None


def use_class_archive(kind: ArchiveKind | str, log: Callable[[str], None] = print) -> Path | None:
    """Make (once) and use ``kind``'s archive in this process's environment; its path, or None.

    ``ROLLCHECK_JVM_DEFAULTS=1`` or ``ROLLCHECK_CLASS_ARCHIVES=0`` turns it off (returns None).
    """
    k = KINDS[kind] if isinstance(kind, str) else kind
    if os.environ.get("ROLLCHECK_JVM_DEFAULTS") == "1" or os.environ.get("ROLLCHECK_CLASS_ARCHIVES") == "0":
        return None
    path = make_archive(k, log)
    if path is None:
        return None
    prev = os.environ.get(k.variable, "").split()
    opts = [f"-XX:SharedArchiveFile={path}", *ARCHIVE_LOGGING]
    os.environ[k.variable] = " ".join([o for o in prev if not o.startswith("-XX:SharedArchiveFile=")
                                       and o not in ARCHIVE_LOGGING] + opts)
    return path


# ---------------------------------------------------------------------------------------------
# The kinds: Spark's driver
# ---------------------------------------------------------------------------------------------


def _training_environ(**extra: str) -> dict[str, str]:
    """The environment of a training run: no archive in use, plus ``extra`` options.

    A JVM that dumps an archive must not map another; ``extra`` options are appended to their
    variables.
    """
    env = dict(os.environ)
    for var in {k.variable for k in KINDS.values()}:
        kept = [o for o in env.get(var, "").split() if not o.startswith("-XX:SharedArchiveFile=")
                and o not in ARCHIVE_LOGGING]
        kept += extra.get(var, "").split()
        if kept:
            env[var] = " ".join(kept)
        else:
            env.pop(var, None)
    return env


def _members_left(pgid: int) -> bool:
    """Whether a process of group ``pgid`` other than its leader and the leader's children runs.

    The leader is the watchdog of :mod:`rollcheck.infra.children`.
    """
    for pid in psutil.pids():
        if pid == pgid:
            continue
        try:
            if os.getpgid(pid) != pgid:
                continue
            proc = psutil.Process(pid)
            with proc.oneshot():
                if proc.ppid() != pgid and proc.status() != psutil.STATUS_ZOMBIE:
                    return True
        except (OSError, psutil.Error):  # gone meanwhile
            continue
    return False


def _run_training(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> bool:
    """Run a training command to its end, then wait for the JVM it started.

    The JVM writes the archive as it exits, after the Python process that drove it (the group dies
    with us).
    """
    from rollcheck.infra import children

    try:
        with children.spawn(list(cmd), cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
            deadline = time.monotonic() + TRAINING_LIMIT
            code = proc.wait(timeout=TRAINING_LIMIT)
            while _members_left(proc.group.pgid):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)
            return code == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _spark_classpath() -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return []
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return sorted(jars.glob("*.jar"))


#: The Spark training workload: a small stateful streaming aggregation to its end (file source,
#: a state store, a checkpoint, a foreachBatch sink), then a batch query.
_SPARK_TRAINING = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from pyspark.sql import SparkSession
    d = Path(sys.argv[1])
    (d / "in").mkdir()
    for b in range(2):
        (d / "in" / f"{b}.json").write_text("".join(json.dumps({"k": i % 3, "v": i}) + "\\n" for i in range(20)))
    s = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    src = s.readStream.schema("k INT, v INT").option("maxFilesPerTrigger", 1).json(str(d / "in"))
    q = (src.groupBy("k").sum("v").writeStream.outputMode("update")
         .option("checkpointLocation", str(d / "chk")).foreachBatch(lambda df, i: df.collect())
         .trigger(availableNow=True).start())
    q.awaitTermination()
    s.range(100).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    s.stop()
""")


def _spark_train(opts: list[str], scratch: Path) -> bool:
    script = scratch / "train.py"
    script.write_text(_SPARK_TRAINING, encoding="utf-8")
    env = _training_environ(SPARK_SUBMIT_OPTS=" ".join(opts))
    return _run_training([sys.executable, str(script), str(scratch)], scratch, env)


#: The kinds of JVM a verify section starts, by name.
KINDS: dict[str, ArchiveKind] = {
    "spark": ArchiveKind("spark", "SPARK_SUBMIT_OPTS", _java, _spark_classpath, _spark_train),
}
