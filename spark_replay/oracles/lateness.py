"""Which input rows Spark's stateful operator drops as late, read from the analysed streaming plan.

The rule is Spark's own (pyspark 3.4 to 4.x, the same in each):

* ``IncrementalExecution`` gives every stateful operator two watermarks: the one for eviction is
  the batch's own (``offsetSeqMetadata.batchWatermarkMs``), the one for late events is the
  *previous* batch's (``prevOffsetSeqMetadata``, read from the offset log of batch ``b - 1``; 0
  for batch 0) while ``spark.sql.streaming.statefulOperator.allowMultiple`` is on (the default).
* ``WatermarkSupport`` drops an input row where the first attribute of the operator's input that
  carries event-time metadata is ``<= watermark``; for a window (a struct) it is the window's
  ``end`` (``GetStructField(_, 1)``).
* ``StateStoreSaveExec`` (a streaming aggregation) applies it in append and update mode, not in
  complete mode; the attribute is the grouping key that carries the metadata (a window, or the
  event-time column itself); with no such key nothing is dropped. A sliding-window row is expanded
  into its windows before, so it counts in exactly its windows whose end is above the watermark.
* ``StreamingDeduplicateExec`` and ``StreamingDeduplicateWithinWatermarkExec``: the event-time
  column of the input row.
* ``StreamingSymmetricHashJoinExec``: on each side separately, that side's event-time column
  (a side without one drops nothing).

Not modelled, so *not applicable* with the reason: session windows (rows are merged into
sessions before the filter), several stateful operators chained (each downstream operator
filters against the watermark propagated from its upstream operator's output), a union of
sources into one stateful operator, and arbitrary stateful operators (checked before this).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Operand", "LateRule", "plan_rule", "late_watermarks", "windows_of", "row_dropped", "event_time_us"]

_ATTR = re.compile(r"^([A-Za-z_][\w]*)#(\d+)(-T\d+ms)?$")
_AS = re.compile(r"\bAS ([^\s,\[\]#()]+)#(\d+)(-T\d+ms)?$")
_ALIAS = re.compile(r"(?<![\w.#])([A-Za-z_][\w]*)#(\d+)(?:-T\d+ms)? AS ([^\s,\]#]+)#(\d+)")
_WATERMARK = re.compile(r"EventTimeWatermark (?:[0-9a-f-]{36}, )?(.+?)#(\d+): \w+, (.+)$")
_FILE = re.compile(r"FileSource\[([^\]]*)\]")
_RELATIONS = ("StreamingRelation", "StreamingExecutionRelation", "StreamingRelationV2",
              "StreamingDataSourceV2Relation", "StreamingDataSourceV2ScanRelation")
_STATEFUL = ("Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "Join", "Distinct")


@dataclass
class Operand:
    """What Spark compares with the late-events watermark for rows of one source.

    The input column's value (``kind="value"``) or the end of each window it falls in (``"window"``,
    tumbling when ``slide_us == size_us``).
    """

    source: str
    column: str
    kind: str = "value"
    size_us: int = 0
    slide_us: int = 0
    offset_us: int = 0


@dataclass
class LateRule:
    """The lateness rule of one query: ``applicable`` False with ``reason`` when not modelled.

    ``operator`` names the stateful operator; ``operands`` per source (no entry: the source's rows
    are never dropped); ``not_in_complete``: an aggregation (complete mode drops nothing).
    """

    applicable: bool = True
    reason: str | None = None
    operator: str = "none"
    operands: dict[str, Operand] = field(default_factory=dict)
    not_in_complete: bool = False
    watermarked: dict[str, str] = field(default_factory=dict)


@dataclass
class _Node:
    text: str
    col: int
    children: list[_Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.text.lstrip("~").split(" ", 1)[0]


def _tree(plan: str) -> _Node | None:
    root: _Node | None = None
    stack: list[_Node] = []
    for line in plan.splitlines():
        if not line.strip():
            continue
        m = re.match(r"^([ :|+\-]*)", line)
        col = len(m.group(1)) if m else 0
        node = _Node(line[col:], col)
        while stack and stack[-1].col >= col:
            stack.pop()
        if stack:
            stack[-1].children.append(node)
        elif root is None:
            root = node
        else:
            break
        stack.append(node)
    return root


def _walk(n: _Node) -> list[_Node]:
    out = [n]
    for c in n.children:
        out.extend(_walk(c))
    return out


def _split(s: str) -> list[str]:
    """Top-level comma-separated items (parentheses and brackets nest)."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _bracket(text: str, start: int = 0) -> tuple[str, int]:
    """The content of the first ``[...]`` at or after ``start`` and the index after it."""
    i = text.find("[", start)
    if i < 0:
        return "", -1
    depth = 0
    for j in range(i, len(text)):
        depth += text[j] == "["
        depth -= text[j] == "]"
        if depth == 0:
            return text[i + 1:j], j + 1
    return text[i + 1:], len(text)


def _named(item: str) -> tuple[str, int, bool] | None:
    m = _ATTR.match(item.strip()) or _AS.search(item.strip())
    return (m.group(1), int(m.group(2)), bool(m.group(3))) if m else None


class _Plan:
    def __init__(self, plan: str, sources: Sequence[str]):
        self.text = plan
        self.root = _tree(plan)
        self.sources = list(sources)
        self.inputs: dict[int, tuple[str, str]] = {}
        self.alias: dict[int, int] = {}
        self.unmapped = False
        for m in _ALIAS.finditer(plan):
            self.alias[int(m.group(4))] = int(m.group(2))
        for n in _walk(self.root) if self.root else []:
            if n.name in _RELATIONS:
                src = self._source_of(n.text)
                for item in _split(_bracket(n.text, n.text.find("]") + 1 if "FileSource[" in n.text else 0)[0]):
                    a = _named(item)
                    if a and src is not None:
                        self.inputs[a[1]] = (src, a[0])

    def _source_of(self, text: str) -> str | None:
        if len(self.sources) == 1:
            return self.sources[0]
        m = _FILE.search(text)
        name = os.path.basename(m.group(1).rstrip("/")) if m else ""
        if name in self.sources:
            return name
        self.unmapped = True
        return None

    def trace(self, attr: int) -> tuple[str, str] | None:
        seen = 0
        while attr not in self.inputs and attr in self.alias and seen < 100:
            attr, seen = self.alias[attr], seen + 1
        return self.inputs.get(attr)

    def sources_under(self, n: _Node) -> set[str]:
        out: set[str] = set()
        for x in _walk(n):
            if x.name in _RELATIONS:
                s = self._source_of(x.text)
                if s is not None:
                    out.add(s)
        return out

    def streaming(self, n: _Node) -> bool:
        return any(x.name in _RELATIONS for x in _walk(n))

    def output(self, n: _Node) -> list[tuple[str, int, bool]]:
        """The node's output attributes ``(name, id, carries event-time metadata)``."""
        if n.name in ("Project", "Aggregate"):
            body, end = _bracket(n.text)
            if n.name == "Aggregate":
                body = _bracket(n.text, end)[0]
            return [a for a in (_named(x) for x in _split(body)) if a]
        if n.name == "Expand":
            _, end = _bracket(n.text)
            return [a for a in (_named(x) for x in _split(_bracket(n.text, end)[0])) if a]
        if n.name in _RELATIONS:
            return [(s, i, False) for i, (src, s) in self.inputs.items() if self._source_of(n.text) == src]
        if n.name == "EventTimeWatermark":
            m = _WATERMARK.search(n.text)
            got = self.output(n.children[0]) if n.children else []
            return [(a, i, t or (m is not None and i == int(m.group(2)))) for a, i, t in got]
        if n.name == "Join":
            return [a for c in n.children for a in self.output(c)]
        return self.output(n.children[0]) if n.children else []


def _window(p: _Plan, attr: int, name: str) -> Operand | str:
    """The window definition of attribute ``attr`` (Spark's ``TimeWindowing`` rewrite)."""
    line = next((n.text for n in _walk(p.root) if "named_struct(start" in n.text  # type: ignore[arg-type]
                 and re.search(rf"\b{re.escape(name)}#{attr}\b", n.text)), None)
    if line is None:
        return f"the definition of {name} is not in the plan"
    slide = re.search(r"% (\d+)\)", line)
    offset = re.search(r"- (\d+)\) % ", line)
    size = re.search(r"\+ (\d+)\), LongType, TimestampType\)", line)
    col = re.search(r"precisetimestampconversion\(([A-Za-z_]\w*)#(\d+)", line)
    if not (slide and offset and size and col):
        return f"the parameters of {name} could not be read from the plan"
    src = p.trace(int(col.group(2)))
    if src is None:
        return f"the window is on {col.group(1)}, a column computed from the input"
    return Operand(src[0], src[1], "window", int(size.group(1)), int(slide.group(1)), int(offset.group(1)))


def _first_marked(p: _Plan, n: _Node) -> tuple[str, int] | None:
    return next(((a, i) for a, i, t in p.output(n) if t), None)


def _operand_of(p: _Plan, n: _Node) -> Operand | str | None:
    """The operand of the single-input operator ``n`` (None: it drops nothing)."""
    if n.name == "Aggregate":
        keys = [a for a in (_named(x) for x in _split(_bracket(n.text)[0])) if a and a[2]]
        if not keys:
            return None
        name, attr, _ = keys[0]
        if name.startswith("session_window"):
            return ("session windows: Spark merges rows into sessions before it filters late ones "
                    "(SessionWindowStateStoreRestoreExec): not modelled")
        if p.trace(attr) is None:
            return _window(p, attr, name)
        src, col = p.trace(attr)  # type: ignore[misc]
        return Operand(src, col)
    return _side_operand(p, n.children[0]) if n.children else None


def plan_rule(plan: str, sources: Sequence[str]) -> LateRule:
    """The lateness rule the analysed streaming ``plan`` gives, for the query's ``sources``.

    Parameters
    ----------
    plan : str
        The analysed streaming plan's text.
    sources : Sequence of str
        The query's source names.

    Returns
    -------
    LateRule
        Per source, the operand whose late rows Spark drops (or why none can be told).

    Examples
    --------
    >>> p = '''~Deduplicate [user#2, ts#0-T10000ms]
    ... +- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds
    ...    +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>'''
    >>> r = plan_rule(p, ["input"])
    >>> r.operator, r.operands["input"].column
    ('Deduplicate', 'ts')
    """
    p = _Plan(plan, sources)
    rule = LateRule()
    if p.root is None:
        return rule
    if p.unmapped:
        return LateRule(False, "a streaming relation of the plan reads no folder named after a source")
    for n in _walk(p.root):
        m = _WATERMARK.search(n.text) if n.name == "EventTimeWatermark" else None
        if m:
            src = p.trace(int(m.group(2)))
            if src is None:
                return LateRule(False, f"the watermark is on {m.group(1)}, a column computed from the input (not an "
                                       "input column): the oracle cannot tell an input row's event time")
            if rule.watermarked.get(src[0], src[1]) != src[1]:
                return LateRule(False, f"two watermarks on source {src[0]} ({rule.watermarked[src[0]]}, {src[1]})")
            rule.watermarked[src[0]] = src[1]
    ops = [n for n in _walk(p.root) if n.name in _STATEFUL and p.streaming(n)
           and (n.name != "Join" or all(p.streaming(c) for c in n.children))]
    if not ops:
        return rule
    if len(ops) > 1:
        return LateRule(False, "several stateful operators chained (" + ", ".join(o.name for o in ops) + "): each "
                               "downstream one filters late rows against the watermark propagated from its upstream "
                               "operator's output (WatermarkPropagator): not modelled")
    op = ops[0]
    rule.operator = op.name
    if op.name == "Distinct":
        return LateRule(False, "a streaming Distinct: not modelled (use dropDuplicates)")
    rule.not_in_complete = op.name == "Aggregate"
    sides = op.children if op.name == "Join" else [op]
    for side in sides:
        under = p.sources_under(side)
        got = _operand_of(p, side) if op.name != "Join" else _side_operand(p, side)
        if isinstance(got, str):
            return LateRule(False, got)
        if got is None:
            continue
        if len(under) > 1:
            return LateRule(False, f"a union of sources ({', '.join(sorted(under))}) into one stateful operator: "
                                   "not modelled")
        old = rule.operands.get(got.source)
        if old is not None and old != got:
            return LateRule(False, f"source {got.source} reaches the operator twice with different event times")
        rule.operands[got.source] = got
    return rule


def _side_operand(p: _Plan, side: _Node) -> Operand | str | None:
    marked = _first_marked(p, side)
    if marked is None:
        return None
    src = p.trace(marked[1])
    if src is None:
        return f"the watermark is on {marked[0]}, a column computed from the input"
    return Operand(src[0], src[1])


def event_time_us(v: Any) -> int | None:
    """A value's event time in epoch microseconds (naive datetimes are UTC); None if not a time.

    >>> event_time_us(dt.datetime(1970, 1, 1, 0, 0, 2, 5))
    2000005
    """
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        d = v - dt.datetime(1970, 1, 1)
        return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(v, dt.date):
        return event_time_us(dt.datetime(v.year, v.month, v.day))
    return None


def windows_of(t_us: int, op: Operand) -> list[tuple[int, int]]:
    """The windows ``(start, end)`` (µs) an event time falls in, as Spark's ``window`` gives them.

    Parameters
    ----------
    t_us : int
        The event time (µs).
    op : Operand
        A ``window`` operand (size, slide and offset).

    Returns
    -------
    list of (int, int)
        The windows, newest first.

    Examples
    --------
    >>> windows_of(12_000_000, Operand("s", "ts", "window", 10_000_000, 5_000_000, 0))
    [(10000000, 20000000), (5000000, 15000000)]
    """
    last = t_us - (t_us - op.offset_us) % op.slide_us
    out = []
    start = last
    while start > t_us - op.size_us:
        out.append((start, start + op.size_us))
        start -= op.slide_us
    return out


def late_watermarks(n_batches: int, watermarks: dict[int, int]) -> tuple[dict[int, int], list[int]]:
    """The late-events watermark (ms) per batch: the previous batch's watermark, 0 for batch 0.

    And the batches whose previous watermark is unknown.

    Parameters
    ----------
    n_batches : int
        The number of batches.
    watermarks : dict
        Batch -> the watermark (ms) in force after it.

    Returns
    -------
    tuple of (dict, list of int)
        Batch -> late-events watermark; the batches left out.

    Examples
    --------
    >>> late_watermarks(3, {0: 0, 1: 5000})
    ({0: 0, 1: 0, 2: 5000}, [])
    """
    out: dict[int, int] = {}
    missing: list[int] = []
    for b in range(n_batches):
        if b == 0:
            out[b] = 0
        elif (b - 1) in watermarks and watermarks[b - 1] is not None:
            out[b] = int(watermarks[b - 1])
        else:
            missing.append(b)
    return out, missing


def row_dropped(value: Any, op: Operand, late_ms: int) -> bool | None:
    """Whether Spark drops a row as late: True, False, or None for a sliding-window row.

    The row's operand column holds ``value``, judged against the late-events watermark
    ``late_ms``; None for a sliding-window row that counts in some of its windows only. A null
    or non-time value is never dropped (the predicate is null).

    Parameters
    ----------
    value : Any
        The row's operand column.
    op : Operand
        The operand (a time column or a window).
    late_ms : int
        The late-events watermark (ms).

    Returns
    -------
    bool or None
        True dropped, False kept, None counted in some windows only.

    Examples
    --------
    >>> w = Operand("s", "ts", "window", 10_000_000, 10_000_000, 0)
    >>> row_dropped(dt.datetime(1970, 1, 1, 0, 0, 12), w, 20000), row_dropped(dt.datetime(1970, 1, 1, 0, 0, 12), w, 19999)
    (True, False)
    """
    t = event_time_us(value)
    if t is None:
        return False
    bound = late_ms * 1000
    if op.kind == "value":
        return t <= bound
    ends = [e for _, e in windows_of(t, op)]
    dropped = [e <= bound for e in ends]
    return True if all(dropped) else False if not any(dropped) else None
