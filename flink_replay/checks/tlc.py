"""TLC validation of a recorded aligned Flink trace against the Chandy–Lamport model.

For every snapshot of a keyed subtask ``j`` whose checkpoint both source subtasks took part in,
the observations of that checkpoint become one segment of the constant sequence ``Tr`` walked by
``FlinkCLTrace.tla`` (package data), which extends the project's ``ChandyLamport`` model: the
two source snapshots with the records each had sent to ``j`` (from the source tap's per-key
counts over the keys ``j`` owns), the barrier arrivals on ``j``'s two input channels, and ``j``'s
snapshot with the records it had consumed (its keyed state). The model accepts the segment only
if the barriers arrive after their source's snapshot, ``j`` snapshots only when both markers are
at the head of its inputs, and what it consumed equals what the sources sent before their
snapshots (``Consistent``, ``NoChannelState``).

This module only builds the TLA+ inputs and reads TLC's answer; the caller passes the TLC runner
and the ``ChandyLamport`` module (``rollcheck.tla`` is not imported from here: layering).

References
----------
Chandy and Lamport, "Distributed Snapshots", §3. FERDiS paper §5.1 (coordinated checkpoints).
Cirstea, Kuppe, Loillier, Merz, "Validating traces of distributed programs against TLA+
specifications" (trace as a constant sequence).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.checks.replay import read_flink_trace

__all__ = ["TLCVerdict", "cl_segments", "trace_data_module", "validate_with_tlc"]


@dataclass
class TLCVerdict:
    """``accepted``: True, False (rejected) or None (not checkable / TLC unavailable)."""

    accepted: bool | None
    detail: str
    seq: int | None = None
    states: int = 0
    seconds: float = 0.0


def _owned(events: list[dict[str, Any]], keys: int) -> dict[tuple[int, int], set[int]]:
    """The keys each keyed subtask owns, per attempt (a restore at another parallelism moves them)."""
    own: dict[tuple[int, int], set[int]] = {}
    for e in events:
        if e["kind"] == "flink.snapshot" and e["task"] == "keyed":
            own.setdefault((e["subtask"], e["attempt"]), set()).update(
                k for k in range(keys) if e["per_key"][k] > 0)
    return own


def cl_segments(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The ``Tr`` entries and, for each, the trace ``seq`` it stands for.

    Counts are relative to the attempt's restored state (each attempt restarts the model's
    counters). Only keyed snapshots of checkpoints that both source subtasks took are included.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.

    Returns
    -------
    tuple of (list of dict, list of int)
        The ``Tr`` entries and their ``seq``.
    """
    keys = int(header["config"]["keys"])
    own = _owned(events, keys)
    base: dict[tuple[str, int, int], list[int]] = {}
    for e in events:
        if e["kind"] == "flink.restore":
            base[(e["task"], e["subtask"], e["attempt"])] = e["per_key"]
    zero = [0] * keys
    tr: list[dict[str, Any]] = []
    seqs: list[int] = []
    for snap in events:
        if snap["kind"] != "flink.snapshot" or snap["task"] != "keyed":
            continue
        j, a, c = snap["subtask"], snap["attempt"], snap["checkpoint"]
        mine = own.get((j, a), set())
        srcs = [e for e in events if e["kind"] == "flink.snapshot" and e["task"] == "source"
                and e["attempt"] == a and e["checkpoint"] == c]
        if sorted(e["subtask"] for e in srcs) != [0, 1]:
            continue
        tr.append({"op": "reset"})
        seqs.append(snap["seq"])
        # a source task emits its barrier and then, before emitting any further record, calls
        # snapshotState: the recorded snapshot can come after the barrier's arrival downstream,
        # but its counts are those at the barrier, so the source step comes first
        for e in sorted(srcs, key=lambda x: x["subtask"]):
            b = base.get(("source", e["subtask"], a), zero)
            tr.append({"op": "src", "ch": e["subtask"], "n": sum(e["per_key"][k] - b[k] for k in mine)})
            seqs.append(e["seq"])
        for e in events:
            if e["seq"] > snap["seq"]:
                break
            if e["kind"] == "flink.barrier" and (e["subtask"], e["attempt"], e["checkpoint"]) == (j, a, c):
                tr.append({"op": "barrier", "ch": e["channel"]})
                seqs.append(e["seq"])
        b = base.get(("keyed", j, a), zero)
        tr.append({"op": "snap", "m": sum(snap["per_key"][k] - b[k] for k in mine)})
        seqs.append(snap["seq"])
    return tr, seqs


def _value(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else str(int(v))


def trace_data_module(tr: list[dict[str, Any]]) -> str:
    """The TLA+ module ``FlinkTraceData`` defining ``Tr``.

    Examples
    --------
    >>> print(trace_data_module([{"op": "reset"}, {"op": "snap", "m": 3}]))  # doctest: +NORMALIZE_WHITESPACE
    ---- MODULE FlinkTraceData ----
    Tr == <<
      [op |-> "reset"],
      [op |-> "snap", m |-> 3]
    >>
    ====
    """
    rows = ",\n".join("  [" + ", ".join(f"{k} |-> {_value(v)}" for k, v in e.items()) + "]" for e in tr)
    return f"---- MODULE FlinkTraceData ----\nTr == <<\n{rows}\n>>\n====\n"


def validate_with_tlc(path: str | Path, run_tlc: Callable[..., Any], chandy_lamport: Path,
                      *, timeout: float = 600.0) -> TLCVerdict:
    """Walk the aligned snapshots of a recorded Flink trace through the Chandy–Lamport model.

    ``run_tlc`` is :func:`rollcheck.tla.runner.run_tlc`; ``chandy_lamport`` the path of
    ``ChandyLamport.tla``.

    Parameters
    ----------
    path : str or Path
        The recorded Flink trace.
    run_tlc : callable
        Runs TLC (above).
    chandy_lamport : Path
        The model's module.
    timeout : float, optional
        Seconds TLC may take.

    Returns
    -------
    TLCVerdict
        TLC's verdict on the trace.
    """
    header, events, _ = read_flink_trace(path)
    cfg = header["config"]
    if cfg["checkpoints"] != "aligned" or int(cfg["parallelism"]) != 2:
        return TLCVerdict(None, "TLC validation covers aligned checkpoints at parallelism 2 only")
    tr, seqs = cl_segments(header, events)
    if not tr:
        return TLCVerdict(None, "no keyed snapshot of a checkpoint both sources took")
    max_n = max([e.get("n", 0) for e in tr] + [e.get("m", 0) for e in tr] + [1])
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-flink-tlc-"))
    t0 = time.monotonic()
    try:
        shutil.copy(chandy_lamport, tmp / "ChandyLamport.tla")
        own = resources.files("rollcheck.flink_replay.checks").joinpath("FlinkCLTrace.tla").read_text(encoding="utf-8")
        (tmp / "FlinkCLTrace.tla").write_text(own, encoding="utf-8")
        (tmp / "FlinkTraceData.tla").write_text(trace_data_module(tr), encoding="utf-8")
        (tmp / "FlinkCLTrace.cfg").write_text(
            "CONSTANTS\n  Graph = \"acyclic\"\n  Mode = \"aligned\"\n"
            f"  MaxRecords = {max_n + 1}\nINIT TInit\nNEXT TNext\n"
            "INVARIANT Consistent\nINVARIANT NoChannelState\n", encoding="utf-8")
        res = run_tlc(tmp / "FlinkCLTrace.tla", tmp / "FlinkCLTrace.cfg", timeout=timeout, trace_keep_last=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    secs = time.monotonic() - t0
    segs = sum(1 for e in tr if e["op"] == "reset")
    if res.status == "ok":
        return TLCVerdict(True, f"TLC: {segs} aligned snapshots are Chandy-Lamport runs "
                          f"({res.distinct_states} states)", None, res.distinct_states, secs)
    if res.status in ("deadlock", "violation") and res.trace:
        i = res.trace[-1].values.get("idx")
        k = int(i) - 1 if isinstance(i, int) else None
        if res.status == "violation":
            k = k - 1 if k is not None else None
        seq = seqs[k] if k is not None and 0 <= k < len(seqs) else None
        what = f"{res.violated} violated" if res.status == "violation" else "no model step"
        obs = tr[k] if k is not None and 0 <= k < len(tr) else None
        return TLCVerdict(False, f"TLC rejects the trace at seq {seq} ({what} for observation {obs})", seq,
                          res.distinct_states, secs)
    return TLCVerdict(None, f"TLC {res.status}: {res.message}"[:300], None, res.distinct_states, secs)
