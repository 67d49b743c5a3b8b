"""The streaming conformance checks of ``rollcheck spark replay``, one function per named check.

A streaming trace feeds a :class:`StreamView` (one pass over the events, through the shared trace
checker: the :class:`SparkStream` plug-in reads Spark's events as they stream by — planned and
committed batches, state versions, sink writes, failures, restarts and the end-of-run records);
each check is then a plug-in (:class:`StreamCheck`) over the view returning one
:class:`~rollcheck.pyimpl.verdict.Check` (``specs/spark.md#streaming-conformance``):

- :func:`failure_observed`: the requested failure happened at the requested batch and the query
  restarted and finished; a requested failure that did not happen is *unchecked* (exit 3);
- :func:`end_of_run`: a recording that stopped before its end records leaves the end-of-run checks
  *unchecked*, never passed;
- :func:`commit_protocol`: batch N+1 is planned only after N committed; a batch commits after its
  sink write of the same attempt, in order; at the end every batch is committed;
- :func:`resume_prediction`: at every restart the Falkirk Wheel span model with batch ids as
  logical times (:func:`streaming_span_system`) predicts the resume batch and each state store's
  restored version; Spark's observed values must match;
- word count only: :func:`state_fold`, :func:`final_state_failure_free`, :func:`sink_exactly_once`,
  :func:`side_channel_duplicates`, :func:`listener_progress`, :func:`statestore_crosscheck`;
- user queries only: :func:`output_exactly_once` (the final output equals the failure-free
  run's; a duplicate is named with its batch and row; with the module's own sink it is judged
  against the module's ``SINK_GUARANTEE`` by :func:`user_output`, re-deliveries counted from the
  trace's handings by :func:`sink_handings`), :func:`state_failure_free` (the operator
  state read with Spark's own state reader equals the failure-free run's) and
  :func:`query_statestore_crosscheck`.

Event kinds are read with or without the ``spark.`` prefix (older traces have none).

References
----------
Falkirk Wheel paper §3 (spans, the resume point of a restart); Spark Structured Streaming
programming guide (micro-batch execution, checkpointing, foreachBatch).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.watcher import base_kind, state_key

__all__ = [
    "StreamView",
    "streaming_span_system",
    "failure_observed",
    "FailureObservedNhop",
    "SparkStream",
    "StreamCheck",
    "EventListCheck",
    "end_of_run",
    "commit_protocol",
    "resume_prediction",
    "state_fold",
    "final_state_failure_free",
    "sink_exactly_once",
    "side_channel_duplicates",
    "listener_progress",
    "statestore_crosscheck",
    "output_exactly_once",
    "user_output",
    "sink_handings",
    "FOREACHBATCH_DOC",
    "state_failure_free",
    "query_statestore_crosscheck",
    "wordcount_plugins",
    "query_plugins",
]

#: What a malformed field of an engine event raises inside a check (bad input, exit 2).
_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError)

_ENDS = ("final_state", "sink_final", "side_channel", "state_crosscheck", "reference", "output_final",
         "state_final", "end")


def _field(e: dict[str, Any], name: str, typ: type | tuple[type, ...], source: str | None) -> Any:
    v = e.get(name)
    if not isinstance(v, typ) or isinstance(v, bool) and typ is int:
        raise InvalidInputError(f"event seq {e['seq']} ({e['kind']}): field {name!r} missing or mistyped",
                                source=source, location=f"line {e.get('_line')} (seq {e['seq']})")
    return v


# ----------------------------------------------------------------------------- span model
def streaming_span_system(partitions: int | list[str], planned: set[int], committed: set[int],
                          versions: dict[Any, set[int]]) -> dict[str, Any]:
    """The ``rollcheck.spans/1`` instance of a streaming restart, epochs as logical times.

    Processors: ``source`` (the offset log: span c_k = epochs 0..k-1 planned), ``state<s>`` per
    state store instance ``s`` (an int partition, or a :func:`~rollcheck.spark_replay.watcher.state_key`;
    c_v = epochs folded into state version v, for the versions written whose batch committed:
    Spark treats version v as final only once ``commits/v-1`` exists) and ``sink`` (c_k = the
    committed batches 0..k-1). The driver restart fails every processor (no ⊤).
    Edges: ``source → state<s>``: the file source is replayable, so it discards nothing
    (T_D = ∅) and φ(c_k) = epochs < k; ``state<s> → sink``: once a state version v is final the
    outputs of the epochs < v are never produced again (T_D(c_v) = φ(c_v) = epochs < v).
    The solution's ``sink`` index is the resume batch, ``state<s>``'s the restored version.

    Examples
    --------
    >>> from rollcheck.pyimpl.spans import solve, system_from_dict
    >>> s = streaming_span_system(1, {0, 1, 2}, {0, 1}, {0: {1, 2, 3}})
    >>> solve(system_from_dict(s))
    {'source': 3, 'state0': 2, 'sink': 2}

    References
    ----------
    Falkirk Wheel paper §3 (span systems and their greatest solution).
    """
    def ep(k: int) -> list[str]:
        return [f"b{i}" for i in range(k)]

    keys: list[Any] = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    n_planned = 0
    while n_planned in planned:
        n_planned += 1
    n_comm = 0
    while n_comm in committed:
        n_comm += 1
    procs: dict[str, Any] = {"source": {"chain": [ep(k) for k in range(n_planned + 1)]}}
    edges: list[dict[str, Any]] = []
    for p in keys:
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


def _predict(keys: list[str], planned: set[int], committed: set[int],
             versions: dict[str, set[int]]) -> tuple[int, dict[str, int]]:
    from rollcheck.pyimpl.spans import solve, system_from_dict

    sol = solve(system_from_dict(streaming_span_system(keys, planned, committed, versions)))
    return int(sol["sink"]), {k: int(sol[f"state{k}"]) for k in keys}


# ----------------------------------------------------------------------------- the view
@dataclass
class StreamView:
    """One pass over a streaming trace, fed event by event: what every check needs, with the first
    problems found while reading (a check reports them)."""

    header: dict[str, Any]
    source: str | None
    n_batches: int
    requested: tuple[str, int] | None
    partitions: list[str] | None
    planned: dict[int, list[str]] = field(default_factory=dict)
    planned_seq: dict[int, int] = field(default_factory=dict)
    committed: list[int] = field(default_factory=list)
    versions: dict[str, set[int]] = field(default_factory=dict)
    sink_writes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    restarts: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    ends: dict[str, dict[str, Any]] = field(default_factory=dict)
    commit_bad: tuple[int, str] | None = None
    resume_bad: tuple[int, str] | None = None
    last_seq: int = 0
    _sink_in_attempt: set[tuple[int, int]] = field(default_factory=set)
    _snapshot: tuple[set[int], set[int], dict[str, set[int]]] | None = None

    @property
    def ended(self) -> bool:
        return "end" in self.ends

    def _fail_commit(self, e: dict[str, Any], msg: str) -> None:
        if self.commit_bad is None:
            self.commit_bad = (e["seq"], msg)

    def feed(self, e: dict[str, Any]) -> None:
        """Read one event (derived core events of the adapter are skipped)."""
        if e.get("derived"):
            return
        self.last_seq = e["seq"]
        k = base_kind(e["kind"])
        src = self.source
        if k == "batch_planned":
            b = _field(e, "batch", int, src)
            if b in self.planned:
                self._fail_commit(e, f"batch {b} planned twice")
            elif b != len(self.planned):
                self._fail_commit(e, f"batch {b} planned, expected batch {len(self.planned)}")
            elif b > 0 and (b - 1) not in self.committed:
                self._fail_commit(e, f"batch {b} planned while batch {b - 1} is not committed")
            self.planned[b] = list(e.get("files", []))
            self.planned_seq[b] = e["seq"]
        elif k == "state_committed":
            _field(e, "partition", int, src)
            self.versions.setdefault(state_key(e), set()).add(_field(e, "version", int, src))
        elif k == "sink_written":
            b = _field(e, "batch", int, src)
            if b not in self.planned:
                self._fail_commit(e, f"sink written for batch {b}, which was never planned")
            elif b in self.committed:
                self._fail_commit(e, f"sink written again for committed batch {b}")
            self._sink_in_attempt.add((b, e.get("attempt", 1)))
            self.sink_writes.append(e)
        elif k == "batch_committed":
            b = _field(e, "batch", int, src)
            if b != len(self.committed):
                self._fail_commit(e, f"batch {b} committed, expected batch {len(self.committed)}")
            elif (b, e.get("attempt", 1)) not in self._sink_in_attempt:
                self._fail_commit(e, f"batch {b} committed without a sink write in attempt {e.get('attempt', 1)}")
            self.committed.append(b)
        elif k == "failure":
            self.failures.append(e)
        elif k == "attempt_start":
            self._snapshot = (set(self.planned), set(self.committed), {p: set(x) for p, x in self.versions.items()})
        elif k == "restart":
            self.restarts.append(e)
            if self._snapshot is None:
                if self.resume_bad is None:
                    self.resume_bad = (e["seq"], "restart without an attempt start")
                return
            got_v = {str(p): x for p, x in (e.get("restored_versions") or {}).items()}
            keys = self.partitions if self.partitions is not None else sorted(set(self._snapshot[2]) | set(got_v))
            pb, pv = _predict(keys, *self._snapshot)
            got_b = e.get("resume_batch")
            if (got_b != pb or got_v != pv) and self.resume_bad is None:
                self.resume_bad = (e["seq"], f"span model predicts resume at batch {pb} with state "
                                             f"versions {pv}; Spark resumed at {got_b} with {got_v}")
        elif k == "progress":
            self.progress.append(e)
        elif k in _ENDS:
            self.ends[k] = e

    def close(self) -> StreamView:
        """After the last event: at the end of the run every batch must be committed."""
        if self.ended and self.commit_bad is None:
            want = list(range(self.n_batches)) if self.n_batches >= 0 else sorted(self.planned)
            if sorted(self.committed) != want:
                self.commit_bad = (self.ends["end"]["seq"], f"run ended with committed batches {self.committed}, "
                                                            f"expected {want}")
        return self

    @classmethod
    def read(cls, header: dict[str, Any], events: list[dict[str, Any]], n_batches: int | None,
             requested: tuple[str, int] | None, partitions: list[str] | None,
             source: str | None = None) -> StreamView:
        """Read a list of events; ``partitions`` fixes the state instances of the span model (None:
        those seen in the trace). ``n_batches`` None: every planned batch must commit."""
        v = cls(header, source, -1 if n_batches is None else n_batches, requested, partitions)
        for e in events:
            v.feed(e)
        return v.close()


def _verdict(name: str, ok: bool | None, detail: str, seq: int | None = None) -> Check:
    """held (``ok`` true) or violated (false, at ``seq``); None is refused here: say why with
    ``Check.unchecked`` / ``Check.not_applicable``."""
    if ok is None:
        raise ValueError(f"{name}: an undecided check must be unchecked or not applicable")
    return Check.held(name, detail) if ok else Check.violated(name, detail, offending_seq=seq)


# ----------------------------------------------------------------------------- common checks
def failure_observed(v: StreamView) -> Check:
    """The requested failure happened (mode and batch) and the query restarted and finished.

    Not applicable when no failure was requested; *unchecked* when the requested failure did not
    happen or the trace ends before the restart or the end of the run: nothing about recovery was
    checked, so the replay must not pass.
    """
    name = "failure-observed"
    if v.requested is None:
        return Check.not_applicable(name, "no failure requested (a failure-free run)")
    mode, batch = v.requested
    hit = [f for f in v.failures if f.get("mode") == mode and f.get("batch") == batch]
    if not hit:
        seen = [(f.get("mode"), f.get("batch")) for f in v.failures]
        return Check.unchecked(name, f"the requested {mode} failure at batch {batch} did not happen (failures "
                                     f"seen: {seen or 'none'}); recovery was not exercised")
    after = [r for r in v.restarts if r["seq"] > hit[0]["seq"]]
    if mode == "executor" and v.ended:  # an executor lost: the same driver goes on (killpoints.executor_struck)
        return Check.held(name, f"executor failure at batch {batch} (seq {hit[0]['seq']}: executor "
                                f"{hit[0].get('executor_id')}, pid {hit[0].get('pid')}); the query went on in the "
                                "same driver and finished")
    if not after:
        return Check.unchecked(name, f"the {mode} failure at batch {batch} (seq {hit[0]['seq']}) happened but "
                                     "the trace has no restart after it")
    if not v.ended:
        return Check.unchecked(name, f"the {mode} failure at batch {batch} happened and the query restarted, "
                                     f"but the run did not end (trace stops at seq {v.last_seq})")
    return Check.held(name, f"{mode} failure at batch {batch} (seq {hit[0]['seq']}); the query restarted "
                            f"(seq {after[0]['seq']}) and finished")


class FailureObservedNhop(TraceCheck):
    """``failure-observed`` for a message-passing trace: the header's requested process failure
    has a ``failure`` and a ``recovery`` event and the run ended (else unchecked)."""

    name = "failure-observed"
    needs = ("config.fail_process", "failure", "recovery", "end")

    def __init__(self, header: dict[str, Any]):
        cfg = header.get("config") or {}
        self.proc, self.rnd = cfg.get("fail_process"), cfg.get("fail_round")
        self.fail: int | None = None
        self.rec: int | None = None

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        if obj["kind"] == "failure" and self.fail is None:
            self.fail = obj["seq"]
        elif obj["kind"] == "recovery" and self.fail is not None and self.rec is None:
            self.rec = obj["seq"]

    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        name, proc, rnd = self.name, self.proc, self.rnd
        if proc is None:
            return Check.not_applicable(name, "no failure requested (a failure-free run)")
        if self.fail is None:
            return Check.unchecked(name, f"the requested failure of P{proc} in round {rnd} did not happen; "
                                         "recovery was not exercised")
        if self.rec is None or not v.ended:
            return Check.unchecked(name, f"P{proc} failed (seq {self.fail}) but the trace has "
                                         f"{'no recovery after it' if self.rec is None else 'no end of run'}")
        return Check.held(name, f"P{proc} failed in round {rnd} (seq {self.fail}); recovery at seq {self.rec}; "
                                "the run finished")


def commit_protocol(v: StreamView) -> Check:
    """Batches planned and committed in order, each commit after its sink write (same attempt)."""
    bad = v.commit_bad
    return _verdict("commit-protocol", bad is None,
                 bad[1] if bad else f"{len(v.planned)} batches planned, {len(v.committed)} committed in "
                 f"order; each commit after its sink write", bad[0] if bad else None)


def resume_prediction(v: StreamView) -> Check:
    """Every restart resumed at the batch and state versions the span model predicts."""
    bad = v.resume_bad
    return _verdict("resume-prediction", bad is None,
                 bad[1] if bad else f"{len(v.restarts)} restart(s); resume batch and restored state "
                 f"versions equal the span model's", bad[0] if bad else None)


def end_of_run(v: StreamView) -> Check | None:
    """``end-of-run``: the checks of the run's end records could not run when the recording stopped
    first (*unchecked*, never a pass); nothing to report when the run ended."""
    if v.ended:
        return None
    return Check.unchecked("end-of-run", f"not reached: the recording stopped after seq {v.last_seq}; the "
                                         "prefix was checked, the end-of-run checks could not run")


# ----------------------------------------------------------------------------- word count
@dataclass
class _WordcountRef:
    inputs_by_file: dict[str, list[tuple[int, str]]]
    window: int
    ref_out: dict[int, list[list[Any]]]
    ref_state: dict[Any, int]
    comm_inputs: list[list[tuple[int, str]]]


def _wordcount_ref(v: StreamView) -> _WordcountRef:
    from rollcheck.spark_replay.wordcount import rollup_updates

    cfg = v.header.get("config", {})
    if not isinstance(cfg, dict) or not isinstance(cfg.get("inputs"), list):
        raise InvalidInputError("header has no config.inputs", source=v.source, location="line 1")
    try:
        inputs_by_file = {name: [(int(t), str(w)) for t, w in recs] for name, recs in cfg["inputs"]}
        window = int(cfg["window"])
    except (KeyError, TypeError, ValueError):
        raise InvalidInputError("header config is malformed", source=v.source, location="line 1") from None
    ref_out, ref_state = rollup_updates([recs for _n, recs in cfg["inputs"]], window)
    comm = [[r for f in v.planned.get(b, []) for r in inputs_by_file.get(f, [])] for b in v.committed]
    return _WordcountRef(inputs_by_file, window, ref_out, ref_state, comm)


def _rows_of(state: dict[Any, int]) -> list[list[Any]]:
    from rollcheck.spark_replay.wordcount import _row_order

    return sorted(([*key, n] for key, n in state.items()), key=_row_order)


def state_fold(v: StreamView, ref: _WordcountRef) -> Check:
    """The decoded final state equals the fold of the committed batches' inputs."""
    from rollcheck.spark_replay.wordcount import fold_state

    fs = v.ends.get("final_state")
    if fs is None:
        return _verdict("state-fold", False, "no final_state event", v.ends["end"]["seq"])
    folded = _rows_of(fold_state(ref.comm_inputs, ref.window, list(range(len(ref.comm_inputs)))))
    got = fs.get("rows")
    return _verdict("state-fold", got == folded,
                 f"decoded state ({len(got or [])} keys, version {fs.get('version')}) "
                 + ("equals" if got == folded else "differs from")
                 + f" the fold of the {len(v.committed)} committed batches' inputs",
                 None if got == folded else fs["seq"])


def final_state_failure_free(v: StreamView, ref: _WordcountRef) -> Check:
    """The decoded final state equals the failure-free run's."""
    fs = v.ends.get("final_state")
    if fs is None:
        return _verdict("final-state-failure-free", False, "no final_state event", v.ends["end"]["seq"])
    got, want = fs.get("rows"), _rows_of(ref.ref_state)
    return _verdict("final-state-failure-free", got == want,
                 ("equals" if got == want else "differs from") + " the failure-free run's state",
                 None if got == want else fs["seq"])


def sink_exactly_once(v: StreamView, ref: _WordcountRef) -> Check:
    """The idempotent sink holds every batch once, equal to the failure-free output."""
    sf = v.ends.get("sink_final")
    if sf is None:
        return _verdict("sink-exactly-once", False, "no sink_final event", v.ends["end"]["seq"])
    got_s = {int(b): rows for b, rows in (sf.get("batches") or {}).items()}
    want_s = {b: ref.ref_out[b] for b in range(v.n_batches)}
    bad = sorted(b for b in set(got_s) | set(want_s) if got_s.get(b) != want_s.get(b))
    return _verdict("sink-exactly-once", not bad,
                 f"{len(got_s)} batch files, each once, equal to the failure-free output"
                 if not bad else f"sink differs from the failure-free run at batches {bad}",
                 None if not bad else sf["seq"])


def side_channel_duplicates(v: StreamView) -> Check:
    """The non-idempotent side channel: one entry per batch plus one per sink/kill failure."""
    sc = v.ends.get("side_channel")
    if sc is None:
        return _verdict("side-channel-duplicates", False, "no side_channel event", v.ends["end"]["seq"])
    counts = Counter(int(x["batch"]) for x in sc.get("entries", []))
    want_c = Counter(range(v.n_batches))
    for f in v.failures:
        if f.get("mode") in ("sink", "kill"):
            want_c[int(f["batch"])] += 1
    bad = sorted(b for b in set(counts) | set(want_c) if counts[b] != want_c[b])
    dups = sum(counts.values()) - len(counts)
    return _verdict("side-channel-duplicates", not bad,
                 f"{dups} duplicate(s), exactly one per sink/kill failure" if not bad else
                 f"side channel counts {dict(counts)} differ from expected {dict(want_c)} "
                 f"at batches {bad}", None if not bad else sc["seq"])


def listener_progress(v: StreamView, ref: _WordcountRef) -> Check:
    """Spark's progress reports name committed batches only, with the fold's row counts."""
    from rollcheck.spark_replay.wordcount import fold_state

    bad_p = None
    for e in v.progress:
        b = e.get("batch")
        if b not in v.committed:  # conclusive only once the run ended without committing b
            bad_p = (v.ends["end"]["seq"], f"progress reported for batch {b} (seq {e['seq']}), "
                                           f"which never committed")
        elif e.get("input_rows") != len(ref.inputs_by_file.get((v.planned.get(b) or [""])[0], [])):
            bad_p = (e["seq"], f"batch {b}: {e.get('input_rows')} input rows reported")
        else:
            upto = fold_state(ref.comm_inputs, ref.window, list(range(v.committed.index(b) + 1)))
            if e.get("state_rows") != [len(upto)]:
                bad_p = (e["seq"], f"batch {b}: {e.get('state_rows')} state rows reported, the fold "
                                   f"has {len(upto)}")
        if bad_p:
            break
    return _verdict("listener-progress", bad_p is None,
                 bad_p[1] if bad_p else f"{len(v.progress)} progress event(s): committed batches "
                 f"only, input and state row counts equal the fold", bad_p[0] if bad_p else None)


def statestore_crosscheck(v: StreamView) -> Check:
    """Spark's ``statestore`` reader agreed with the plain-Python decoder (word count)."""
    cc = v.ends["state_crosscheck"]
    ok = bool(cc.get("agree")) and cc.get("spark_max_batch") == cc.get("max_committed")
    return _verdict("statestore-crosscheck", ok,
                 f"Spark's statestore reader ({cc.get('spark_rows')} rows) "
                 + ("agrees" if ok else "disagrees") + " with the plain-Python decoder",
                 None if ok else cc["seq"])


def _requested(cfg: dict[str, Any]) -> tuple[str, int] | None:
    if cfg.get("failure") is None or cfg.get("fail_at_batch") is None:
        return None
    return str(cfg["failure"]), int(cfg["fail_at_batch"])


def wordcount_plugins(header: dict[str, Any], source: str | None) -> list[TraceCheck]:
    """The plug-ins of a word-count trace (module docstring)."""
    cfg = header.get("config", {})
    try:
        parts = [str(p) for p in range(int(cfg["shuffle_partitions"]))]
        n = int(cfg["batches"])
        req = _requested(cfg)
    except (KeyError, TypeError, ValueError):
        raise InvalidInputError("header config is malformed", source=source, location="line 1") from None
    stream = SparkStream(StreamView(header, source, n, req, parts))
    refs: list[_WordcountRef] = []

    def ref(v: StreamView) -> _WordcountRef:
        if not refs:
            refs.append(_wordcount_ref(v))
        return refs[0]

    def if_any(kind: str, fn: Any) -> Any:
        return lambda v: fn(v) if (v.progress if kind == "progress" else kind in v.ends) else None

    return [stream,
            StreamCheck("failure-observed", stream, failure_observed),
            StreamCheck("commit-protocol", stream, commit_protocol),
            StreamCheck("resume-prediction", stream, resume_prediction),
            StreamCheck("end-of-run", stream, end_of_run),
            StreamCheck("state-fold", stream, lambda v: state_fold(v, ref(v)), at_end=True),
            StreamCheck("final-state-failure-free", stream, lambda v: final_state_failure_free(v, ref(v)),
                        at_end=True),
            StreamCheck("sink-exactly-once", stream, lambda v: sink_exactly_once(v, ref(v)), at_end=True),
            StreamCheck("side-channel-duplicates", stream, side_channel_duplicates, at_end=True),
            StreamCheck("listener-progress", stream, if_any("progress", lambda v: listener_progress(v, ref(v))),
                        at_end=True),
            StreamCheck("statestore-crosscheck", stream, if_any("state_crosscheck", statestore_crosscheck),
                        at_end=True)]


class SparkStream(TraceCheck):
    """Feeds a :class:`StreamView` from the trace (a collector: reports nothing itself)."""

    name = "spark-stream"
    needs = ("spark.*", "failure", "end")

    def __init__(self, view: StreamView):
        self.view = view

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        try:
            self.view.feed(obj)
        except _MALFORMED as e:  # a field of the engine's event that is not what the recorder writes
            raise InvalidInputError(f"{obj['kind']}: malformed event ({type(e).__name__}: {e})",
                                    source=self.view.source,
                                    location=f"line {line} (seq {obj['seq']})") from None

    def finish(self, v: Any, results: dict[str, Check]) -> None:
        self.view.close()
        return None


class StreamCheck(TraceCheck):
    """One Spark streaming check as a plug-in: ``fn(view) -> Check | None`` after the last event.

    ``at_end``: the check reads the run's end records; a recording that stopped before them
    leaves it out (``end-of-run`` says so, unchecked).
    """

    after = ("spark-stream",)

    def __init__(self, name: str, stream: SparkStream, fn: Any, *, at_end: bool = False):
        self.name = name
        self.stream = stream
        self.fn = fn
        self.at_end = at_end

    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        sv = self.stream.view
        if self.at_end and not sv.ended:
            return None
        try:
            out: Check | None = self.fn(sv)
        except _MALFORMED as e:
            raise InvalidInputError(f"{self.name}: the trace's records this check reads are malformed "
                                    f"({type(e).__name__}: {e})", source=sv.source) from None
        return out


# ----------------------------------------------------------------------------- user queries
def _canon(row: Any) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)


def output_exactly_once(v: StreamView) -> Check:
    """The final output equals the failure-free run's: the same rows, each as often (a
    duplicate is named with its batch and row), and the same last row per key.

    Examples
    --------
    See ``tests/test_spark_query.py`` (a non-idempotent sink under a sink failure).
    """
    name = "output-exactly-once"
    ref, fin = v.ends.get("reference"), v.ends.get("output_final")
    if ref is None or fin is None:
        return _verdict(name, False, "no " + ("reference" if ref is None else "output_final") + " event",
                     v.ends["end"]["seq"])
    key = list(v.header.get("config", {}).get("key") or [])
    want, got = Counter(map(_canon, ref.get("output", []))), Counter(map(_canon, fin.get("rows", [])))
    extra, missing = got - want, want - got
    if extra:
        row = next(iter(extra))
        hits = [e for e in v.sink_writes if row in set(map(_canon, e.get("rows", [])))]
        batches = sorted({e["batch"] for e in hits})
        again = [e for e in hits if sum(1 for x in hits if x["batch"] == e["batch"]) > 1]
        seq = again[1]["seq"] if len(again) > 1 else fin["seq"]
        where = f"of batch {batches[0]} " if batches else ""
        return _verdict(name, False, f"duplicate: row {row} {where}is in the output {got[row]} time(s), the "
                                  f"failure-free run has it {want[row]} time(s)"
                                  + (f" (batch {again[0]['batch']} was written {len([x for x in hits if x['batch'] == again[0]['batch']])} times: a non-idempotent sink)" if again else "")
                                  + f"; {sum(extra.values())} extra row(s) in all", seq)
    if missing:
        row = next(iter(missing))
        return _verdict(name, False, f"lost: row {row} of the failure-free output is missing "
                                  f"({sum(missing.values())} row(s) missing in all)", fin["seq"])

    def table(rows: list[dict[str, Any]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in rows:
            out[_canon([r.get(k) for k in key])] = _canon(r)
        return out

    if table(fin.get("rows", [])) != table(ref.get("output", [])):  # same multiset, other order
        return _verdict(name, False, f"the last row per key {key} differs from the failure-free run's",
                     fin["seq"])
    return _verdict(name, True, f"{sum(got.values())} output row(s), {len(table(fin.get('rows', [])))} key(s): "
                             f"equal to the failure-free run's, no duplicate, none lost")


#: Spark's documentation of foreachBatch's re-deliveries after a failure.
FOREACHBATCH_DOC = ("Spark Structured Streaming Programming Guide, section \"Using Foreach and ForeachBatch\" "
                    "(foreachBatch): \"By default, foreachBatch provides only at-least-once write "
                    "guarantees. However, you can use the batchId provided to the function as way to "
                    "deduplicate the output and get an exactly-once guarantee.\"")


def sink_handings(v: StreamView, key: list[str]) -> dict[str, Any]:
    """Which rows the engine handed the sink again, per KEY, counted from the trace's handings.

    Every ``spark.sink_written`` event is one handing of a batch (its id, the attempt, the rows
    handed). The first handing of a batch is its delivery; each later one is a re-delivery *after
    a failure* when a ``failure`` event lies between it and the batch's previous handing and the
    attempt changed, *within one attempt* when the attempt is the same, and *again without a
    failure* otherwise. Each re-delivery counts the rows it handed, per KEY.

    Examples
    --------
    >>> v = StreamView({}, None, -1, None, None)
    >>> v.sink_writes = [{"seq": 2, "batch": 0, "attempt": 1, "rows": [{"u": "a"}, {"u": "b"}]},
    ...                  {"seq": 4, "batch": 0, "attempt": 2, "rows": [{"u": "a"}, {"u": "b"}]},
    ...                  {"seq": 5, "batch": 1, "attempt": 2, "rows": [{"u": "a"}]},
    ...                  {"seq": 6, "batch": 1, "attempt": 2, "rows": [{"u": "a"}]}]
    >>> v.failures = [{"seq": 3}]
    >>> h = sink_handings(v, ["u"])
    >>> h["redelivered"], h["within_attempt"], sorted(h["handed_keys"])
    ({'["a"]': 1, '["b"]': 1}, {'["a"]': 1}, ['["a"]', '["b"]'])
    """
    def keys_of(rows: list[Any]) -> Counter[str]:
        return Counter(_canon([r.get(k) for k in key]) if isinstance(r, dict) else _canon(r) for r in rows)

    redelivered: Counter[str] = Counter()
    within: Counter[str] = Counter()
    again: Counter[str] = Counter()
    handed: set[str] = set()
    last: dict[int, dict[str, Any]] = {}
    fail_seqs = sorted(int(f["seq"]) for f in v.failures)
    for e in sorted(v.sink_writes, key=lambda e: int(e["seq"])):
        per_key = keys_of(list(e.get("rows") or []))
        handed |= set(per_key)
        b = int(e["batch"])
        prev = last.get(b)
        last[b] = e
        if prev is None:
            continue
        if e.get("attempt", 1) == prev.get("attempt", 1):
            within.update(per_key)
        elif any(int(prev["seq"]) < s < int(e["seq"]) for s in fail_seqs):
            redelivered.update(per_key)
        else:
            again.update(per_key)
    return {"redelivered": dict(sorted(redelivered.items())), "within_attempt": dict(sorted(within.items())),
            "again_without_failure": dict(sorted(again.items())), "handed_keys": handed}


def _user_sink_output(v: StreamView, plain_check: Check) -> Check:
    """The output check of a query with its own sink, judged against its ``SINK_GUARANTEE``."""
    from dataclasses import replace

    from rollcheck.pyimpl.attribution import check_guarantee, judge_sink

    cfg = v.header.get("config", {})
    try:
        guarantee = check_guarantee(cfg.get("sink_guarantee"))
    except ValueError as e:
        raise InvalidInputError(f"header config.sink_guarantee: {e}", source=v.source, location="line 1") from None
    key = list(cfg.get("key") or [])
    ref, fin = v.ends["reference"], v.ends["output_final"]

    def per_key(rows: list[Any]) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for r in rows:
            k = _canon([r.get(c) for c in key]) if isinstance(r, dict) else _canon(r)
            out.setdefault(k, Counter())[_canon(r)] += 1
        return out

    h = sink_handings(v, key)
    j = judge_sink(guarantee, per_key(list(ref.get("output", []))), per_key(list(fin.get("rows", []))),
                   redelivered=h["redelivered"], within_attempt=h["within_attempt"],
                   again_without_failure=h["again_without_failure"], handed_keys=h["handed_keys"],
                   documentation=FOREACHBATCH_DOC)
    if guarantee == "exactly-once":
        d = j["data"]
        if plain_check.ok is False and d["changed"] and not d["extra_copies"] and not d["lost"]:
            # an aggregating read_output: no row is a copy, values changed (say so, not "duplicate")
            plain_check = replace(plain_check, detail=j["detail"])
        return replace(plain_check, data={**plain_check.data, **d})
    name = "output-at-least-once"
    if j["ok"]:
        return Check.held(name, j["detail"], **j["data"])
    return Check.violated(name, j["detail"], offending_seq=fin["seq"], **j["data"])


def user_output(v: StreamView) -> Check:
    """The output check of a user query: :func:`output_exactly_once` for rollcheck's default sink;
    for the module's own sink the same, judged against its declared ``SINK_GUARANTEE`` (named
    ``output-at-least-once`` when it declares at-least-once), with the per-KEY counts of
    :func:`~rollcheck.pyimpl.attribution.judge_sink` and the re-deliveries of
    :func:`sink_handings` in the check's data."""
    c = output_exactly_once(v)
    cfg = v.header.get("config", {})
    if not cfg.get("user_sink") or "reference" not in v.ends or "output_final" not in v.ends:
        return c
    return _user_sink_output(v, c)


def state_failure_free(v: StreamView) -> Check:
    """The operator state read with Spark's state reader equals the failure-free run's."""
    name = "state-failure-free"
    ref, fin = v.ends.get("reference"), v.ends.get("state_final")
    if ref is None or fin is None:
        return _verdict(name, False, "no " + ("reference" if ref is None else "state_final") + " event",
                     v.ends["end"]["seq"])
    unreadable = fin.get("unreadable") or ref.get("state_unreadable")
    if unreadable:  # an engine release without a state reader (query.py); the output is still checked
        return Check.not_applicable(name, str(unreadable))
    want, got = ref.get("state") or {}, fin.get("stores") or {}
    for store in sorted(set(want) | set(got)):
        w, g = want.get(store), got.get(store)
        if w is None or g is None:
            return _verdict(name, False, f"state store {store} is only in the "
                                      f"{'failure-free' if g is None else 'recorded'} run", fin["seq"])
        if w.get("digest") != g.get("digest"):
            diff = ""
            if isinstance(w.get("rows"), list) and isinstance(g.get("rows"), list):
                extra = sorted(set(g["rows"]) - set(w["rows"]))
                lost = sorted(set(w["rows"]) - set(g["rows"]))
                diff = (f"; e.g. {'extra ' + extra[0] if extra else 'missing ' + lost[0]}"
                        if extra or lost else "")
            return _verdict(name, False, f"state store {store}: {g.get('count')} row(s) differ from the "
                                      f"failure-free run's {w.get('count')}{diff}", fin["seq"])
    total = sum(int(x.get("count", 0)) for x in got.values())
    return _verdict(name, True, f"{len(got)} state store(s), {total} row(s) read with Spark's state reader: "
                             f"equal to the failure-free run's")


def query_statestore_crosscheck(v: StreamView) -> Check:
    """Per state store, Spark's state reader and the plain-Python decoder count the same rows."""
    fin = v.ends["state_final"]
    bad = [f"{s}: Spark {x.get('count')} vs decoder {x.get('decoded')}"
           for s, x in sorted((fin.get("stores") or {}).items())
           if x.get("decoded") is not None and x.get("count") != x.get("decoded")]  # None: RocksDB
    return _verdict("statestore-crosscheck", not bad,
                 "; ".join(bad) if bad else f"{len(fin.get('stores') or {})} store(s): Spark's state reader "
                 f"and the plain-Python decoder agree on every row count", fin["seq"] if bad else None)


class EventListCheck(TraceCheck):
    """A check written as ``fn(header, events) -> Check`` over the trace's own events (not the core
    events the adapter derived), collected during the pass: the way to plug in a check that needs
    the whole list, e.g. ``EventListCheck("kill-point", header, kill_point_struck)``."""

    def __init__(self, name: str, header: dict[str, Any], fn: Any, source: str | None = None):
        self.name = name
        self.header = header
        self.fn = fn
        self.source = source
        self.events: list[dict[str, Any]] = []

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        if not obj.get("derived"):
            self.events.append(obj)

    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        try:
            out: Check | None = self.fn(self.header, self.events)
        except _MALFORMED as e:
            raise InvalidInputError(f"{self.name}: the trace's records this check reads are malformed "
                                    f"({type(e).__name__}: {e})", source=self.source) from None
        return out


def query_plugins(header: dict[str, Any], source: str | None) -> list[TraceCheck]:
    """The plug-ins of a user-query trace (module docstring)."""
    cfg = header.get("config", {})
    try:
        req = _requested(cfg)
    except (TypeError, ValueError):
        raise InvalidInputError("header config is malformed", source=source, location="line 1") from None
    stream = SparkStream(StreamView(header, source, -1, req, None))
    output_name = ("output-at-least-once" if cfg.get("user_sink") and cfg.get("sink_guarantee") == "at-least-once"
                   else "output-exactly-once")

    def crosscheck(v: StreamView) -> Check | None:  # RocksDB stores (decoded None): Spark's reader only
        stores = (v.ends["state_final"].get("stores") or {}).values() if "state_final" in v.ends else []
        return query_statestore_crosscheck(v) if any(x.get("decoded") is not None for x in stores) else None

    plugins: list[TraceCheck] = [
        stream,
        StreamCheck("failure-observed", stream, failure_observed),
        StreamCheck("commit-protocol", stream, commit_protocol),
        StreamCheck("resume-prediction", stream, resume_prediction),
        StreamCheck("end-of-run", stream, end_of_run),
        StreamCheck(output_name, stream, user_output, at_end=True),
        StreamCheck("state-failure-free", stream, state_failure_free, at_end=True),
        StreamCheck("statestore-crosscheck", stream, crosscheck, at_end=True)]
    if req is not None and req[0] == "kill":  # where the kill struck (killpoints.py)
        from rollcheck.spark_replay.killpoints import kill_point_struck

        plugins.insert(2, EventListCheck("kill-point", header, kill_point_struck, source))
    if req is not None and req[0] in ("executor", "retry"):  # what struck (killpoints.py)
        from rollcheck.spark_replay.killpoints import executor_struck, retry_struck

        plugins.insert(2, EventListCheck("executor-lost", header, executor_struck, source) if req[0] == "executor"
                       else EventListCheck("task-retried", header, retry_struck, source))
    from rollcheck.spark_replay.oracles import oracle_plugins

    plugins += oracle_plugins(header, source)  # batch-equivalent, release-differential, ...
    return plugins
