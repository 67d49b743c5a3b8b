"""The operator kinds of a Flink hunt spec, in plan order, and their chained pairs (coverage keys).

Examples
--------
>>> operators({"form": "ds", "combine": "union", "stages": [], "terminal": "keyed-sum"})
('source', 'watermark', 'union', 'keyed-sum')
"""

from __future__ import annotations

from typing import Any

__all__ = ["operators", "pairs"]


def _sql_operators(spec: dict[str, Any]) -> list[str]:
    ops = ["sql-changelog-source" if spec.get("changelog") else "sql-source"]
    settings = spec.get("settings") or {}
    ops += [s for s, on in (("sql-minibatch", settings.get("minibatch")), ("sql-two-phase", settings.get("two_phase")),
                            ("sql-distinct-split", settings.get("distinct_split"))) if on]
    if spec["combine"] != "none":
        ops.append(spec["combine"])
    if spec.get("where"):
        ops.append("sql-where")
    ops.append(spec["main"])
    if spec["main"] in ("sql-group-by", "sql-global-agg", "tvf-tumble", "tvf-hop", "tvf-cumulate"):
        ops += list(spec["aggs"])
    if spec.get("post"):
        ops.append(spec["post"])
    ops.append("final-table")
    return ops


def _ds_operators(spec: dict[str, Any]) -> list[str]:
    ops = ["source", "watermark"]
    if spec.get("prefilter") is not None:
        ops.append("filter")
    if spec.get("rekey"):
        ops.append("map-literal-key")
    if spec["combine"] != "none":
        ops.append(spec["combine"])
    for s in spec["stages"]:
        if s["kind"] == "timers":
            ops.append("process-timers")
        else:
            ops += [f"window-{s['assigner']}", f"win-{s['fn']}"]
    if spec.get("terminal"):
        ops.append(spec["terminal"])
    return ops


def operators(spec: dict[str, Any]) -> tuple[str, ...]:
    """The operator kinds of ``spec`` in plan order.

    >>> operators({"form": "ds", "combine": "none", "stages": [{"kind": "timers"}], "terminal": "keyed-sum"})
    ('source', 'watermark', 'process-timers', 'keyed-sum')
    """
    return tuple(_sql_operators(spec) if spec["form"] == "sql" else _ds_operators(spec))


def pairs(ops: tuple[str, ...]) -> tuple[str, ...]:
    """Chained operator pairs ``"parent>child"`` of a plan (each once, in order).

    >>> pairs(("source", "watermark", "window-tumbling"))
    ('source>watermark', 'watermark>window-tumbling')
    """
    return tuple(dict.fromkeys(f"{a}>{b}" for a, b in zip(ops, ops[1:], strict=False)))
