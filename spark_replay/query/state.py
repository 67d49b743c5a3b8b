"""The operator state of a query's checkpoint, read with Spark's own state reader.

:func:`read_state_stores` reads every state store of a checkpoint with Spark's ``statestore``
data source (one read per state variable of ``transformWithState``), next to the row count of
rollcheck's own decoder (:mod:`rollcheck.spark_replay.checkpoint.reader`); a release without
Spark's state reader (pyspark < 4.0, :func:`has_state_reader`) gets the HDFS-backed stores decoded
by rollcheck and :class:`StateUnreadable` for RocksDB state. :func:`state_or_reason` tells the
engine's reader failing on the engine's own checkpoint (a finding) from the machine's fault.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout, environment_fault
from rollcheck.spark_replay.checkpoint.reader import CheckpointDir, spark_state_reads
from rollcheck.spark_replay.query.failures import engine_failure
from rollcheck.spark_replay.query.files import canon_json, plain

__all__ = ["ROWS_IN_TRACE", "STATE_READER_SINCE", "StateUnreadable", "has_state_reader", "read_state_stores",
           "state_or_reason"]

#: State stores with at most this many rows are recorded row by row (else by digest only).
ROWS_IN_TRACE = 2000


def read_state_stores(spark: Any, checkpoint: Path) -> dict[str, dict[str, Any]]:
    """Every state store of a checkpoint read with Spark's ``statestore`` reader.

    With the row count of the plain-Python decoder: ``{"<op>/<store>": {"count", "digest",
    "decoded", "rows"?}}``.

    Parameters
    ----------
    spark : SparkSession
        The session.
    checkpoint : Path
        The checkpoint folder.
    """
    ck = CheckpointDir(checkpoint)
    if not ck.commits():
        return {}
    if not has_state_reader():
        return _decoded_state_stores(ck)
    meta = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    out: dict[str, dict[str, Any]] = {}
    for m in meta:
        op, store = int(m["operatorId"]), str(m["stateStoreName"])
        props = m.asDict().get("operatorProperties")
        for var, options in spark_state_reads(props):  # transformWithState: one read per state variable
            df = (spark.read.format("statestore").option("operatorId", op).option("storeName", store)
                  .options(**options).load(str(checkpoint)))
            rows = df.select(*[c for c in df.columns if c != "partition_id"]).collect()
            canon = sorted(canon_json([plain(x) for x in r]) for r in rows)
            # the plain decoder reads HDFS-backed files only; RocksDB state: Spark's reader alone
            decoded = (sum(len(p) for p in ck.state(op, store=store).values())
                       if ck.provider(op) == "hdfs" and not var else None)
            entry: dict[str, Any] = {"count": len(canon), "decoded": decoded,
                                     "digest": hashlib.sha256("\n".join(canon).encode()).hexdigest()}
            if len(canon) <= ROWS_IN_TRACE:
                entry["rows"] = canon
            out[f"{op}/{store}" + (f"/{var}" if var else "")] = entry
    return out


#: The first pyspark release with Spark's state data sources (``statestore``, ``state-metadata``).
STATE_READER_SINCE = (4, 0)


def has_state_reader() -> bool:
    """Whether the running pyspark has Spark's state data sources (4.0 on; 3.5 has none)."""
    import pyspark

    try:
        major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    except ValueError:
        return True
    return (major, minor) >= STATE_READER_SINCE


class StateUnreadable(Exception):
    """The state of a checkpoint cannot be read on this release (the reason is the message)."""


def _decoded_state_stores(ck: CheckpointDir) -> dict[str, dict[str, Any]]:
    """Without Spark's state reader (pyspark < 4.0).

    Every HDFS-backed store decoded by rollcheck's own reader (``checkpoint.reader``), in the same
    form; RocksDB state cannot be read here.
    """
    import pyspark

    out: dict[str, dict[str, Any]] = {}
    for op in sorted(ck.operators()):
        if ck.provider(op) != "hdfs":
            raise StateUnreadable(f"pyspark {pyspark.__version__} has no state data source (Spark's state "
                                  "reader exists from 4.0 on) and rollcheck decodes only the HDFS-backed "
                                  f"store's files; operator {op} keeps its state in RocksDB")
        for store in ck.stores(op):
            rows = [canon_json([plain(x) for x in (*k, *v)])
                    for part in ck.state(op, store=store).values() for k, v in part.items()]
            canon = sorted(rows)
            entry: dict[str, Any] = {"count": len(canon), "decoded": None, "reader": "rollcheck",
                                     "digest": hashlib.sha256("\n".join(canon).encode()).hexdigest()}
            if len(canon) <= ROWS_IN_TRACE:
                entry["rows"] = canon
            out[f"{op}/{store}"] = entry
    return out


def state_or_reason(spark: Any, checkpoint: Path) -> tuple[dict[str, dict[str, Any]], str | None,
                                                              dict[str, Any] | None]:
    """The checkpoint's state stores, or why they cannot be read: ``(stores, reason, failed)``.

    ``failed`` is Spark's own state reader failing on the engine's own checkpoint with the engine's
    exception (``spark.state_read_failed``: a finding, ``oracles.recovery_succeeded``), not
    rollcheck's error; a fault of the machine (a full disk) stays the machine's.

    Parameters
    ----------
    spark : SparkSession
        The session.
    checkpoint : Path
        The checkpoint folder.

    Returns
    -------
    tuple of (dict, str or None, dict or None)
        The stores, why they are unreadable, the engine's failure.
    """
    try:
        return read_state_stores(spark, checkpoint), None, None
    except StateUnreadable as e:
        return {}, str(e), None
    except (UserCodeTimeout, InvalidInputError):
        raise
    except Exception as e:
        fault = environment_fault(e, str(checkpoint))
        if fault is not None:
            raise fault from None
        failed = engine_failure(str(e) or type(e).__name__, str(checkpoint))
        return {}, (f"Spark's state reader failed on this checkpoint with the engine's exception "
                    f"{failed['exception']}: {failed['message']}"), failed
