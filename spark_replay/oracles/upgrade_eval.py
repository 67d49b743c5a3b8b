"""``batch-equivalent`` of an upgrade: each input row evaluated by the query that read it.

Details: ``docs/internals/spark-oracles.md`` (section ``upgrade_eval``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from rollcheck.pyimpl.verdict import Check

__all__ = ["combined_evaluation", "judge_upgrade", "upgrade_output", "upgrade_state", "upgrade_failure"]

_NAME = "batch-equivalent"


def _watermarks(checkpoint: Any, progress: Sequence[dict[str, Any]]) -> dict[int, int]:
    """The watermark in force per batch: Spark's progress, else the offset log."""
    from rollcheck.spark_replay.checkpoint.reader import CheckpointDir

    wm: dict[int, int] = {}
    for b, entry in CheckpointDir(checkpoint).offsets().items():
        w = (entry.get("metadata") or {}).get("batchWatermarkMs")
        if w is not None:
            wm[b] = int(w)
    for p in progress:
        if p.get("watermark_ms") is not None and p.get("batch", -1) >= 0:
            wm[int(p["batch"])] = int(p["watermark_ms"])
    return wm


def combined_evaluation(spark: Any, uq: Any, cfg: Any, checkpoint: Any, progress: Sequence[dict[str, Any]],
                        notes: dict[str, Any], plain: Callable[[Any], Any]) -> dict[str, Any]:
    """The payload of the ``final`` run's ``spark.batch_evaluation`` under an upgrade.

    Module docstring. ``applicable``, ``reason``, ``watermarks`` and ``upgrade`` (``last``: batch K,
    ``before``, ``after``, ``after_upto``: each an evaluation of
    :func:`~rollcheck.spark_replay.oracles.batch_eval.evaluate_batch`).

    Parameters
    ----------
    spark : SparkSession
        The session.
    uq : UserQuery
        The loaded query module.
    cfg : QueryConfig
        The recording's configuration.
    checkpoint : Path
        The run's checkpoint folder.
    progress : Sequence of dict
        The run's progress events.
    notes : dict
        What the attempts noted.
    plain : callable
        Converts a Spark value to plain JSON.

    Returns
    -------
    dict
        The event's payload.
    """
    from rollcheck.spark_replay.oracles.batch_eval import evaluate_batch

    t0 = time.perf_counter()
    rows = uq.batches(cfg.seed)
    if cfg.batches is not None:
        rows = rows[: cfg.batches]
    k = int(cfg.fail_at_batch)
    wm = _watermarks(checkpoint, progress)
    upto = [b if i <= k else {} for i, b in enumerate(rows)]  # indices kept: the watermarks are per batch
    plan_q, plan_n = notes.get("stream_plan", ""), notes.get("stream_plan_next", "")

    def run(which: str) -> Callable[[dict[str, Any]], Any]:
        return lambda dfs: uq.run_query(dfs, which=which)

    parts: dict[str, dict[str, Any] | None] = {"before": evaluate_batch(run("query"), spark, uq.sources, upto, wm, plan_q, plain,
                                      output_mode=uq.output_mode),
             "after": evaluate_batch(run("query_next"), spark, uq.sources, rows, wm, plan_n, plain,
                                     output_mode=uq.output_mode),
             "after_upto": evaluate_batch(run("query_next"), spark, uq.sources, upto, wm, plan_n, plain,
                                          output_mode=uq.output_mode)}
    if not any(bool(r) for b in rows[k + 1:] for r in b.values()):
        parts["after_only"] = None
    else:
        rest = [b if i > k else {} for i, b in enumerate(rows)]
        parts["after_only"] = evaluate_batch(run("query_next"), spark, uq.sources, rest, wm, plan_n, plain,
                                             output_mode=uq.output_mode)
    bad = next(((n, p) for n, p in parts.items() if p is not None and not p.get("applicable")), None)
    after = parts["after"] or {}
    return {"applicable": bad is None, "reason": None if bad is None else f"{bad[0]}: {bad[1].get('reason')}",
            "event_time": after.get("event_time"), "watermarks": {str(b): w for b, w in sorted(wm.items())},
            "fields": after.get("fields") or [], "stream_fields": notes.get("stream_fields") or [],
            "upgrade": {"last": k, **parts}, "seconds": round(time.perf_counter() - t0, 3)}


def _rows(ev: dict[str, Any] | None, mode: str | None) -> list[dict[str, Any]] | None:
    """The rows of one evaluation for the output mode (None: undecided or none for it)."""
    from rollcheck.spark_replay.oracles.batch_judge import _variant

    if ev is None:
        return []
    if ev.get("undecided") or not ev.get("applicable"):
        return None
    v = _variant(ev, mode)
    return None if v is None else list(v["rows"])


def _table(rows: Sequence[dict[str, Any]], key: Sequence[str]) -> dict[str, str]:
    from rollcheck.spark_replay.oracles.batch_judge import final_table

    return final_table(rows, key)


def upgrade_failure(events: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The upgrade's core ``failure`` event (what the up-front check found), if any."""
    return next((e for e in events if e.get("kind") == "failure" and e.get("mode") == "upgrade"), None)


def judge_upgrade(header: dict[str, Any], events: list[dict[str, Any]]) -> Check | None:
    """``batch-equivalent`` of an upgrade's trace (module docstring).

    None without a batch evaluation.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    Check or None
        The ``batch-equivalent`` verdict.
    """
    from rollcheck.spark_replay.oracles.batch_judge import _judge

    evals = [e for e in events if str(e.get("kind")).endswith("batch_evaluation")]
    if not evals:
        return None
    cfg = header.get("config") or {}
    key, mode = [str(k) for k in cfg.get("key") or []], cfg.get("output_mode")
    judged = []
    ref_ev = next((e for e in evals if e.get("run") == "reference"), None)
    ref = next((e for e in events if str(e.get("kind")).endswith(".reference")), None)
    if ref_ev is not None and ref is not None and ref_ev.get("applicable") and not ref_ev.get("undecided"):
        bad = _judge(_NAME, "reference", ref_ev, list(ref.get("output") or []), header, int(ref["seq"]))
        if bad is not None:
            return bad
        judged.append(f"reference ({len(ref.get('output') or [])} row(s), query alone)")
    fin_ev = next((e for e in evals if e.get("run") == "final"), None)
    fin = next((e for e in events if str(e.get("kind")).endswith("output_final")), None)
    if fin_ev is None or fin is None or "upgrade" not in fin_ev:
        return Check.unchecked(_NAME, "an upgrade without the batch evaluation of its combined run: each row's "
                                      "query was not evaluated")
    if not fin_ev.get("applicable"):
        return Check.unchecked(_NAME, f"the upgrade's output is judged by the batch job alone, and it cannot run: "
                                      f"{fin_ev.get('reason')}")
    info = upgrade_failure(events) or {}
    up = fin_ev["upgrade"]
    parts = {n: _rows(up.get(n), mode) for n in ("before", "after", "after_upto", "after_only")}
    undecided = [n for n, r in parts.items() if r is None]
    if undecided:
        return Check.unchecked(_NAME, f"the batch evaluation '{undecided[0]}' of the upgrade is undecided for "
                                      f"{mode} mode")
    out = list(fin.get("rows") or [])
    seq = int(fin["seq"])
    k = int(up.get("last", -1))
    if info.get("stateless"):
        final = _stateless(out, parts, key, mode, k, seq)
    elif not info.get("state_prefix_same"):
        return Check.unchecked(_NAME, "query_next changes the query before its stateful operators: the state mixes "
                                      "rows filtered or projected by both queries, which no batch job of one of "
                                      "them gives")
    elif mode == "append":
        return Check.unchecked(_NAME, "append mode with state carried over an upgrade: when each row became final "
                                      "decides which query's projection it went through; not judged")
    else:
        final = _state_carried(out, parts, key, mode, k, seq)
    if isinstance(final, Check):
        return final
    judged.append(f"final ({len(out)} row(s): batches 0..{k} by query, the rest by query_next{final})")
    return Check.held(_NAME, "each input row evaluated by the query that read it, as batch jobs over the rows "
                             "Spark's lateness rule keeps: " + "; ".join(judged), examined=len(judged))


def _stateless(out: list[dict[str, Any]], parts: dict[str, Any], key: list[str], mode: str | None, k: int,
               seq: int) -> Check | str:
    from rollcheck.spark_replay.oracles.batch_judge import canon_row

    want_rows = list(parts["before"]) + list(parts["after_only"] or [])
    if mode == "append":
        have, want = Counter(map(canon_row, out)), Counter(map(canon_row, want_rows))
        for row in sorted(set(have) | set(want)):
            if have.get(row, 0) != want.get(row, 0):
                return Check.violated(_NAME, f"final run: output row {row} is there {have.get(row, 0)} time(s); "
                                             f"query over batches 0..{k} and query_next over the rest give it "
                                             f"{want.get(row, 0)} time(s)", offending_seq=seq)
        return ""
    got = _table(out, key)
    want_t = {**_table(parts["before"], key), **_table(parts["after_only"] or [], key)}
    for kk in sorted(set(got) | set(want_t)):
        if got.get(kk) != want_t.get(kk):
            return Check.violated(_NAME, f"final run: key {kk} is {got.get(kk) or 'missing'}; query over batches "
                                         f"0..{k} then query_next over the rest give {want_t.get(kk) or 'no row'}",
                                  offending_seq=seq)
    return ""


def _state_carried(out: list[dict[str, Any]], parts: dict[str, Any], key: list[str], mode: str | None, k: int,
                   seq: int) -> Check | str:
    got = _table(out, key)
    t_q, t_n, t_nk = (_table(parts[n], key) for n in ("before", "after", "after_upto"))
    either = 0
    for kk in sorted(set(got) | set(t_q) | set(t_n)):
        if mode == "complete":
            allowed = {t_n[kk]} if kk in t_n else {t_q.get(kk)}
        elif kk in t_n and t_n[kk] != t_nk.get(kk):
            allowed = {t_n[kk]}  # updated after batch K: through query_next, over the carried state
        elif kk in t_n:
            allowed = {t_q.get(kk), t_n[kk]}  # updated after K without a change of value, or not at all
            either += int(len(allowed) > 1)
        else:
            allowed = {t_q.get(kk)}
        if got.get(kk) not in allowed:
            shown = " or ".join(sorted(str(a or "no row") for a in allowed))
            return Check.violated(_NAME, f"final run: key {kk} is {got.get(kk) or 'missing'}; with the state carried, "
                                         f"query over batches 0..{k} and query_next after them give {shown}",
                                  offending_seq=seq)
    return f"; {either} key(s) not updated after batch {k} may show either query's row" if either else ""


def upgrade_output(v: Any) -> Check | None:
    """``output-exactly-once`` of an upgrade: not applicable (module docstring); None otherwise."""
    req = v.requested
    if req is None or req[0] != "upgrade":
        return None
    return Check.not_applicable("output-exactly-once", "an upgrade: the failure-free run of query alone is not the "
                                                       "reference; batch-equivalent judges each row by the query "
                                                       "that read it")


def upgrade_state(v: Any) -> Check | None:
    """``state-failure-free`` of an upgrade.

    Not applicable when ``query_next`` changes the stateful operators' input (module docstring);
    None when the usual check applies.
    """
    req = v.requested
    if req is None or req[0] != "upgrade":
        return None
    info = upgrade_failure(v.failures)
    if info is not None and not info.get("state_prefix_same"):
        return Check.not_applicable("state-failure-free", "query_next changes the input of the stateful operators: "
                                                          "the failure-free run of query alone is not the state's "
                                                          "reference")
    return None
