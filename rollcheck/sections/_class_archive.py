"""Class-data archives (JDK AppCDS) for the short-lived Spark drivers of a verify section.

A Spark driver spends most of its CPU on small inputs loading, parsing and verifying classes.
Java 13 and later can dump the classes a JVM loaded into a *dynamic archive* at its exit
(``-XX:ArchiveClassesAtExit``) and map them, already parsed and verified, into later JVMs of the
same class path (``-XX:SharedArchiveFile``). Measured on the 2-core machine (CPU seconds of the
whole process tree, both with C1 only, see :mod:`rollcheck.sections._jvm`): a Spark session
running one small aggregation 9.5 → 5.2, one with a small streaming aggregation 11 → 6.7; in a
whole full verify run the Spark parts 565 → 475 CPU s.

Only Spark uses it. TLC and PyFlink were tried and left out, measured: an archive made TLC's
longer runs much slower (``cic-hmnr-large``, 39 840 states: 7.7 → 12.7 CPU s with the JVM's
defaults, 7.5 → 23.3 with C1 only; its tiny runs gained 0.3 s), so the TLC section used 394 CPU s
with it against 252 without; a PyFlink job collecting 200 records gained 5.8 → 4.5, but the
Flink recordings of a verify run only 59 → 55 CPU s, less than the archive's one training run.

:func:`use_class_archive` makes the archive of one kind of JVM once per machine — a *training*
run of a small representative workload, under a file lock so that parallel section processes
make it once — keeps it in rollcheck's cache folder (``$ROLLCHECK_CACHE``, else the user cache
folder; ``jvm-archives/``) under a name that hashes the Java binary, the JVM library and every
class path file (size and modification time), and adds ``-XX:SharedArchiveFile`` to the
environment variable that JVM's launcher reads. An archive that does not fit (another JDK, a
changed jar) is never used: its name would differ; and a JVM that finds it unusable runs without
it (``-Xshare:auto``) with its CDS messages silenced (``-Xlog:cds*=off`` would not cover the class
path messages, so unified logging is limited to errors on stderr: nothing reaches a stdout that
an output parser reads).

Nothing depends on the archive: a training run that fails or times out leaves no file, says so on
the section's log, and the section runs its JVMs without it. ``ROLLCHECK_JVM_DEFAULTS=1`` turns
it off, as it turns off the C1 option; ``ROLLCHECK_CLASS_ARCHIVES=0`` turns off only the archives
(to measure what they save).

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
    """This process's environment without any archive in use (a JVM that dumps one must not map
    another) plus ``extra`` options appended to their variables."""
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
    """Whether a process of group ``pgid`` is still running, other than its leader (the watchdog,
    :mod:`rollcheck.infra.children`) and the leader's own children."""
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
    """Run a training command to its end, then wait for the JVM it started: the JVM writes the
    archive as it exits, after the Python process that drove it (the group dies with us)."""
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
