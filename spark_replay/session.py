"""A quiet, fast, deterministic Spark session for rollcheck (local mode by default).

Settings measured on a 2-core machine (see ``docs/spark.md``): ``local[2]``, no UI, bind to
127.0.0.1, no console progress, log level error through a log4j2 file given to the driver JVM,
the running interpreter for driver and workers, few shuffle partitions, and a private folder (log
configuration, warehouse) removed when the session stops. Spark's scratch space stays Spark's own
(``java.io.tmpdir``), which Spark removes when its JVM exits: a ``spark.local.dir`` inside our folder
was re-created empty by Spark's shutdown after we had removed it, leaving litter behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["spark_session", "DEFAULT_MASTER", "log4j2_properties"]

DEFAULT_MASTER = "local[2]"


def log4j2_properties(level: str = "error") -> str:
    """A log4j2 configuration that writes ``level`` and above to stderr, one short line each.

    >>> log4j2_properties("warn").splitlines()[1]
    'rootLogger.level = warn'
    """
    return ("status = error\n"
            f"rootLogger.level = {level}\n"
            "rootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\n"
            "appender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n")


def _drop_dead_gateway() -> None:
    """Forget a Py4J gateway whose JVM has died since an earlier session of this process stopped.

    ``SparkSession.stop()`` keeps the gateway for the next session; if its JVM was killed in
    between (a test of the kill points, the OOM killer), the next ``getOrCreate`` would talk to a
    dead socket ("Answer from Java side is empty"). A dead gateway is dropped, so a new JVM starts.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gw = SparkContext._gateway
    if gw is None or SparkContext._active_spark_context is not None:
        return
    proc = getattr(gw, "proc", None)
    dead = proc is not None and proc.poll() is not None
    if not dead:
        try:
            gw.jvm.java.lang.System.currentTimeMillis()
        except Exception:  # noqa: BLE001 - any failure to answer means the JVM is gone
            dead = True
    if not dead:
        return
    with contextlib.suppress(Exception):
        gw.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None

@contextlib.contextmanager
def spark_session(
    master: str | None = None,
    app_name: str = "rollcheck",
    shuffle_partitions: int = 2,
    conf: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """Start a SparkSession, yield it, and always stop it and remove its temporary folders.

    Parameters
    ----------
    master : str, optional
        Spark master URL; ``local[2]`` by default (``ROLLCHECK_SPARK_MASTER`` overrides it).
    shuffle_partitions : int
        ``spark.sql.shuffle.partitions`` (200, Spark's default, is ~8x slower here).
    conf : dict, optional
        Extra Spark configuration.
    """
    from pyspark.sql import SparkSession

    master = master or os.environ.get("ROLLCHECK_SPARK_MASTER") or DEFAULT_MASTER
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-spark-"))
    log_cfg = tmp / "log4j2.properties"
    log_cfg.write_text(log4j2_properties(), encoding="utf-8")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    java_opts = f"-Dlog4j2.configurationFile=file:{log_cfg} -Dlog4j.configurationFile=file:{log_cfg}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(max(2, shuffle_partitions)))
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.execution.pythonUDF.arrow.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "false")
        .config("spark.python.worker.reuse", "true")
    )
    for k, v in (conf or {}).items():
        builder = builder.config(k, str(v))
    from rollcheck.spark_replay.supervise import spark_gateway_in_group

    spark_gateway_in_group(dict(builder._options))  # the JVM dies with this process, however it dies
    _drop_dead_gateway()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        try:
            spark.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
