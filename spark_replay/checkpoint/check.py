"""Validate any Structured Streaming checkpoint folder (``rollcheck spark checkpoint DIR``).

Details: ``docs/internals/spark-checkpoint.md`` (section ``check``).

References
----------
Spark Structured Streaming programming guide (checkpointing; the state data source); the folder
layout is in ``specs/spark.md#checkpoint-files``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import loads_json
from rollcheck.spark_replay.checkpoint.reader import CheckpointDir, spark_state_reads

__all__ = ["check_checkpoint", "check_logs", "spark_row_counts"]


def _contiguous(ids: list[int]) -> bool:
    return not ids or ids == list(range(ids[0], ids[-1] + 1))


def check_logs(ck: CheckpointDir) -> tuple[int | None, list[str], list[str]]:
    r"""The log checks: ``(last committed batch or None, problems, notes)``.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> for sub, n in (("offsets", 3), ("commits", 1)):
    ...     os.makedirs(os.path.join(d, sub))
    ...     for b in range(n):
    ...         _ = open(os.path.join(d, sub, str(b)), "w").write('v1\n{}\n')
    >>> _ = open(os.path.join(d, "metadata"), "w").write('{"id": "q"}')
    >>> last, problems, notes = check_logs(CheckpointDir(d))
    >>> last, problems
    (0, ['offsets: batch 2 is planned but batch 1 never committed (at most one batch may be in progress)'])
    >>> import shutil; shutil.rmtree(d)
    """
    problems: list[str] = []
    notes: list[str] = []
    meta = ck.path / "metadata"
    try:
        doc = loads_json(meta.read_text(encoding="utf-8").strip().splitlines()[0])
        if not isinstance(doc, dict) or "id" not in doc:
            problems.append("metadata: no query id")
    except (OSError, IndexError, ValueError):  # (InvalidInputError: nesting, NaN, ... is a ValueError)
        problems.append("metadata: missing or not a JSON object")
    logs: dict[str, list[int]] = {}
    for sub in ("offsets", "commits"):
        ids = sorted(ck._log_files(sub))
        for b in ids:
            try:
                for line in CheckpointDir._log_lines(ck._log_files(sub)[b]):
                    if line != "-":
                        loads_json(line)
            except (InvalidInputError, json.JSONDecodeError, UnicodeDecodeError):
                problems.append(f"{sub}/{b}: not a version line followed by JSON lines")
        if not _contiguous(ids):
            gaps = sorted(set(range(ids[0], ids[-1] + 1)) - set(ids))
            problems.append(f"{sub}: batch ids are not contiguous (missing {gaps})")
        logs[sub] = ids
    offs, comms = logs["offsets"], logs["commits"]
    missing = sorted(set(comms) - set(offs))
    if missing and offs and min(missing) >= offs[0]:
        problems.append(f"commits: batches {missing} committed but never planned (no offsets file)")
    last = comms[-1] if comms else None
    if offs:
        beyond = [b for b in offs if last is None or b > last]
        if len(beyond) > 1:
            problems.append(f"offsets: batch {beyond[-1]} is planned but batch {beyond[-2]} never committed "
                            f"(at most one batch may be in progress)")
        elif beyond:
            notes.append(f"batch {beyond[0]} was planned but not committed (in progress when the query "
                         f"stopped; it runs again on restart)")
    return last, problems, notes


def spark_row_counts(checkpoint: Path, master: str | None = None, session: Any = None
                     ) -> dict[tuple[int, str], int]:
    """``{(operator, store): rows}`` of the last committed state.

    Read with Spark's own ``state-metadata`` and ``statestore`` data sources (in ``session``, or a
    new local session).
    """
    import contextlib

    from rollcheck.spark_replay.session import spark_session

    out: dict[tuple[int, str], int] = {}
    with contextlib.ExitStack() as stack:
        spark = session if session is not None else stack.enter_context(
            spark_session(master, app_name="rollcheck-checkpoint"))
        spark.sparkContext.setLogLevel("OFF")
        meta = spark.read.format("state-metadata").load(str(checkpoint)).collect()
        for m in meta:
            op, store = int(m["operatorId"]), str(m["stateStoreName"])
            props = m.asDict().get("operatorProperties")
            reads = [x for x in spark_state_reads(props) if x[0] != "timers"]  # transformWithState: per variable
            out[(op, store)] = sum(spark.read.format("statestore").option("operatorId", op)
                                   .option("storeName", store).options(**o).load(str(checkpoint)).count()
                                   for _v, o in reads)
    return out


def check_checkpoint(path: str | Path, *, spark: bool = True, master: str | None = None,
                     session: Any = None) -> dict[str, Any]:
    """Validate a checkpoint folder (module docstring); the JSON document of the command.

    ``spark`` false skips Spark's state reader; ``session`` reuses a running Spark session.

    Raises
    ------
    InvalidInputError
        ``path`` is not a Structured Streaming checkpoint folder (exit 2).
    """
    p = Path(path)
    if not p.is_dir() or not ((p / "offsets").is_dir() or (p / "metadata").is_file()):
        raise InvalidInputError("not a Structured Streaming checkpoint folder (no offsets/ and no "
                                "metadata)", source=str(p))
    ck = CheckpointDir(p)
    last, problems, notes = check_logs(ck)
    final = None if last is None else last + 1
    operators: list[dict[str, Any]] = []
    decoded: dict[tuple[int, str], int | None] = {}
    try:
        ops = ck.operators()
    except (InvalidInputError, json.JSONDecodeError) as e:
        problems.append(f"state metadata unreadable: {e}")
        ops = {}
    for op, meta in ops.items():
        name = (meta.get("operatorInfo") or {}).get("operatorName")
        info = meta.get("stateStoreInfo") or []
        want_parts = info[0].get("numPartitions") if info and isinstance(info[0], dict) else None
        parts = ck.partitions(op)
        if not meta:
            problems.append(f"operator {op}: no readable state metadata (state/{op}/_metadata/metadata)")
        if want_parts is not None and len(parts) != want_parts:
            problems.append(f"operator {op}: {len(parts)} partition folder(s), the metadata says {want_parts}")
        stores = []
        for store in ck.stores(op):
            rows: int | None = None
            top = 0
            for part in parts:
                vers = ck.state_versions(op, part, store)
                top = max([top, *vers])
                if final is not None:
                    late = [v for v in vers if v > final + 1]
                    if late:
                        problems.append(f"operator {op} store {store} partition {part}: state version(s) "
                                        f"{late} beyond the batch in progress (last commit {last})")
                    if final + 1 in vers:
                        notes.append(f"operator {op} store {store} partition {part}: version {final + 1} "
                                     f"is not final (batch {final} did not commit)")
            if final is not None and parts and ck.provider(op) == "rocksdb":
                notes.append(f"operator {op} store {store}: RocksDB state, read with Spark's state reader only "
                             f"(rollcheck's decoder reads the HDFS-backed store's files)")
            elif final is not None and parts:
                try:
                    rows = sum(len(x) for x in ck.state(op, final, store=store).values())
                except InvalidInputError as e:
                    problems.append(f"operator {op} store {store}: final version {final} cannot be "
                                    f"decoded: {e}")
            decoded[(op, store)] = rows
            stores.append({"store": store, "rows": rows, "spark_rows": None, "max_version": top})
        operators.append({"operator": op, "name": name, "partitions": len(parts), "version": final,
                          "rows": None if any(s["rows"] is None for s in stores)
                          else sum(s["rows"] for s in stores),
                          "reader_agrees": None, "stores": stores})
    if spark and operators and last is not None:
        try:
            counts = spark_row_counts(p, master, session)
        except Exception as e:  # Spark could not read it: a finding about the folder, not a crash
            problems.append(f"Spark's state reader failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            counts = None
        if counts is not None:
            for o in operators:
                agree = True
                for s in o["stores"]:
                    s["spark_rows"] = counts.get((o["operator"], s["store"]))
                    if s["rows"] is None and s["spark_rows"] is not None and ck.provider(o["operator"]) == "rocksdb":
                        continue  # nothing to compare with: Spark's reader alone serves RocksDB
                    if s["spark_rows"] is None or s["spark_rows"] != s["rows"]:
                        agree = False
                        problems.append(f"operator {o['operator']} store {s['store']}: rollcheck's decoder "
                                        f"reads {s['rows']} row(s), Spark's state reader {s['spark_rows']}")
                o["reader_agrees"] = agree
                if o["rows"] is None and all(s["spark_rows"] is not None for s in o["stores"]):
                    o["rows"] = sum(s["spark_rows"] for s in o["stores"])  # RocksDB: Spark's reader's count
                    o["reader_agrees"] = None if ck.provider(o["operator"]) == "rocksdb" else agree
    elif not spark:
        notes.append("Spark's state reader skipped (--no-spark): reader_agrees is null")
    return {"valid": not problems, "last_committed": last, "problems": problems, "notes": notes,
            "operators": operators, "checkpoint": str(p)}
