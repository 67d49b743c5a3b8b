"""Dataflow descriptions (``rollcheck.dataflow/1``): what a user writes about a running dataflow.

A description lists the processors and their time domains, the inputs read from outside, every
message sent on every edge, the logged edges, each processor's checkpoints and the failed
processors. :func:`description_from_dict` validates it (an impossible description is rejected
naming the JSON path); :func:`span_system` expands it into the span system of the failure
(``rollcheck.spans/1``); :func:`analyse` solves it and says what every processor must discard,
re-read and replay, and the low watermark with the inputs it acknowledges and the outputs it
releases. The expansion rules: docs/internals/pyimpl-spans.md#description.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1 (logical times, loops), §3.2 (transformers), §3.3 (T_D, T_M, when a checkpoint
   joins the chain), §3.4 (selective spans), §4.1 (recovery), §4.3 (garbage collection,
   acknowledging inputs, releasing outputs).

Definitions: ``specs/spans.md#dataflow``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.errors import InternalError, InvalidInputError
from rollcheck.pyimpl.spans.dataflow_values import Time
from rollcheck.pyimpl.spans.dataflow_values import cmp_key as _cmp_key
from rollcheck.pyimpl.spans.dataflow_values import epoch_of as _epoch
from rollcheck.pyimpl.spans.dataflow_values import json_array as _array
from rollcheck.pyimpl.spans.dataflow_values import json_object as _obj
from rollcheck.pyimpl.spans.dataflow_values import parse_time as _time
from rollcheck.pyimpl.spans.dataflow_values import time_json as _to_json
from rollcheck.pyimpl.spans.fixpoint import solve_levels
from rollcheck.pyimpl.spans.system import (
    TOP,
    EdgeSpec,
    ProcessorSpec,
    SpanSystem,
    system_to_dict,
    validate_schema,
)
from rollcheck.pyimpl.spans.watermark import low_watermark

__all__ = ["FORMAT", "MAX_LOOPS", "Checkpoint", "Proc", "Message", "Channel", "Description",
           "description_from_dict", "span_system", "Expanded", "Analysis", "analyse"]

FORMAT = "rollcheck.dataflow/1"
MAX_LOOPS = 16



#: An ``every k`` policy may stand for at most this many checkpoints (work grows with it).
MAX_POLICY_CHECKPOINTS = 100_000

@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint span: every time ``<= upto`` (lexicographic), or the explicit ``times``."""

    where: str  # its JSON path, e.g. "processors.agg.checkpoints[1]"
    upto: Time | None = None
    times: frozenset | None = None

    def contains(self, t: Time) -> bool:
        """Whether time ``t`` is in the checkpoint's span."""
        if self.times is not None:
            return t in self.times
        return _cmp_key(t) <= _cmp_key(self.upto)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Message:
    """A message on a channel of the description.

    Attributes
    ----------
    at : Time
        The time of the sending event at the source.
    time : Time
        The time of the message at the destination.
    """

    at: Time    # time of the sending event at the source
    time: Time  # time of the message at the destination


@dataclass
class Channel:
    """A channel of the description: its ends, whether it is logged, what was sent and delivered.

    ``delivered`` counts the prefix of ``sent`` the destination has processed; ``where`` is the JSON
    path, for messages.
    """

    name: str
    src: str
    dst: str
    logged: bool
    sent: list[Message]
    delivered: int
    where: str


@dataclass
class Proc:
    """A processor of the description: its loops, inputs, checkpoints and checkpoint policy.

    ``events`` (the times of its events) is filled by validation.
    """

    name: str
    loops: int
    inputs: list[Time]
    checkpoints: list[Checkpoint]
    policy_every: int | None = None
    events: set = field(default_factory=set)  # times of its events (filled by validation)


@dataclass
class Description:
    """A validated ``rollcheck.dataflow/1`` document."""

    procs: dict[str, Proc]
    edges: list[Channel]
    failed: set[str]




def description_from_dict(doc: Any, *, source: str | None = None) -> Description:
    """Validate a ``rollcheck.dataflow/1`` document.

    Raises
    ------
    InvalidInputError
        Naming the JSON path (``edges[1].sent[3][0]``) and the reason, for malformed documents
        and for impossible ones: a message sent at a time its source has no event at, more
        messages delivered than sent, a checkpoint that holds a time still in flight to its
        processor, checkpoints that do not grow, an unknown failed processor.

    Examples
    --------
    >>> d = description_from_dict({"format": "rollcheck.dataflow/1",
    ...     "processors": {"src": {"inputs": [0, 1], "checkpoints": [0]}, "out": {}},
    ...     "edges": [{"name": "e", "src": "src", "dst": "out", "sent": [[0, 0], [1, 1]]}],
    ...     "failed": ["src"]})
    >>> sorted(d.procs["out"].events)
    [0, 1]
    """
    try:
        d = _description(doc)
        validate_schema(doc, "dataflow")  # anything the checks above let through
        return d
    except InvalidInputError as e:
        raise (e.with_source(source) if source else e) from None


def _description(doc: Any) -> Description:
    _obj(doc, "$", {"format", "processors", "edges", "failed", "comment"}, ("processors",))
    if doc.get("format") != FORMAT:
        raise InvalidInputError(f"format must be {FORMAT!r}, got {doc.get('format')!r}"[:200], location="format")
    pdoc = doc["processors"]
    if type(pdoc) is not dict or not pdoc:
        raise InvalidInputError("processors must be a non-empty object", location="processors")
    procs: dict[str, Proc] = {}
    for name, pd in pdoc.items():
        loc = f"processors.{name}"
        _obj(pd, loc, {"loops", "inputs", "checkpoints", "comment"})
        loops = pd.get("loops", 0)
        if type(loops) is not int or not 0 <= loops <= MAX_LOOPS:
            raise InvalidInputError(f"loops must be an integer 0..{MAX_LOOPS}", location=f"{loc}.loops")
        inputs = [_time(v, loops, f"{loc}.inputs[{i}]", "an input time")
                  for i, v in enumerate(_array(pd.get("inputs", []), f"{loc}.inputs"))]
        cps: list[Checkpoint] = []
        every = None
        cdoc = pd.get("checkpoints", [])
        if type(cdoc) is dict:
            _obj(cdoc, f"{loc}.checkpoints", {"every"}, ("every",))
            every = cdoc["every"]
            if type(every) is not int or every < 1:
                raise InvalidInputError("every must be an integer >= 1", location=f"{loc}.checkpoints.every")
        else:
            for k, c in enumerate(_array(cdoc, f"{loc}.checkpoints")):
                cl = f"{loc}.checkpoints[{k}]"
                if type(c) is dict:
                    _obj(c, cl, {"upto", "times"})
                    if ("upto" in c) == ("times" in c):
                        raise InvalidInputError("a checkpoint object has exactly one of 'upto' and 'times'",
                                                location=cl)
                    if "times" in c:
                        ts = frozenset(_time(v, loops, f"{cl}.times[{i}]", "a time")
                                       for i, v in enumerate(_array(c["times"], f"{cl}.times")))
                        cps.append(Checkpoint(cl, times=ts))
                        continue
                    c = c["upto"]
                    cl += ".upto"
                cps.append(Checkpoint(f"{loc}.checkpoints[{k}]", upto=_time(c, loops, cl, "a checkpoint")))
        procs[name] = Proc(name, loops, inputs, cps, every, set(inputs))
    edges: list[Channel] = []
    names: set[str] = set()
    for j, ed in enumerate(_array(doc.get("edges", []), "edges")):
        loc = f"edges[{j}]"
        _obj(ed, loc, {"name", "src", "dst", "logged", "sent", "delivered", "comment"}, ("src", "dst"))
        name = ed.get("name", f"e{j}")
        if type(name) is not str:
            raise InvalidInputError("edge name must be a string", location=f"{loc}.name")
        if name in names:
            raise InvalidInputError(f"duplicate edge name {name!r}", location=f"{loc}.name")
        names.add(name)
        for f in ("src", "dst"):
            if type(ed[f]) is not str or ed[f] not in procs:
                raise InvalidInputError(f"edge {name}: unknown processor {json.dumps(ed[f])[:60]}",
                                        location=f"{loc}.{f}")
        ps, pq = procs[ed["src"]], procs[ed["dst"]]
        logged = ed.get("logged", False)
        if type(logged) is not bool:
            raise InvalidInputError("logged must be true or false", location=f"{loc}.logged")
        sent = []
        for i, m in enumerate(_array(ed.get("sent", []), f"{loc}.sent")):
            ml = f"{loc}.sent[{i}]"
            if type(m) is not list or len(m) != 2:
                raise InvalidInputError("a message is [time of the sending event, time of the message]",
                                        location=ml)
            sent.append(Message(_time(m[0], ps.loops, f"{ml}[0]", f"the sending time (at {ps.name})"),
                                _time(m[1], pq.loops, f"{ml}[1]", f"the message time (at {pq.name})")))
        dl = ed.get("delivered", len(sent))
        if type(dl) is not int or not 0 <= dl <= len(sent):
            raise InvalidInputError(f"delivered must be an integer 0..{len(sent)} (the messages sent)",
                                    location=f"{loc}.delivered")
        edges.append(Channel(name, ps.name, pq.name, logged, sent, dl, loc))
    for ch in edges:  # events of the destination: the delivered prefix
        procs[ch.dst].events.update(m.time for m in ch.sent[: ch.delivered])
    for ch in edges:
        ev = procs[ch.src].events
        for i, m in enumerate(ch.sent):
            if m.at not in ev:
                raise InvalidInputError(
                    f"edge {ch.name}: {ch.src} sent a message at time {json.dumps(_to_json(m.at))} but has no "
                    "event at that time (no input read and no message processed at it)",
                    location=f"{ch.where}.sent[{i}][0]")
    failed_doc = _array(doc.get("failed", []), "failed")
    failed: set[str] = set()
    for i, f in enumerate(failed_doc):
        if type(f) is not str or f not in procs:
            raise InvalidInputError(f"unknown processor {json.dumps(f)[:60]}", location=f"failed[{i}]")
        if f in failed:
            raise InvalidInputError(f"processor {f} is listed twice", location=f"failed[{i}]")
        failed.add(f)
    inflight: dict[str, list[tuple[Time, str]]] = {p: [] for p in procs}
    for ch in edges:
        for i in range(ch.delivered, len(ch.sent)):
            inflight[ch.dst].append((ch.sent[i].time, f"{ch.where}.sent[{i}]"))
    for p in procs.values():
        if p.policy_every is not None:
            p.checkpoints = _policy(p, inflight[p.name])
        _check_chain(p, inflight[p.name])
    return Description(procs, edges, failed)


def _policy(p: Proc, inflight: list[tuple[Time, str]]) -> list[Checkpoint]:
    """``every k``: the checkpoints up to epoch E for E = k-1, 2k-1, ... that ``p`` has taken.

    One is taken once p processed a later epoch and no message of an epoch <= E is still in flight
    to p (epochs in order).
    """
    if not p.events:
        return []
    k = p.policy_every
    assert k is not None
    last = max(_epoch(t) for t in p.events) - 1
    if inflight:
        last = min(last, min(_epoch(t) for t, _ in inflight) - 1)
    epochs = range(k - 1, last + 1, k)
    if len(epochs) > MAX_POLICY_CHECKPOINTS:
        raise InvalidInputError(f"every {k} epochs up to epoch {last} is {len(epochs)} checkpoints "
                                f"(more than {MAX_POLICY_CHECKPOINTS}): give the checkpoints explicitly",
                                location=f"processors.{p.name}.checkpoints")
    out = []
    for e in epochs:
        upto = e if p.loops == 0 else (e, *([1 << 62] * p.loops))
        out.append(Checkpoint(f"processors.{p.name}.checkpoints (every {k}: epoch {e})", upto=upto))
    return out


def _check_chain(p: Proc, inflight: list[tuple[Time, str]]) -> None:
    prev: Checkpoint | None = None
    universe = p.events | {t for t, _ in inflight}
    for c in p.checkpoints:
        for t, where in inflight:
            if c.contains(t):
                raise InvalidInputError(
                    f"processor {p.name}: the checkpoint holds time {json.dumps(_to_json(t))}, but the message at "
                    f"that time ({where}) has not been processed by {p.name}: a checkpoint covers only complete "
                    "times", location=c.where)
        if prev is not None:
            if c.upto is not None and prev.upto is not None:
                if _cmp_key(c.upto) <= _cmp_key(prev.upto):
                    raise InvalidInputError(f"processor {p.name}: checkpoints must grow (upto must increase)",
                                            location=c.where)
            else:
                lost = sorted((t for t in universe if prev.contains(t) and not c.contains(t)), key=_cmp_key)
                if lost:
                    raise InvalidInputError(
                        f"processor {p.name}: the checkpoint misses time {json.dumps(_to_json(lost[0]))} of the "
                        "one before (checkpoints must grow)", location=c.where)
        prev = c


@dataclass
class Expanded:
    """The span system of a description, with the checkpoint behind every chain index."""

    system: SpanSystem
    chain_of: dict[str, list[Checkpoint | None]]  # chain index -> checkpoint (None: c_0)
    pending: dict[str, list[str]]                  # checkpoints not yet restorable


def span_system(d: Description) -> Expanded:
    """Expand a description into the span system of its failure (see the module docstring).

    Examples
    --------
    >>> d = description_from_dict({"format": "rollcheck.dataflow/1",
    ...     "processors": {"src": {"inputs": [0, 1], "checkpoints": [0]}, "out": {}},
    ...     "edges": [{"name": "e", "src": "src", "dst": "out", "sent": [[0, 0], [1, 1]]}],
    ...     "failed": ["src"]})
    >>> x = span_system(d)
    >>> [sorted(c) for c in x.system.proc("src").chain], x.system.proc("src").top
    ([[], [0]], None)
    """
    universe: dict[str, set] = {p: set(pr.events) for p, pr in d.procs.items()}
    for ch in d.edges:
        universe[ch.dst].update(m.time for m in ch.sent)
    procs: list[ProcessorSpec] = []
    chain_of: dict[str, list[Checkpoint | None]] = {}
    pending: dict[str, list[str]] = {}
    sets: dict[str, list[frozenset]] = {}
    for name, p in d.procs.items():
        u = universe[name]
        chain: list[frozenset] = [frozenset()]
        cps: list[Checkpoint | None] = [None]
        for c in p.checkpoints:
            fs = frozenset(t for t in u if c.contains(t))
            if not _restorable(d, name, fs):
                pending.setdefault(name, []).append(c.where)
                continue
            if fs == chain[-1]:
                if cps[-1] is not None:
                    cps[-1] = c
                continue
            chain.append(fs)
            cps.append(c)
        top = None if name in d.failed else chain[-1] | frozenset(p.events)
        procs.append(ProcessorSpec(name, tuple(chain), top))
        chain_of[name] = cps
        sets[name] = chain + ([top] if top is not None else [])
    edges = []
    for ch in d.edges:
        spans_src = sets[ch.src]
        k = len(procs[_index(d, ch.src)].chain)
        times = frozenset(m.time for m in ch.sent)

        def disc(s: frozenset, ch: Channel = ch) -> frozenset:
            return frozenset() if ch.logged else frozenset(m.time for m in ch.sent if m.at in s)

        def phi(s: frozenset, ch: Channel = ch, times: frozenset = times) -> frozenset:
            return times - {m.time for m in ch.sent if m.at not in s}

        live = ch.src not in d.failed
        edges.append(EdgeSpec(ch.name, ch.src, ch.dst, tuple(disc(spans_src[i]) for i in range(k)),
                              disc(spans_src[k]) if live else None,
                              frozenset(m.time for m in ch.sent[: ch.delivered]),
                              tuple(phi(spans_src[i]) for i in range(k))))
    return Expanded(SpanSystem(tuple(procs), tuple(edges)), chain_of, pending)


def _index(d: Description, name: str) -> int:
    return list(d.procs).index(name)


def _restorable(d: Description, p: str, span: frozenset) -> bool:
    for ch in d.edges:
        if ch.src == p and not ch.logged:
            if any(m.at in span for m in ch.sent[ch.delivered:]):
                return False
    return True


@dataclass
class Analysis:
    """The answer for a description: spans, per-processor recovery work, the watermark."""

    system_doc: dict[str, Any]
    spans: dict[str, int | str]
    processors: dict[str, dict[str, Any]]
    watermark: dict[str, int]
    acknowledge: dict[str, list[Any]]
    release: dict[str, list[Any]]
    examinations: int
    decreases: int

    def to_json(self) -> dict[str, Any]:
        """The analysis as the JSON object ``rollcheck spans`` writes for a description."""
        return {"spans": self.spans, "processors": self.processors, "watermark": self.watermark,
                "acknowledge": self.acknowledge, "release": self.release}


def _sorted_json(ts: Any) -> list[Any]:
    return [_to_json(t) for t in sorted(set(ts), key=_cmp_key)]


def analyse(d: Description, order: str = "fifo", seed: int = 0) -> Analysis:
    """Solve a description: spans, what to discard / re-read / replay, the watermark.

    For every processor: ``restore`` (``"top"``: it continues; ``"start"``: the empty span; or the
    JSON path of the checkpoint), ``discard`` (times of the processed events it undoes), ``reread``
    (input times it reads again), ``replay`` (per in-edge, the times of the logged messages
    delivered again from the log), ``resume_epoch`` (the least epoch not wholly in its span).
    The watermark acknowledges the inputs and releases the outputs (events of processors without
    out-edges) in its spans (§4.3).

    Parameters
    ----------
    order, seed
        As for :func:`~rollcheck.pyimpl.spans.fixpoint.solve_levels`.

    Examples
    --------
    >>> d = description_from_dict({"format": "rollcheck.dataflow/1",
    ...     "processors": {"src": {"inputs": [0, 1], "checkpoints": [0]}, "out": {"checkpoints": [0]}},
    ...     "edges": [{"name": "e", "src": "src", "dst": "out", "sent": [[0, 0], [1, 1]]}],
    ...     "failed": ["src"]})
    >>> a = analyse(d)
    >>> a.spans, a.processors["out"]["discard"], a.processors["src"]["reread"]
    ({'src': 1, 'out': 1}, [1], [1])
    """
    x = span_system(d)
    s = x.system
    r = solve_levels(s, order, seed)
    levels = {p.name: r.levels[i] for i, p in enumerate(s.processors)}
    spans = s.labels(levels)
    kept = {p.name: p.span(levels[p.name]) for p in s.processors}
    at_top = {p.name: p.is_top(levels[p.name]) for p in s.processors}
    out: dict[str, dict[str, Any]] = {}
    for p in s.processors:
        pr = d.procs[p.name]
        span = kept[p.name]
        lvl = levels[p.name]
        if at_top[p.name]:
            restore = TOP
        elif lvl == 0:
            restore = "start"
        else:
            c = x.chain_of[p.name][lvl]
            assert c is not None
            restore = c.where
        info: dict[str, Any] = {"restore": restore, "discard": [], "reread": [], "replay": {}}
        if not at_top[p.name]:
            info["discard"] = _sorted_json(t for t in pr.events if t not in span)
            info["reread"] = _sorted_json(t for t in pr.inputs if t not in span)
            outside = [_epoch(t) for t in set(pr.events) | {m.time for ch in d.edges if ch.dst == p.name
                                                              for m in ch.sent} if t not in span]
            info["resume_epoch"] = min(outside) if outside else None
        if x.pending.get(p.name):
            info["pending"] = x.pending[p.name]
        out[p.name] = info
    for ch in d.edges:
        if at_top[ch.src] and at_top[ch.dst]:
            continue
        redo: list[Any] = []
        lost: list[Any] = []
        for i, m in enumerate(ch.sent):
            if m.at not in kept[ch.src]:
                continue  # re-sent by re-executing the sending event
            if i < ch.delivered and m.time in kept[ch.dst]:
                continue  # the restored receiver has processed it
            (redo if ch.logged else lost).append(m.time)
        if lost:
            raise InternalError(f"edge {ch.name}: unlogged message(s) at {lost[:3]} would be lost by the spans")
        if redo:
            out[ch.dst]["replay"][ch.name] = _sorted_json(redo) if len(set(redo)) == len(redo) else \
                [_to_json(t) for t in sorted(redo, key=_cmp_key)]
    wm = low_watermark(s)
    ack: dict[str, list[Any]] = {}
    rel: dict[str, list[Any]] = {}
    has_out = {ch.src for ch in d.edges}
    for p in s.processors:
        wspan = p.chain[wm[p.name]]
        pr = d.procs[p.name]
        if pr.inputs:
            ack[p.name] = _sorted_json(t for t in pr.inputs if t in wspan)
        if p.name not in has_out and pr.events:
            rel[p.name] = _sorted_json(t for t in pr.events if t in wspan)
    return Analysis(system_to_dict(s), spans, out, wm, ack, rel, r.examinations, r.decreases)
