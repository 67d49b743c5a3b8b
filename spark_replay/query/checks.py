"""The checks of a user query's trace (``rollcheck spark record query``).

- :func:`output_exactly_once`: the final output equals the failure-free run's; a duplicate is
  named with its batch and row; with the module's own sink :func:`user_output` judges it against
  the module's ``SINK_GUARANTEE`` (:mod:`rollcheck.spark_replay.query.user_sink`);
- :func:`state_failure_free`: the operator state read with Spark's own state reader equals the
  failure-free run's; :func:`query_statestore_crosscheck`: that reader and rollcheck's decoder
  count the same rows;
- :func:`query_plugins` plugs them in with the checks every streaming trace gets, where a kill,
  executor loss or task retry struck (:mod:`rollcheck.spark_replay.faults.killpoints`) and the
  engine-distrusting oracles (:mod:`rollcheck.spark_replay.oracles.checks`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.oracles.upgrade_eval import upgrade_output, upgrade_state
from rollcheck.spark_replay.query.user_sink import user_sink_output
from rollcheck.spark_replay.stream.checks import (
    commit_protocol,
    end_of_run,
    failure_observed,
    requested_failure,
    resume_prediction,
)
from rollcheck.spark_replay.stream.plugins import EventListCheck, SparkStream, StreamCheck
from rollcheck.spark_replay.stream.view import StreamView, canon_row, check_verdict

__all__ = ["output_exactly_once", "user_output", "state_failure_free", "query_statestore_crosscheck", "input_batches",
           "query_plugins"]


def _reference_failed(v: StreamView, name: str) -> Check | None:
    """Not applicable where the failure-free run on this release failed with the engine's exception.

    ``spark.reference_failed``: ``release-differential`` judges it. No failure-free run to compare.
    """
    if v.ends.get("reference") is None and (v.ends.get("end") or {}).get("status") == "reference-failed":
        return Check.not_applicable(name, "the failure-free run on this release failed with the engine's exception "
                                          "(release-differential names it): no failure-free run to compare with")
    return None


def output_exactly_once(v: StreamView) -> Check:
    """The final output equals the failure-free run's.

    The same rows, each as often (a duplicate is named with its batch and row), and the same last
    row per key.

    Examples
    --------
    See ``tests/test_spark_query.py`` (a non-idempotent sink under a sink failure).
    """
    name = "output-exactly-once"
    gone = _reference_failed(v, name) or upgrade_output(v)  # oracles/upgrade_eval.py: batch-equivalent judges
    if gone is not None:
        return gone
    ref, fin = v.ends.get("reference"), v.ends.get("output_final")
    if ref is None or fin is None:
        return check_verdict(name, False, "no " + ("reference" if ref is None else "output_final") + " event",
                     v.ends["end"]["seq"])
    key = list(v.header.get("config", {}).get("key") or [])
    want, got = Counter(map(canon_row, ref.get("output", []))), Counter(map(canon_row, fin.get("rows", [])))
    extra, missing = got - want, want - got
    if extra:
        row = next(iter(extra))
        hits = [e for e in v.sink_writes if row in set(map(canon_row, e.get("rows", [])))]
        batches = sorted({e["batch"] for e in hits})
        again = [e for e in hits if sum(1 for x in hits if x["batch"] == e["batch"]) > 1]
        seq = again[1]["seq"] if len(again) > 1 else fin["seq"]
        where = f"of batch {batches[0]} " if batches else ""
        return check_verdict(name, False, f"duplicate: row {row} {where}is in the output {got[row]} time(s), the "
                                  f"failure-free run has it {want[row]} time(s)"
                                  + (f" (batch {again[0]['batch']} was written {len([x for x in hits if x['batch'] == again[0]['batch']])} times: a non-idempotent sink)" if again else "")
                                  + f"; {sum(extra.values())} extra row(s) in all", seq)
    if missing:
        row = next(iter(missing))
        return check_verdict(name, False, f"lost: row {row} of the failure-free output is missing "
                                  f"({sum(missing.values())} row(s) missing in all)", fin["seq"])

    def table(rows: list[dict[str, Any]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in rows:
            out[canon_row([r.get(k) for k in key])] = canon_row(r)
        return out

    if table(fin.get("rows", [])) != table(ref.get("output", [])):  # same multiset, other order
        return check_verdict(name, False, f"the last row per key {key} differs from the failure-free run's",
                     fin["seq"])
    return check_verdict(name, True, f"{sum(got.values())} output row(s), {len(table(fin.get('rows', [])))} key(s): "
                             f"equal to the failure-free run's, no duplicate, none lost")


def user_output(v: StreamView) -> Check:
    """The output check of a user query: :func:`output_exactly_once` for rollcheck's default sink.

    For the module's own sink the same, judged against its declared ``SINK_GUARANTEE`` (named
    ``output-at-least-once`` when it declares at-least-once), with the per-KEY counts of
    :func:`~rollcheck.pyimpl.attribution.judge_sink` and the re-deliveries of :func:`sink_handings`
    in the check's data.
    """
    c = output_exactly_once(v)
    cfg = v.header.get("config", {})
    if not cfg.get("user_sink") or "reference" not in v.ends or "output_final" not in v.ends:
        return c
    return user_sink_output(v, c)


def state_failure_free(v: StreamView) -> Check:
    """The operator state read with Spark's state reader equals the failure-free run's."""
    name = "state-failure-free"
    gone = _reference_failed(v, name) or upgrade_state(v)  # oracles/upgrade_eval.py
    if gone is not None:
        return gone
    ref, fin = v.ends.get("reference"), v.ends.get("state_final")
    if ref is None or fin is None:
        return check_verdict(name, False, "no " + ("reference" if ref is None else "state_final") + " event",
                     v.ends["end"]["seq"])
    unreadable = fin.get("unreadable") or ref.get("state_unreadable")
    if unreadable:  # an engine release without a state reader (state.py); the output is still checked
        return Check.not_applicable(name, str(unreadable))
    want, got = ref.get("state") or {}, fin.get("stores") or {}
    for store in sorted(set(want) | set(got)):
        w, g = want.get(store), got.get(store)
        if w is None or g is None:
            return check_verdict(name, False, f"state store {store} is only in the "
                                      f"{'failure-free' if g is None else 'recorded'} run", fin["seq"])
        if w.get("digest") != g.get("digest"):
            diff = ""
            if isinstance(w.get("rows"), list) and isinstance(g.get("rows"), list):
                extra = sorted(set(g["rows"]) - set(w["rows"]))
                lost = sorted(set(w["rows"]) - set(g["rows"]))
                diff = (f"; e.g. {'extra ' + extra[0] if extra else 'missing ' + lost[0]}"
                        if extra or lost else "")
            return check_verdict(name, False, f"state store {store}: {g.get('count')} row(s) differ from the "
                                      f"failure-free run's {w.get('count')}{diff}", fin["seq"])
    total = sum(int(x.get("count", 0)) for x in got.values())
    reader = ("decoded by rollcheck (no state reader on this release)"
              if any(x.get("reader") == "rollcheck" for x in got.values()) else "read with Spark's state reader")
    return check_verdict(name, True, f"{len(got)} state store(s), {total} row(s) {reader}: "
                             f"equal to the failure-free run's")


def query_statestore_crosscheck(v: StreamView) -> Check:
    """Per state store, Spark's state reader and the plain-Python decoder count the same rows."""
    fin = v.ends["state_final"]
    bad = [f"{s}: Spark {x.get('count')} vs decoder {x.get('decoded')}"
           for s, x in sorted((fin.get("stores") or {}).items())
           if x.get("decoded") is not None and x.get("count") != x.get("decoded")]  # None: RocksDB
    return check_verdict("statestore-crosscheck", not bad,
                 "; ".join(bad) if bad else f"{len(fin.get('stores') or {})} store(s): Spark's state reader "
                 f"and the plain-Python decoder agree on every row count", fin["seq"] if bad else None)


def input_batches(v: StreamView) -> Check | None:
    """``input-batches``: Spark's micro-batch *b* read exactly input batch *b*'s file of every source.

    Every source that has rows in it, and nothing of a source idle in it (a batch where no
    source moves reads the first source's empty file), as the checkpoint's file-source logs
    record what each micro-batch read (``spark.input_files``; the logs the restarted query
    trusts, alike on every release); every input batch was read. None for a trace recorded
    before that event.

    Examples
    --------
    See ``tests/test_spark_sources.py`` (a batch read early, an idle source read, a batch never read).
    """
    name = "input-batches"
    cfg = v.header.get("config") or {}
    want, ev = cfg.get("batch_rows"), v.ends.get("input_files")
    if ev is None and isinstance(want, list) and cfg.get("sources") and (v.ends.get("end") or {}).get("status") == "done":
        # a query of several sources whose run ended without the logs' record: no evidence of alignment
        return Check.unchecked(name, "the run ended without spark.input_files: what each micro-batch read per "
                                     "source is unknown")
    if not isinstance(want, list) or ev is None:
        return None
    sources = cfg.get("sources")
    first = next(iter(sources)) if isinstance(sources, dict) and sources else "input"
    read = {int(b): per for b, per in (ev.get("batches") or {}).items()}
    for b, per in sorted(read.items()):
        moving = sorted(want[b]) if 0 <= b < len(want) and isinstance(want[b], dict) else []
        expect = {s: [b] for s in (moving or ([first] if b < len(want) else []))}
        got = {s: list(n) for s, n in per.items() if n}
        if got != expect:
            wrong = sorted(set(got) | set(expect), key=lambda s: (got.get(s) == expect.get(s), s))[0]
            return Check.violated(name, f"micro-batch {b} read input batch(es) {got.get(wrong, [])} of source "
                                        f"{wrong!r}; it should read {expect.get(wrong, [])}"
                                        + ("" if wrong in moving else " (the source is idle in it)"),
                                  offending_seq=int(ev["seq"]))
    missing = [b for b in range(len(want)) if b not in read]
    if missing:
        return Check.violated(name, f"input batch {missing[0]} was never read by a micro-batch (the file-source "
                                    f"logs have micro-batches {sorted(read)})", offending_seq=int(ev["seq"]))
    names = sorted({s for per in read.values() for s in per})
    return Check.held(name, f"{len(read)} micro-batch(es) each read exactly its input batch of every moving source "
                            f"({', '.join(names)}), none of an idle one (the checkpoint's file-source logs)",
                      examined=len(read))


def query_plugins(header: dict[str, Any], source: str | None) -> list[TraceCheck]:
    """The plug-ins of a user-query trace (module docstring)."""
    cfg = header.get("config", {})
    try:
        req = requested_failure(cfg)
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
        StreamCheck("input-batches", stream, input_batches, at_end=True),
        StreamCheck(output_name, stream, user_output, at_end=True),
        StreamCheck("state-failure-free", stream, state_failure_free, at_end=True),
        StreamCheck("statestore-crosscheck", stream, crosscheck, at_end=True)]
    if req is not None and req[0] == "kill":  # where the kill struck (faults/killpoints.py)
        from rollcheck.spark_replay.faults.killpoints import kill_point_struck

        plugins.insert(2, EventListCheck("kill-point", header, kill_point_struck, source))
    from rollcheck.spark_replay.faults.killpoints import FAILURE_CHECKS

    if req is not None and req[0] in FAILURE_CHECKS:  # executor, retry, twice, during-recovery (faults/killpoints.py)
        check_name, check_fn = FAILURE_CHECKS[req[0]]
        plugins.insert(2, EventListCheck(check_name, header, check_fn, source))
    from rollcheck.spark_replay.oracles.checks import oracle_plugins

    plugins += oracle_plugins(header, source)  # batch-equivalent, release-differential, ...
    from rollcheck.spark_replay.query.plan_checks import plan_plugins

    plugins += plan_plugins(header, source)  # plan-stable, complete-key-unique
    return plugins
