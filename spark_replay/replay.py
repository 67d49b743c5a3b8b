"""Conformance of recorded Spark runs against the reference models (``rollcheck spark replay``).

A trace is replayed event by event; each check is a small model that consumes the events in order
and, when the recording contradicts it, names the *first offending event* (its ``seq``). The
verdict is conformant iff every check holds; ``first_offending_seq`` is the smallest offending
``seq`` over all failed checks. A truncated trace (killed recorder) is replayed up to its last
complete event; checks that need the end of the run are then reported as not reached.

Streaming traces (``source == "spark-wordcount"``), ``specs/spark.md#streaming-conformance``:

- ``commit-protocol``: batch N+1 is planned only after N committed; a batch commits after its
  sink write of the same attempt, in order; at the end every batch is committed.
- ``resume-prediction``: at every restart, the Falkirk Wheel span model with epochs (batch ids) as
  logical times (:func:`streaming_span_system`, solved by :func:`rollcheck.pyimpl.spans.solve`) predicts the
  resume batch and the state version each partition restores; Spark's observed values must match.
- ``state-fold``: the final state decoded from the checkpoint equals the fold of the inputs of the
  committed batches; ``final-state-failure-free``: it equals the failure-free run's state.
- ``sink-exactly-once``: the idempotent sink holds every batch exactly once, each equal to the
  failure-free run's output for that batch.
- ``side-channel-duplicates``: the non-idempotent side channel has one entry per batch plus
  exactly one duplicate per failure that struck after it (sink exception or driver kill).
- ``statestore-crosscheck``: Spark's own ``statestore`` reader agreed with the Python decoder.
- ``listener-progress``: the StreamingQueryListener's progress events (asynchronous, possibly
  incomplete) report committed batches only, with the input rows of the batch and the number of
  state rows of the fold up to that batch.

Message-passing traces (``source == "spark-nhop"``) are checked by :mod:`rollcheck.spark_replay.nhop_replay`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.trace import Trace, read_trace

__all__ = ["Check", "ReplayResult", "replay_trace", "replay_file", "streaming_span_system",
           "check_streaming"]


@dataclass
class Check:
    """One conformance check: its name, verdict, explanation and first offending event."""

    name: str
    ok: bool
    detail: str
    offending_seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "ok": self.ok, "detail": self.detail}
        if self.offending_seq is not None:
            d["offending_seq"] = self.offending_seq
        return d


@dataclass
class ReplayResult:
    """The verdict on a trace (the JSON document of ``rollcheck spark replay --json``)."""

    source: str
    checks: list[Check]
    truncated: bool
    truncated_after_seq: int | None
    events: int

    @property
    def conformant(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def first_offending_seq(self) -> int | None:
        bad = [c.offending_seq for c in self.checks if not c.ok and c.offending_seq is not None]
        return min(bad) if bad else None

    def to_json(self) -> dict[str, Any]:
        return {"conformant": self.conformant, "truncated": self.truncated,
                "checks": [c.to_json() for c in self.checks],
                "first_offending_seq": self.first_offending_seq,
                "source": self.source, "events": self.events,
                "truncated_after_seq": self.truncated_after_seq}


def _field(e: dict[str, Any], name: str, typ: type | tuple[type, ...], trace: Trace) -> Any:
    v = e.get(name)
    if not isinstance(v, typ) or isinstance(v, bool) and typ is int:
        raise InvalidInputError(f"event seq {e['seq']} ({e['kind']}): field {name!r} missing or mistyped",
                                source=trace.source, location=f"line {e.get('_line')}")
    return v


# ----------------------------------------------------------------------------- streaming
def streaming_span_system(partitions: int, planned: set[int], committed: set[int],
                          versions: dict[int, set[int]]) -> dict[str, Any]:
    """The ``rollcheck.spans/1`` instance of a streaming restart, epochs as logical times.

    Processors: ``source`` (the offset log: span c_k = epochs 0..k-1 planned), ``state<p>`` per
    state partition (c_v = epochs folded into state version v, for the versions written whose batch
    committed: Spark treats version v as final only once ``commits/v-1`` exists) and ``sink``
    (c_k = the committed batches 0..k-1). The driver restart fails every processor (no ⊤).
    Edges: ``source → state<p>``: the file source is replayable, so it discards nothing
    (T_D = ∅) and φ(c_k) = epochs < k; ``state<p> → sink``: once a state version v is final the
    outputs of the epochs < v are never produced again (T_D(c_v) = φ(c_v) = epochs < v).
    The solution's ``sink`` index is the resume batch, ``state<p>``'s the restored version.

    Examples
    --------
    >>> from rollcheck.pyimpl.spans import solve, system_from_dict
    >>> s = streaming_span_system(1, {0, 1, 2}, {0, 1}, {0: {1, 2, 3}})
    >>> solve(system_from_dict(s))
    {'source': 3, 'state0': 2, 'sink': 2}
    """
    def ep(k: int) -> list[str]:
        return [f"b{i}" for i in range(k)]

    n_planned = 0
    while n_planned in planned:
        n_planned += 1
    n_comm = 0
    while n_comm in committed:
        n_comm += 1
    procs: dict[str, Any] = {"source": {"chain": [ep(k) for k in range(n_planned + 1)]}}
    edges: list[dict[str, Any]] = []
    for p in range(partitions):
        have = versions.get(p, set())
        top = 0
        while top + 1 <= n_comm and top + 1 in have:
            top += 1
        procs[f"state{p}"] = {"chain": [ep(v) for v in range(top + 1)]}
        edges.append({"name": f"in{p}", "src": "source", "dst": f"state{p}",
                      "discarded": [[] for _ in range(n_planned + 1)],
                      "processed": ep(n_planned), "phi": [ep(k) for k in range(n_planned + 1)]})
        edges.append({"name": f"out{p}", "src": f"state{p}", "dst": "sink",
                      "discarded": [ep(v) for v in range(top + 1)],
                      "processed": ep(n_comm), "phi": [ep(v) for v in range(top + 1)]})
    procs["sink"] = {"chain": [ep(k) for k in range(n_comm + 1)]}
    return {"format": "rollcheck.spans/1", "processors": procs, "edges": edges}


def _predict(partitions: int, planned: set[int], committed: set[int],
             versions: dict[int, set[int]]) -> tuple[int, dict[str, int]]:
    from rollcheck.pyimpl.spans import solve, system_from_dict

    sol = solve(system_from_dict(streaming_span_system(partitions, planned, committed, versions)))
    return int(sol["sink"]), {str(p): int(sol[f"state{p}"]) for p in range(partitions)}


def check_streaming(trace: Trace) -> list[Check]:
    """The streaming conformance checks (module docstring) over a parsed trace."""
    from rollcheck.spark_replay.wordcount import _row_order, fold_state, rollup_updates

    cfg = trace.header.get("config", {})
    if not isinstance(cfg, dict) or not isinstance(cfg.get("inputs"), list):
        raise InvalidInputError("header has no config.inputs", source=trace.source, location="line 1")
    try:
        inputs_by_file = {name: [(int(t), str(w)) for t, w in recs] for name, recs in cfg["inputs"]}
        window = int(cfg["window"])
        partitions = int(cfg["shuffle_partitions"])
        n_batches = int(cfg["batches"])
    except (KeyError, TypeError, ValueError):
        raise InvalidInputError("header config is malformed", source=trace.source, location="line 1") from None
    inputs_in_order = [recs for _name, recs in cfg["inputs"]]
    ref_out, ref_state = rollup_updates(inputs_in_order, window)

    planned: dict[int, list[str]] = {}
    committed: list[int] = []
    versions: dict[int, set[int]] = {}
    sink_in_attempt: set[tuple[int, int]] = set()
    failures: list[dict[str, Any]] = []
    snapshot: tuple[set[int], set[int], dict[int, set[int]]] | None = None
    commit_bad: tuple[int, str] | None = None
    resume_bad: tuple[int, str] | None = None
    restarts = 0
    ends: dict[str, dict[str, Any]] = {}

    def fail_commit(e: dict[str, Any], msg: str) -> None:
        nonlocal commit_bad
        if commit_bad is None:
            commit_bad = (e["seq"], msg)

    for e in trace.events:
        k = e["kind"]
        if k == "batch_planned":
            b = _field(e, "batch", int, trace)
            if b in planned:
                fail_commit(e, f"batch {b} planned twice")
            elif b != len(planned):
                fail_commit(e, f"batch {b} planned, expected batch {len(planned)}")
            elif b > 0 and (b - 1) not in committed:
                fail_commit(e, f"batch {b} planned while batch {b - 1} is not committed")
            planned[b] = list(e.get("files", []))
        elif k == "state_committed":
            versions.setdefault(_field(e, "partition", int, trace), set()).add(_field(e, "version", int, trace))
        elif k == "sink_written":
            b = _field(e, "batch", int, trace)
            if b not in planned:
                fail_commit(e, f"sink written for batch {b}, which was never planned")
            elif b in committed:
                fail_commit(e, f"sink written again for committed batch {b}")
            sink_in_attempt.add((b, e["attempt"]))
        elif k == "batch_committed":
            b = _field(e, "batch", int, trace)
            if b != len(committed):
                fail_commit(e, f"batch {b} committed, expected batch {len(committed)}")
            elif (b, e["attempt"]) not in sink_in_attempt:
                fail_commit(e, f"batch {b} committed without a sink write in attempt {e['attempt']}")
            committed.append(b)
        elif k == "failure":
            failures.append(e)
        elif k == "attempt_start":
            snapshot = (set(planned), set(committed), {p: set(v) for p, v in versions.items()})
        elif k == "restart":
            restarts += 1
            if snapshot is None:
                if resume_bad is None:
                    resume_bad = (e["seq"], "restart without an attempt start")
                continue
            pb, pv = _predict(partitions, *snapshot)
            got_b = e.get("resume_batch")
            got_v = {str(p): v for p, v in (e.get("restored_versions") or {}).items()}
            if got_b != pb or got_v != pv:
                if resume_bad is None:
                    resume_bad = (e["seq"], f"span model predicts resume at batch {pb} with state "
                                            f"versions {pv}; Spark resumed at {got_b} with {got_v}")
        elif k in ("final_state", "sink_final", "side_channel", "state_crosscheck", "end"):
            ends[k] = e
    if "end" in ends and commit_bad is None and sorted(committed) != list(range(n_batches)):
        commit_bad = (ends["end"]["seq"], f"run ended with committed batches {committed}, "
                                          f"expected 0..{n_batches - 1}")
    checks = [
        Check("commit-protocol", commit_bad is None,
              commit_bad[1] if commit_bad else f"{len(planned)} batches planned, {len(committed)} "
              f"committed in order; each commit after its sink write", commit_bad[0] if commit_bad else None),
        Check("resume-prediction", resume_bad is None,
              resume_bad[1] if resume_bad else f"{restarts} restart(s); resume batch and restored "
              f"state versions equal the span model's", resume_bad[0] if resume_bad else None),
    ]
    if "end" not in ends:
        last = trace.events[-1]["seq"] if trace.events else 0
        checks.append(Check("end-of-run", True, f"not reached: the recording stopped after seq {last}; "
                                                f"the prefix was checked"))
        return checks

    def rows_of(state: dict[Any, int]) -> list[list[Any]]:
        return sorted(([*key, n] for key, n in state.items()), key=_row_order)

    fs = ends.get("final_state")
    comm_inputs = []
    for b in committed:
        files = planned.get(b, [])
        comm_inputs.append([r for f in files for r in inputs_by_file.get(f, [])])
    folded = rows_of(fold_state(comm_inputs, window, list(range(len(comm_inputs)))))
    if fs is None:
        checks.append(Check("state-fold", False, "no final_state event", ends["end"]["seq"]))
    else:
        got = fs.get("rows")
        checks.append(Check("state-fold", got == folded,
                            f"decoded state ({len(got or [])} keys, version {fs.get('version')}) "
                            + ("equals" if got == folded else "differs from")
                            + f" the fold of the {len(committed)} committed batches' inputs",
                            None if got == folded else fs["seq"]))
        want = rows_of(ref_state)
        checks.append(Check("final-state-failure-free", got == want,
                            ("equals" if got == want else "differs from") + " the failure-free run's state",
                            None if got == want else fs["seq"]))
    sf = ends.get("sink_final")
    if sf is None:
        checks.append(Check("sink-exactly-once", False, "no sink_final event", ends["end"]["seq"]))
    else:
        got_s = {int(b): rows for b, rows in (sf.get("batches") or {}).items()}
        want_s = {b: ref_out[b] for b in range(n_batches)}
        bad = sorted(b for b in set(got_s) | set(want_s) if got_s.get(b) != want_s.get(b))
        checks.append(Check("sink-exactly-once", not bad,
                            f"{len(got_s)} batch files, each once, equal to the failure-free output"
                            if not bad else f"sink differs from the failure-free run at batches {bad}",
                            None if not bad else sf["seq"]))
    sc = ends.get("side_channel")
    if sc is None:
        checks.append(Check("side-channel-duplicates", False, "no side_channel event", ends["end"]["seq"]))
    else:
        counts = Counter(int(x["batch"]) for x in sc.get("entries", []))
        want_c = Counter(range(n_batches))
        for f in failures:
            if f.get("mode") in ("sink", "kill"):
                want_c[int(f["batch"])] += 1
        bad = sorted(b for b in set(counts) | set(want_c) if counts[b] != want_c[b])
        dups = sum(counts.values()) - len(counts)
        checks.append(Check("side-channel-duplicates", not bad,
                            f"{dups} duplicate(s), exactly one per sink/kill failure" if not bad else
                            f"side channel counts {dict(counts)} differ from expected {dict(want_c)} "
                            f"at batches {bad}", None if not bad else sc["seq"]))
    progress = trace.of_kind("progress")
    if progress:
        bad_p = None
        for e in progress:
            b = e.get("batch")
            if b not in committed:  # conclusive only once the run ended without committing b
                bad_p = (ends["end"]["seq"], f"progress reported for batch {b} (seq {e['seq']}), "
                                             f"which never committed")
            elif e.get("input_rows") != len(inputs_by_file.get((planned.get(b) or [""])[0], [])):
                bad_p = (e["seq"], f"batch {b}: {e.get('input_rows')} input rows reported")
            else:
                upto = fold_state(comm_inputs, window, list(range(committed.index(b) + 1)))
                if e.get("state_rows") != [len(upto)]:
                    bad_p = (e["seq"], f"batch {b}: {e.get('state_rows')} state rows reported, the fold "
                                       f"has {len(upto)}")
            if bad_p:
                break
        checks.append(Check("listener-progress", bad_p is None,
                            bad_p[1] if bad_p else f"{len(progress)} progress event(s): committed batches "
                            f"only, input and state row counts equal the fold", bad_p[0] if bad_p else None))
    cc = ends.get("state_crosscheck")
    if cc is not None:
        ok = bool(cc.get("agree")) and cc.get("spark_max_batch") == cc.get("max_committed")
        checks.append(Check("statestore-crosscheck", ok,
                            f"Spark's statestore reader ({cc.get('spark_rows')} rows) "
                            + ("agrees" if ok else "disagrees") + " with the plain-Python decoder",
                            None if ok else cc["seq"]))
    return checks


# ----------------------------------------------------------------------------- entry points
def replay_trace(trace: Trace) -> ReplayResult:
    """Check a parsed trace; dispatch on the header's ``source``."""
    src = trace.source_kind
    if src == "spark-wordcount":
        checks = check_streaming(trace)
    elif src == "spark-nhop":
        from rollcheck.spark_replay.nhop_replay import check_nhop

        checks = check_nhop(trace)
    elif isinstance(trace.header.get("processes"), list):  # any engine's core vocabulary
        from rollcheck.spark_replay.nhop_replay import check_core

        checks = check_core(trace)
    else:
        raise InvalidInputError(f"unknown trace source {src!r} (expected spark-wordcount, spark-nhop, "
                                "or an engine-neutral trace with \"processes\")",
                                source=trace.source, location="line 1")
    # A recording that stopped before its end event (killed recorder) is a truncated trace too.
    ended = any(e["kind"] == "end" for e in trace.events)
    truncated = trace.truncated or not ended
    after = trace.truncated_after_seq if trace.truncated else (
        None if ended else (trace.events[-1]["seq"] if trace.events else 0))
    return ReplayResult(src, checks, truncated, after, len(trace.events))


def replay_file(path: str | Path) -> ReplayResult:
    """Read and check a trace file (see :func:`replay_trace`)."""
    return replay_trace(read_trace(path))
