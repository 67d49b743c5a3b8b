"""A user query's own sink (``foreachBatch``), judged against the module's ``SINK_GUARANTEE``.

:func:`sink_handings` counts, per KEY, the rows the engine handed the sink again (after a failure,
within one attempt, again without a failure) from the trace's ``spark.sink_written`` events — never
from the output rows; :func:`user_sink_output` judges the output with
:func:`~rollcheck.pyimpl.attribution.judge_sink` (``output-at-least-once`` when the module declares
at-least-once), citing :data:`FOREACHBATCH_DOC`. Where an at-least-once sink's ``read_output``
aggregates (values changed, copies cannot be counted), :func:`envelope_check` judges the output by
the at-least-once envelope the recorder built (:mod:`rollcheck.spark_replay.query.sink_envelope`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.stream.view import StreamView, canon_row

__all__ = ["FOREACHBATCH_DOC", "sink_handings", "user_sink_output", "envelope_check"]


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

    Parameters
    ----------
    v : StreamView
        The finished view of the trace.
    key : list of str
        The ``KEY`` columns.

    Returns
    -------
    dict
        Per KEY counts ``redelivered``, ``within_attempt``, ``again_without_failure``; ``handed_keys``.

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
        return Counter(canon_row([r.get(k) for k in key]) if isinstance(r, dict) else canon_row(r) for r in rows)

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


def user_sink_output(v: StreamView, plain_check: Check) -> Check:
    """The output check of a query with its own sink, judged against its ``SINK_GUARANTEE``.

    Parameters
    ----------
    v : StreamView
        The finished view of the trace.
    plain_check : Check
        The output check as for rollcheck's own sink.

    Returns
    -------
    Check
        The check judged against the sink's declared guarantee.
    """
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
            k = canon_row([r.get(c) for c in key]) if isinstance(r, dict) else canon_row(r)
            out.setdefault(k, Counter())[canon_row(r)] += 1
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
    if j["data"]["changed"] and not j["data"]["lost"]:  # aggregated output: copies cannot be counted
        return envelope_check(name, v.ends.get("sink_envelope"), list(fin.get("rows", [])), fin["seq"], j["data"])
    if j["ok"]:
        return Check.held(name, j["detail"], **j["data"])
    return Check.violated(name, j["detail"], offending_seq=fin["seq"], **j["data"])


def envelope_check(name: str, envelope: dict[str, Any] | None, rows: list[Any], seq: int,
                   data: dict[str, Any]) -> Check:
    """An at-least-once sink's aggregated output judged by the envelope (:mod:`.sink_envelope`).

    Held when ``rows`` equal (as a multiset) one of the envelope's tables, violated when none,
    unchecked when the trace holds no envelope or it could not be built.

    Parameters
    ----------
    name : str
        The check's name.
    envelope : dict or None
        The envelope (``tables``, ``extra``); None when the trace holds none.
    rows : list
        The sink's final output.
    seq : int
        The seq a violation names.
    data : dict
        The guarantee judgement's data (kept in the check).

    Returns
    -------
    Check
        Held, violated or unchecked.

    Examples
    --------
    >>> env = {"tables": [[{"u": "a", "b": 5}], [{"u": "a", "b": 8}]], "extra": [{"batch": 1, "as": 4}]}
    >>> envelope_check("s", env, [{"u": "a", "b": 8}], 9, {"changed": {'["a"]': 1}}).status.value
    'held'
    >>> c = envelope_check("s", env, [{"u": "a", "b": 14}], 9, {"changed": {'["a"]': 1}})
    >>> c.status.value, c.data["envelope"]["matched"]
    ('violated', None)
    >>> envelope_check("s", None, [], 9, {"changed": {'["a"]': 1}}).status.value
    'unchecked'
    """
    n_changed = len(data.get("changed") or {})
    why = f"values changed at {n_changed} KEY(s): read_output aggregates, so copies cannot be counted in its rows"
    if envelope is None:
        return Check.unchecked(name, f"{why}, and the trace holds no at-least-once envelope", **data)
    if envelope.get("error") is not None or not isinstance(envelope.get("tables"), list):
        return Check.unchecked(name, f"{why}, and the at-least-once envelope could not be built: "
                                     f"{envelope.get('error')}", **data)
    tables = envelope["tables"]
    got = Counter(canon_row(r) for r in rows)
    matched = next((m for m, t in enumerate(tables) if Counter(canon_row(r) for r in t) == got), None)
    n_extra = len(tables) - 1
    env = {"tables": len(tables), "matched": matched, "extra_handings": envelope.get("extra") or []}
    if matched is not None:
        return Check.held(name, f"within the at-least-once envelope: {why}; the output equals the user's sink "
                                f"handed the run's batches with {matched} of the {n_extra} re-deliveries after "
                                "the failure", **{**data, "envelope": env})
    missing = sorted(set(Counter(canon_row(r) for r in tables[-1])) - set(got))
    extra = sorted(set(got) - set(Counter(canon_row(r) for r in tables[-1])))
    show = (f"e.g. the output has {extra[0]}" if extra else f"e.g. the output lacks {missing[0]}" if missing
            else "the same rows, other counts")
    return Check.violated(name, f"outside the at-least-once envelope: {why}; the output equals none of the "
                                f"{len(tables)} tables of the user's sink handed the run's batches with 0..{n_extra} "
                                f"re-deliveries after the failure ({show[:300]})", offending_seq=seq,
                          **{**data, "envelope": env})
