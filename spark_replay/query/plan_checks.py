"""Two cheap checks of every query recording, read from what Spark reported per micro-batch.

Details: ``docs/internals/spark-query.md`` (section ``plan_checks``).

Examples
--------
>>> header = {"config": {"output_mode": "complete", "key": ["k"]}}
>>> ev = [{"seq": 1, "kind": "spark.sink_written", "batch": 0, "rows": [{"k": "a", "n": 1}, {"k": "a", "n": 2}]}]
>>> complete_key_unique(header, ev).status.value
'violated'
>>> ev = [{"seq": 1, "kind": "spark.progress", "attempt": 1, "batch": 0, "state_operators": ["stateStoreSave"]},
...       {"seq": 2, "kind": "spark.progress", "attempt": 1, "batch": 1, "state_operators": []}]
>>> plan_stable(header, ev).status.value
'violated'
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.checkpoint.watcher import base_kind
from rollcheck.spark_replay.stream.plugins import EventListCheck

__all__ = ["PLAN_CHECKS", "plan_stable", "complete_key_unique", "plan_plugins", "prune_state_operator",
           "repeat_complete_key", "PLAN_TAMPERS", "CAUGHT_BY"]

#: The check names this module adds to every query replay.
PLAN_CHECKS = ("plan-stable", "complete-key-unique")


def _of(events: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if base_kind(str(e.get("kind", ""))) == kind]


def _describe(ops: Counter[str]) -> str:
    return ", ".join(f"{n}×{c}" if c > 1 else n for n, c in sorted(ops.items())) or "none"


def plan_stable(header: dict[str, Any], events: Sequence[dict[str, Any]]) -> Check:
    """``plan-stable`` (module docstring).

    Per run attempt, every micro-batch's progress lists the same stateful operators as the batch
    that listed the most.

    Parameters
    ----------
    header : dict
        The trace header (unused: the events tell).
    events : list of dict
        The trace's own events (``spark.progress`` with ``state_operators``).

    Returns
    -------
    Check
    """
    name = "plan-stable"
    progress = [p for p in _of(events, "progress") if int(p.get("batch", -1)) >= 0]
    if not progress:
        return Check.not_applicable(name, "no progress report of a micro-batch was recorded")
    if not any("state_operators" in p for p in progress):
        return Check.not_applicable(name, "the trace does not record the stateful operators per micro-batch "
                                          "(recorded before the recorder kept them)")
    per: dict[tuple[int, int], tuple[Counter[str], dict[str, Any]]] = {}
    for p in progress:
        if "state_operators" not in p:
            continue
        key = (int(p.get("attempt", 0)), int(p["batch"]))
        ops = Counter(str(x) for x in p["state_operators"])
        if key not in per or sum(ops.values()) > sum(per[key][0].values()):  # an idle re-report repeats it
            per[key] = (ops, p)
    widest = max((ops for ops, _ in per.values()), key=lambda c: sum(c.values()))
    if not widest:
        return Check.not_applicable(name, f"no micro-batch of {len(per)} ran a stateful operator: a stateless "
                                          "query has no state to prune")
    for (attempt, batch), (ops, p) in sorted(per.items()):
        if ops != widest:
            fewer = sum(ops.values()) < sum(widest.values())
            return Check.violated(name, f"micro-batch {batch} (attempt {attempt}) lists the stateful operators "
                                        f"[{_describe(ops)}], other batches [{_describe(widest)}]"
                                  + (": a stateful operator was pruned from its plan, so its state was not read, "
                                     "updated or evicted in that batch" if fewer else ""),
                                  offending_seq=int(p["seq"]))
    return Check.held(name, f"{len(per)} micro-batch(es) each ran the same stateful operators "
                            f"[{_describe(widest)}]", examined=len(per))


def _key_of(row: dict[str, Any], key: Sequence[str]) -> str:
    return json.dumps([row.get(k) for k in key], sort_keys=True, default=str)


def complete_key_unique(header: dict[str, Any], events: Sequence[dict[str, Any]]) -> Check:
    """``complete-key-unique`` (module docstring): no complete-mode micro-batch's output repeats a KEY.

    Parameters
    ----------
    header : dict
        The trace header (``config.output_mode``, ``config.key``).
    events : list of dict
        The trace's own events (``spark.sink_written``: the rows handed to the sink per batch).

    Returns
    -------
    Check
    """
    name = "complete-key-unique"
    cfg = header.get("config") or {}
    if cfg.get("output_mode") != "complete":
        return Check.not_applicable(name, f"output mode {cfg.get('output_mode')!r}: only a complete-mode batch is "
                                          "the whole result table, one row per key")
    key = [str(k) for k in cfg.get("key") or []]
    if not key:
        return Check.not_applicable(name, "the module declares no KEY")
    written = _of(events, "sink_written")
    if not written:
        return Check.not_applicable(name, "no micro-batch output was recorded")
    for w in written:
        seen = Counter(_key_of(r, key) for r in w.get("rows") or [])
        dup = next((k for k, n in seen.items() if n > 1), None)
        if dup is not None:
            return Check.violated(name, f"micro-batch {w.get('batch')} (attempt {w.get('attempt')}) of complete mode "
                                        f"wrote KEY {dup} {seen[dup]} times: the result table has one row per key",
                                  offending_seq=int(w["seq"]))
    return Check.held(name, f"{len(written)} complete-mode batch output(s), each KEY {key} once",
                      examined=len(written))


def plan_plugins(header: dict[str, Any], source: str | None) -> list[TraceCheck]:
    """The two checks as trace plug-ins (each reads the trace's own events)."""
    return [EventListCheck("plan-stable", header, plan_stable, source),
            EventListCheck("complete-key-unique", header, complete_key_unique, source)]


# ----------------------------------------------------------------------------- mutants
def prune_state_operator(trace: Any) -> tuple[list[str], int]:
    """The engine pruned a stateful operator from one micro-batch's plan.

    The last batch whose progress lists one lists one fewer. Returns the tampered trace's lines and
    the offending ``seq``.
    """
    from rollcheck.spark_replay.tamper import to_lines

    events = copy.deepcopy(trace.events)
    hits = [k for k, e in enumerate(events)
            if base_kind(str(e.get("kind", ""))) == "progress" and e.get("state_operators")]
    if not hits:
        raise InvalidInputError("the trace has no micro-batch that ran a stateful operator")
    k = hits[-1]
    events[k]["state_operators"] = events[k]["state_operators"][1:]
    return to_lines(trace.header, events), k + 1


def repeat_complete_key(trace: Any) -> tuple[list[str], int]:
    """A complete-mode batch wrote one group twice (the first row again with another value).

    Returns the tampered trace's lines and the offending ``seq``.
    """
    from rollcheck.spark_replay.tamper import to_lines

    if (trace.header.get("config") or {}).get("output_mode") != "complete":
        raise InvalidInputError("the trace is not of a complete-mode query")
    events = copy.deepcopy(trace.events)
    hits = [k for k, e in enumerate(events) if base_kind(str(e.get("kind", ""))) == "sink_written" and e.get("rows")]
    if not hits:
        raise InvalidInputError("the trace has no batch output with rows")
    k = hits[-1]
    row = dict(events[k]["rows"][0])
    key = set((trace.header.get("config") or {}).get("key") or [])
    for c, v in row.items():
        if c not in key and isinstance(v, int | float) and not isinstance(v, bool):
            row[c] = v + 1
            break
    events[k]["rows"] = [*events[k]["rows"], row]
    return to_lines(trace.header, events), k + 1


PLAN_TAMPERS: dict[str, Callable[[Any], tuple[list[str], int]]] = {
    "prune-state-operator": prune_state_operator,
    "repeat-complete-key": repeat_complete_key,
}
#: The check that must find each tampered trace a violation.
CAUGHT_BY = {"prune-state-operator": "plan-stable", "repeat-complete-key": "complete-key-unique"}
