"""The shared reference of a Spark matrix configuration: one failure-free recording for all cells.

The matrix (:mod:`rollcheck.spark_replay.matrix`) records each configuration (query module, state
store provider, seed, batches) once without failure; its final output and its state, read with
Spark's own state reader, are the reference every cell of the configuration is compared with. A
cell's recording (``rollcheck spark record query --reference-from TRACE``) starts its trace with
that reference instead of running one of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["shared_reference", "write_shared_reference"]


def shared_reference(path: str | Path, header: dict[str, Any] | None = None) -> dict[str, Any]:
    """The reference of a configuration, from its failure-free recording: the final output, the
    state read with Spark's state reader and the committed batches.

    With ``header`` (the new recording's), the recordings must agree on module, seed, batches,
    state store and shuffle partitions: a reference of another query or configuration is refused.
    """
    from rollcheck.spark_replay.trace import read_trace
    from rollcheck.spark_replay.watcher import base_kind

    tr = read_trace(path)
    src = str(path)
    cfg = tr.header.get("config") or {}
    if not (tr.source_kind == "spark-query" or (tr.source_kind == "spark" and tr.header.get("job") == "query")):
        raise InvalidInputError("not a recording of a query", source=src, location="line 1")
    if cfg.get("failure") is not None:
        raise InvalidInputError("the reference must be a failure-free recording", source=src,
                                location="config.failure")
    ends = {base_kind(e["kind"]): e for e in tr.events}
    for need in ("output_final", "state_final", "end"):
        if need not in ends:
            raise InvalidInputError(f"the reference recording has no {need} event (did it finish?)",
                                    source=src, location=need)
    if header is not None:
        mine = header.get("config") or {}
        for k in ("module", "seed", "batches", "state_store", "shuffle_partitions", "input_rows"):
            a, b = cfg.get(k, "hdfs" if k == "state_store" else None), mine.get(k)
            if k == "module" and isinstance(a, str) and isinstance(b, str):
                a, b = str(Path(a).resolve()) if a.endswith(".py") else a, \
                    str(Path(b).resolve()) if b.endswith(".py") else b
            if a != b:
                raise InvalidInputError(f"the reference was recorded with {k}={a!r}, this run has {b!r}",
                                        source=src, location=f"config.{k}")
    committed = sorted(e["batch"] for e in tr.events if base_kind(e["kind"]) == "batch_committed")
    return {"output": ends["output_final"].get("rows", []), "state": ends["state_final"].get("stores", {}),
            "batches": committed, "shared_from": src}


def write_shared_reference(path: str | Path, out: str | Path, header: dict[str, Any]) -> None:
    """Start the trace ``out`` with its header and the shared reference (as attempt 0: the
    recording's own attempts still count from 1)."""
    from rollcheck.spark_replay.trace import TraceWriter
    from rollcheck.spark_replay.watcher import PREFIX

    ref = shared_reference(path, header)
    w = TraceWriter(out, {**header, "config": {**header["config"], "reference_from": str(path)}})
    try:
        w.attempt = 0
        w.emit(PREFIX + "reference", **ref)
    finally:
        w.close()
