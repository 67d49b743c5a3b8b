"""The checks of the streaming word count's trace (``rollcheck spark record wordcount``).

:func:`state_fold`, :func:`final_state_failure_free`, :func:`sink_exactly_once`,
:func:`side_channel_duplicates`, :func:`listener_progress` and :func:`statestore_crosscheck`
compare the run with the fold of its committed batches' inputs and with the failure-free run
computed from the header's inputs; :func:`wordcount_plugins` plugs them, and the checks every
streaming trace gets (:mod:`rollcheck.spark_replay.stream.checks`), into the trace checker.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.stream.checks import (
    commit_protocol,
    end_of_run,
    failure_observed,
    requested_failure,
    resume_prediction,
)
from rollcheck.spark_replay.stream.plugins import SparkStream, StreamCheck
from rollcheck.spark_replay.stream.view import StreamView, check_verdict

__all__ = ["state_fold", "final_state_failure_free", "sink_exactly_once", "side_channel_duplicates",
           "listener_progress", "statestore_crosscheck", "wordcount_plugins"]


@dataclass
class _WordcountRef:
    inputs_by_file: dict[str, list[tuple[int, str]]]
    window: int
    ref_out: dict[int, list[list[Any]]]
    ref_state: dict[Any, int]
    comm_inputs: list[list[tuple[int, str]]]


def _wordcount_ref(v: StreamView) -> _WordcountRef:
    from rollcheck.spark_replay.jobs.wordcount import rollup_updates

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
    from rollcheck.spark_replay.jobs.wordcount import _row_order

    return sorted(([*key, n] for key, n in state.items()), key=_row_order)


def state_fold(v: StreamView, ref: _WordcountRef) -> Check:
    """The decoded final state equals the fold of the committed batches' inputs.

    Parameters
    ----------
    v : StreamView
        The finished view of the trace.
    ref : _WordcountRef
        The inputs and the failure-free run recomputed from the trace.

    Returns
    -------
    Check
        Held when the final state equals the fold.
    """
    from rollcheck.spark_replay.jobs.wordcount import fold_state

    fs = v.ends.get("final_state")
    if fs is None:
        return check_verdict("state-fold", False, "no final_state event", v.ends["end"]["seq"])
    folded = _rows_of(fold_state(ref.comm_inputs, ref.window, list(range(len(ref.comm_inputs)))))
    got = fs.get("rows")
    return check_verdict("state-fold", got == folded,
                 f"decoded state ({len(got or [])} keys, version {fs.get('version')}) "
                 + ("equals" if got == folded else "differs from")
                 + f" the fold of the {len(v.committed)} committed batches' inputs",
                 None if got == folded else fs["seq"])


def final_state_failure_free(v: StreamView, ref: _WordcountRef) -> Check:
    """The decoded final state equals the failure-free run's.

    Parameters
    ----------
    v : StreamView
        The finished view of the trace.
    ref : _WordcountRef
        The inputs and the failure-free run recomputed from the trace.

    Returns
    -------
    Check
        Held when the final state equals the failure-free run's.
    """
    fs = v.ends.get("final_state")
    if fs is None:
        return check_verdict("final-state-failure-free", False, "no final_state event", v.ends["end"]["seq"])
    got, want = fs.get("rows"), _rows_of(ref.ref_state)
    return check_verdict("final-state-failure-free", got == want,
                 ("equals" if got == want else "differs from") + " the failure-free run's state",
                 None if got == want else fs["seq"])


def sink_exactly_once(v: StreamView, ref: _WordcountRef) -> Check:
    """The idempotent sink holds every batch once, equal to the failure-free output.

    Parameters
    ----------
    v : StreamView
        The finished view of the trace.
    ref : _WordcountRef
        The inputs and the failure-free run recomputed from the trace.

    Returns
    -------
    Check
        Held when every batch file equals the failure-free output.
    """
    sf = v.ends.get("sink_final")
    if sf is None:
        return check_verdict("sink-exactly-once", False, "no sink_final event", v.ends["end"]["seq"])
    got_s = {int(b): rows for b, rows in (sf.get("batches") or {}).items()}
    want_s = {b: ref.ref_out[b] for b in range(v.n_batches)}
    bad = sorted(b for b in set(got_s) | set(want_s) if got_s.get(b) != want_s.get(b))
    return check_verdict("sink-exactly-once", not bad,
                 f"{len(got_s)} batch files, each once, equal to the failure-free output"
                 if not bad else f"sink differs from the failure-free run at batches {bad}",
                 None if not bad else sf["seq"])


def side_channel_duplicates(v: StreamView) -> Check:
    """The non-idempotent side channel: one entry per batch plus one per sink/kill failure."""
    sc = v.ends.get("side_channel")
    if sc is None:
        return check_verdict("side-channel-duplicates", False, "no side_channel event", v.ends["end"]["seq"])
    counts = Counter(int(x["batch"]) for x in sc.get("entries", []))
    want_c = Counter(range(v.n_batches))
    for f in v.failures:
        if f.get("mode") in ("sink", "kill"):
            want_c[int(f["batch"])] += 1
    bad = sorted(b for b in set(counts) | set(want_c) if counts[b] != want_c[b])
    dups = sum(counts.values()) - len(counts)
    return check_verdict("side-channel-duplicates", not bad,
                 f"{dups} duplicate(s), exactly one per sink/kill failure" if not bad else
                 f"side channel counts {dict(counts)} differ from expected {dict(want_c)} "
                 f"at batches {bad}", None if not bad else sc["seq"])


def listener_progress(v: StreamView, ref: _WordcountRef) -> Check:
    """Spark's progress reports name committed batches only, with the fold's row counts.

    Parameters
    ----------
    v : StreamView
        The finished view of the trace.
    ref : _WordcountRef
        The inputs and the failure-free run recomputed from the trace.

    Returns
    -------
    Check
        Violated at the first progress report naming an uncommitted batch or wrong row counts.
    """
    from rollcheck.spark_replay.jobs.wordcount import fold_state

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
    return check_verdict("listener-progress", bad_p is None,
                 bad_p[1] if bad_p else f"{len(v.progress)} progress event(s): committed batches "
                 f"only, input and state row counts equal the fold", bad_p[0] if bad_p else None)


def statestore_crosscheck(v: StreamView) -> Check:
    """Spark's ``statestore`` reader agreed with the plain-Python decoder (word count)."""
    cc = v.ends["state_crosscheck"]
    ok = bool(cc.get("agree")) and cc.get("spark_max_batch") == cc.get("max_committed")
    return check_verdict("statestore-crosscheck", ok,
                 f"Spark's statestore reader ({cc.get('spark_rows')} rows) "
                 + ("agrees" if ok else "disagrees") + " with the plain-Python decoder",
                 None if ok else cc["seq"])


def wordcount_plugins(header: dict[str, Any], source: str | None) -> list[TraceCheck]:
    """The plug-ins of a word-count trace (module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    source : str or None
        The trace file, named by errors.

    Returns
    -------
    list of TraceCheck
        The collector and the word-count checks.
    """
    cfg = header.get("config", {})
    try:
        parts = [str(p) for p in range(int(cfg["shuffle_partitions"]))]
        n = int(cfg["batches"])
        req = requested_failure(cfg)
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
