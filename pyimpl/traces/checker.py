"""One pass over an engine's trace: validate the core vocabulary and run the generic checks.

The checker consumes the events of a ``rollcheck.trace/1`` file in order and keeps only the
*effective execution* — the events that the recoveries so far have left standing — as compact
pattern events (process index, kind, message id), never the JSON objects. At every ``recovery``
the effective execution up to that point is a :class:`~rollcheck.pyimpl.pattern.Pattern`: the
restored line is compared with :func:`~rollcheck.pyimpl.recovery.recovery_line` on it, then every
rolled-back process loses its events after its restored checkpoint (deliveries become messages in
transit, sends are undone and may be sent again under the same id, outputs are withdrawn).

Checks (``specs/formats.md#trace-checks``):

``pattern-valid``
    the effective execution is a valid pattern at every point: no message is delivered after its
    send was undone (an orphan that survived a recovery); every other structural defect is bad
    input (exit 2).
``forced-checkpoints`` (with a protocol)
    the protocol (any :class:`~rollcheck.pyimpl.protocols.Protocol`, driven through its transition
    functions alongside the trace) forces a checkpoint immediately before exactly the deliveries
    that the trace shows preceded by a ``forced`` checkpoint; a rolled-back process resumes in the
    protocol state of its restored checkpoint (recomputed at each recovery by re-running the
    transition functions over the effective execution). The first difference is the offending
    ``seq``.
``no-useless-checkpoints`` (when the protocol claims ``zcycle_free``)
    :func:`~rollcheck.pyimpl.zpaths.useless_checkpoints` finds no checkpoint on a Z-cycle, in the
    execution before each recovery and in the final effective execution.
``recovery-line``
    at each recovery: no failed process keeps its volatile state; the restored line has no orphan
    (otherwise *too little rollback*, the orphan named); it equals the recovery line for the failed
    processes (otherwise *too much rollback*, the process named); the event's ``in_transit`` equals
    the channel state of the restored line (:func:`~rollcheck.pyimpl.consistency.in_transit`).
``log-replay``
    after a recovery, the deliveries marked ``replayed`` are exactly the in-transit messages of the
    restored line, each once (a message replayed twice, not replayed by the ``end``, replayed
    without being in transit, or delivered without ``replayed`` is named).
``outputs-exactly-once`` (with a reference)
    at the ``end``, the multiset of outputs of the effective execution (outputs of rolled-back work
    removed) equals the reference; a duplicate, an unexpected and a missing output are named.
``checkpoint-indices`` (when the trace gives ``index`` fields)
    they follow the numbering: 1, 2, … per process, continuing from the restored checkpoint after a
    recovery (a checkpoint missing from the recording shows here too).

Several failures and recoveries are supported; each recovery is checked against the effective
execution up to it. Checking is linear in the trace plus one pattern analysis per recovery.

References
----------
FERDiS paper §4 (consistent global states), §5.3 (CIC protocols), §6.1 (recovery lines),
§7.2.5–7.2.8 (message logs and replay).
"""

from __future__ import annotations

import difflib
import json
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.errors import InternalError, InvalidInputError, RollcheckError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
from rollcheck.pyimpl.traces.reader import trace_error
from rollcheck.pyimpl.traces.report import CheckResult, TraceReport

__all__ = ["CORE_KINDS", "Segment", "TraceChecker", "load_reference", "reference_from_list"]

CORE_KINDS = ("send", "deliver", "checkpoint", "failure", "recovery", "output", "end")
# other engines' words for the core kinds (only used to suggest the right one in an error)
_SYNONYMS = {"recv": "deliver", "receive": "deliver", "delivery": "deliver", "ckpt": "checkpoint",
             "snapshot": "checkpoint", "crash": "failure", "fail": "failure", "restart": "recovery",
             "restore": "recovery", "emit": "output", "sink": "output"}


@dataclass
class Segment:
    """An execution handed to further validators (TLC): a pattern and the seq of each event.

    ``label`` says which part of the trace it is; ``given`` holds the positions of checkpoints
    that a recovery restored (a restored forced checkpoint is a given one afterwards: the delivery
    it preceded was undone).
    """

    label: str
    pattern: Pattern
    seqs: list[int]
    given: set[int] = field(default_factory=set)


def _canon(process: str, key: Any, value: Any) -> str:
    return json.dumps([process, key, value], sort_keys=True, separators=(",", ":"))


def reference_from_list(doc: Any, processes: Sequence[str] | None = None, source: str | None = None) -> Counter[str]:
    """The multiset of reference outputs from a JSON list of ``{"process", "key", "value"}``.

    Examples
    --------
    >>> ref = reference_from_list([{"process": "a", "key": "k", "value": 1}])
    >>> sum(ref.values())
    1
    """
    if not isinstance(doc, list):
        raise InvalidInputError("expected a JSON list of {\"process\", \"key\", \"value\"} objects",
                                source=source)
    out: Counter[str] = Counter()
    for k, item in enumerate(doc):
        if not isinstance(item, dict) or not {"process", "key", "value"} <= set(item):
            raise InvalidInputError("expected an object with \"process\", \"key\" and \"value\"",
                                    source=source, location=f"[{k}]")
        if not isinstance(item["process"], str) or (processes is not None and item["process"] not in processes):
            raise InvalidInputError(f"process: unknown process {item['process']!r}", source=source,
                                    location=f"[{k}]")
        out[_canon(item["process"], item["key"], item["value"])] += 1
    return out


def load_reference(path: str) -> Any:
    """Read a reference-outputs file (a JSON list); validation happens against the trace's processes."""
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except OSError as e:
        raise InvalidInputError(f"cannot read: {e.strerror}", source=str(path)) from None
    except ValueError as e:
        raise InvalidInputError(f"not valid JSON ({getattr(e, 'msg', e)})", source=str(path)) from None


def _describe(canon: str) -> str:
    p, k, v = json.loads(canon)
    return f"{p} key={json.dumps(k)} value={json.dumps(v)}"


class TraceChecker:
    """Check the events of one trace in a single pass (module docstring).

    Parameters
    ----------
    header : dict
        The header line (``processes`` required; ``source`` names the engine's extension prefix).
    source : str, optional
        The file name, for error messages.
    protocol : Protocol, optional
        The protocol to check forced checkpoints against (already resolved).
    reference : Counter, optional
        Reference outputs (:func:`reference_from_list`).
    virtual : bool
        Survivors may keep their volatile state (virtual checkpoints); with False the expected
        line restores a real checkpoint everywhere.
    keep_segments : bool
        Keep the pattern before each recovery and the final one as :class:`Segment` objects.
    keep_first : bool
        Keep the pattern of the run before the first failure (``rollcheck trace to-pattern``).
    segment_limit : int, optional
        Keep segments only while the trace has at most this many events (TLC's automatic mode).

    Examples
    --------
    >>> hdr = {"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"]}
    >>> evs = [{"seq": 1, "kind": "send", "process": "a", "message": "m", "to": "b"},
    ...        {"seq": 2, "kind": "deliver", "process": "b", "message": "m"},
    ...        {"seq": 3, "kind": "output", "process": "b", "key": "k", "value": 1},
    ...        {"seq": 4, "kind": "end"}]
    >>> ref = reference_from_list([{"process": "b", "key": "k", "value": 1}])
    >>> r = TraceChecker(hdr, reference=ref).run((k + 2, e) for k, e in enumerate(evs)).finish()
    >>> r.conformant, [c.name for c in r.checks]
    (True, ['pattern-valid', 'outputs-exactly-once'])
    """

    def __init__(self, header: dict[str, Any], source: str | None = None, *, protocol: Any = None,
                 reference: Counter[str] | None = None, virtual: bool = True,
                 keep_segments: bool = False, keep_first: bool = False,
                 segment_limit: int | None = None):
        self.source = source
        names = header.get("processes")
        if (not isinstance(names, list) or not names
                or not all(isinstance(x, str) and x for x in names) or len(set(names)) != len(names)):
            raise InvalidInputError("processes: expected a non-empty list of distinct process names "
                                    f"(the engine-neutral header), got {names!r}",
                                    source=source, location="line 1")
        src = header.get("source", "")
        if src is not None and not isinstance(src, str):
            raise InvalidInputError(f"source: expected a string, got {src!r}", source=source, location="line 1")
        self.engine = src or ""
        self.prefix = f"{src}." if src else None
        self.names: tuple[str, ...] = tuple(names)
        self.pos = {x: k for k, x in enumerate(names)}
        n = len(names)
        self.n = n
        self.protocol = protocol
        self.reference = reference
        self.virtual = virtual
        self.keep_segments = keep_segments
        self.segment_limit = segment_limit
        self.keep_first = keep_first
        # effective execution
        self.evs: list[Event] = []
        self.seqs = array("q")
        self.count = [0] * n
        # message id -> (sender * n + receiver) * 2 + delivered: one small int per message standing
        self.msgs: dict[str, int] = {}
        self.undone: dict[str, int] = {}
        self.outputs: list[tuple[int, int, str, int]] = []
        self.n_outputs = 0
        # protocol driver
        self.pend = [0] * n  # seq of a forced checkpoint not yet followed by its delivery
        if protocol is not None:
            self.st = [protocol.initial(i, n) for i in range(n)]
        else:
            self.st = []
        self.pbs: dict[str, Any] = {}
        # failures and recoveries
        self.failed: set[int] = set()
        self.failure_seq: int | None = None
        self.failures = 0
        self.recoveries = 0
        self.rec_pending: set[str] | None = None
        self.rec_seq: int | None = None
        self.given_seqs: set[int] = set()
        self.segments: list[Segment] = []
        self.first_pattern: tuple[Pattern, list[int]] | None = None
        # verdicts (first violation of each check)
        self.bad: dict[str, tuple[int, str]] = {}
        self.forced_recorded = 0
        self.forced_decided = 0
        self.replayed = 0
        self.rec_details: list[str] = []
        self.useless_checked = 0
        self.ended = False
        self.end_seq: int | None = None
        self.events = 0
        self.extension = 0
        self.indexed = 0
        self._line = 1
        self._seq: int | None = None

    # ------------------------------------------------------------------ helpers
    def _err(self, field_: str | None, reason: str) -> InvalidInputError:
        return trace_error(self.source, self._line, self._seq, field_, reason)

    def _fail(self, check: str, seq: int, detail: str) -> None:
        if check not in self.bad:
            self.bad[check] = (seq, detail)

    def _proc(self, obj: dict[str, Any], name: str) -> int:
        v = obj.get(name)
        if type(v) is str:
            i = self.pos.get(v)
            if i is not None:
                return i
            close = difflib.get_close_matches(v, self.names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self._err(name, f"unknown process {v!r} (the header lists {', '.join(self.names)}){hint}")
        if v is None:
            raise self._err(name, "missing")
        raise self._err(name, f"expected a process name, got {v!r}")

    def _mid(self, obj: dict[str, Any]) -> str:
        v = obj.get("message")
        if type(v) is str and v:
            return v
        if type(v) is int:
            return str(v)
        if v is None:
            raise self._err("message", "missing")
        raise self._err("message", f"expected a message id (string or integer), got {v!r}")

    def _pattern(self) -> Pattern:
        try:
            return Pattern(self.names, tuple(self.evs))
        except InvalidInputError as e:  # the one-pass validation above should make this impossible
            raise InternalError(f"effective execution is not a pattern: {e}") from None

    # ------------------------------------------------------------------ the pass
    def run(self, pairs: Iterable[tuple[int, dict[str, Any]]]) -> TraceChecker:
        """Consume ``(line number, event object)`` pairs (events in ``seq`` order)."""
        try:
            self._run(pairs)
        except RollcheckError:
            raise
        except Exception as e:
            if self.protocol is not None and _raised_in_protocol(e, self.protocol):
                raise self._err(None, f"the protocol {getattr(self.protocol, 'name', '?')} raised "
                                      f"{type(e).__name__}: {e}") from None
            raise
        return self

    def _run(self, pairs: Iterable[tuple[int, dict[str, Any]]]) -> None:
        evs = self.evs
        append_ev = evs.append
        seqs = self.seqs
        append_seq = seqs.append
        count = self.count
        msgs = self.msgs
        n = self.n
        undone = self.undone
        pend = self.pend
        failed = self.failed
        pbs = self.pbs
        proto = self.protocol
        st = self.st
        pre = [None] * self.n
        proc = self._proc
        mid_of = self._mid
        pos = self.pos
        ck_events = [(Event(i, CHECKPOINT, None, None, False), Event(i, CHECKPOINT, None, None, True))
                     for i in range(self.n)]
        bad = self.bad
        if proto is not None:
            on_send, on_deliver = proto.on_send, proto.on_deliver
            on_checkpoint, must_force = proto.on_checkpoint, proto.must_force
        prefix = self.prefix
        n_events = self.events
        for line, obj in pairs:
            n_events += 1
            kind = obj["kind"]
            seq = obj["seq"]
            self._line = line
            self._seq = seq
            if self.ended:
                self.events = n_events
                raise self._err("kind", f"{kind!r} after the end event (seq {self.end_seq})")
            if kind == "send":
                v = obj.get("process")
                i = pos.get(v) if type(v) is str else None
                if i is None:
                    i = proc(obj, "process")
                v = obj.get("to")
                j = pos.get(v) if type(v) is str else None
                if j is None:
                    j = proc(obj, "to")
                mid = obj.get("message")
                if type(mid) is not str or not mid:
                    mid = mid_of(obj)
                if i == j:
                    raise self._err("to", f"self-send of message {mid!r}")
                if mid in msgs:
                    raise self._err("message", f"duplicate message id {mid!r} (already sent)")
                if failed and i in failed:
                    raise self._err("process", f"{self.names[i]} failed at seq {self.failure_seq} and "
                                               "has not been recovered yet")
                if pend[i]:
                    self._forced_not_followed(i)
                msgs[mid] = (i * n + j) << 1
                if undone:
                    undone.pop(mid, None)
                if proto is not None:
                    st[i], pbs[mid] = on_send(st[i], j)
                append_ev(Event(i, SEND, mid, j))
                append_seq(seq)
            elif kind == "deliver":
                v = obj.get("process")
                i = pos.get(v) if type(v) is str else None
                if i is None:
                    i = proc(obj, "process")
                mid = obj.get("message")
                if type(mid) is not str or not mid:
                    mid = mid_of(obj)
                replayed = obj.get("replayed", False)
                if type(replayed) is not bool:
                    raise self._err("replayed", f"expected true or false (a JSON boolean), got {replayed!r}")
                code = msgs.get(mid)
                if code is None:
                    if mid in undone:
                        self._fail("pattern-valid", seq, f"seq {seq}: {self.names[i]} delivers {mid!r}, "
                                   f"whose send was undone by the recovery at seq {undone[mid]} "
                                   "(an orphan message)")
                        continue
                    raise self._err("message", f"delivery of {mid!r}, which was never sent")
                src, to = divmod(code >> 1, n)
                if to != i:
                    raise self._err("process", f"message {mid!r} is addressed to {self.names[to]!r}, "
                                               f"delivered by {self.names[i]!r}")
                if failed and i in failed:
                    raise self._err("process", f"{self.names[i]} failed at seq {self.failure_seq} and "
                                               "has not been recovered yet")
                if code & 1:
                    if replayed:
                        self._fail("log-replay", seq, f"seq {seq}: {mid!r} replayed twice (already "
                                   "delivered after the recovery)")
                        continue
                    raise self._err("message", f"{mid!r} is already delivered")
                rp = self.rec_pending
                if replayed:
                    self.replayed += 1
                    if rp is None:
                        self._fail("log-replay", seq, f"seq {seq}: {mid!r} marked replayed, but no "
                                   "recovery happened before it")
                    elif mid in rp:
                        rp.discard(mid)
                    else:
                        self._fail("log-replay", seq, f"seq {seq}: {mid!r} replayed, but it is not in "
                                   f"transit for the line restored at seq {self.rec_seq}")
                elif rp and mid in rp:
                    rp.discard(mid)
                    self._fail("log-replay", seq, f"seq {seq}: {mid!r} is in transit for the line "
                               f"restored at seq {self.rec_seq} but is delivered without \"replayed\" "
                               "(not from the sender's log)")
                if proto is not None:
                    pb = pbs.pop(mid)  # only messages in flight keep their piggyback
                    got = pend[i] != 0
                    # decided before the forced checkpoint, on the state the process had then
                    want = must_force(pre[i] if got else st[i], src, pb)
                    if want:
                        self.forced_decided += 1
                    if want != got and "forced-checkpoints" not in bad:
                        if want:
                            self._fail("forced-checkpoints", seq, f"seq {seq}: {proto.name} forces a "
                                       f"checkpoint of {self.names[i]} before it delivers {mid!r}; the "
                                       "trace has none")
                        else:
                            self._fail("forced-checkpoints", pend[i], f"seq {pend[i]}: a forced checkpoint "
                                       f"of {self.names[i]} before the delivery of {mid!r} (seq {seq}), "
                                       f"which {proto.name} does not force")
                    st[i] = on_deliver(st[i], src, pb)
                pend[i] = 0
                msgs[mid] = code | 1
                append_ev(Event(i, DELIVER, mid))
                append_seq(seq)
            elif kind == "checkpoint":
                v = obj.get("process")
                i = pos.get(v) if type(v) is str else None
                if i is None:
                    i = proc(obj, "process")
                forced = obj.get("forced", False)
                if type(forced) is not bool:
                    raise self._err("forced", f"expected true or false (a JSON boolean), got {forced!r}")
                idx = obj.get("index")
                if failed and i in failed:
                    raise self._err("process", f"{self.names[i]} failed at seq {self.failure_seq} and "
                                               "has not been recovered yet")
                c = count[i] + 1
                if idx is not None and idx != c:
                    if type(idx) is not int:
                        raise self._err("index", f"expected an integer, got {idx!r}")
                    self._fail("checkpoint-indices", seq, f"seq {seq}: checkpoint index {idx}, but it is "
                               f"checkpoint {c} of {self.names[i]}"
                               + (" (numbering continues from the restored checkpoint)" if self.recoveries else ""))
                if idx is not None:
                    self.indexed += 1
                count[i] = c
                if pend[i]:
                    self._forced_not_followed(i)
                if forced:
                    self.forced_recorded += 1
                    pend[i] = seq
                if proto is not None:
                    if forced:
                        pre[i] = st[i]
                    st[i] = on_checkpoint(st[i])
                append_ev(ck_events[i][forced])  # shared: 2 objects per process, not one per checkpoint
                append_seq(seq)
            elif kind == "output":
                i = proc(obj, "process")
                if "key" not in obj or "value" not in obj:
                    raise self._err("key" if "key" not in obj else "value", "missing")
                if failed and i in failed:
                    raise self._err("process", f"{self.names[i]} failed at seq {self.failure_seq} and "
                                               "has not been recovered yet")
                if pend[i]:
                    self._forced_not_followed(i)
                self.n_outputs += 1
                if self.reference is not None:
                    self.outputs.append((i, count[i], _canon(self.names[i], obj["key"], obj["value"]), seq))
            elif kind == "failure":
                self._failure(obj, seq)
            elif kind == "recovery":
                self.events = n_events
                self._recovery(obj, seq)
            elif kind == "end":
                self.ended = True
                self.end_seq = seq
            elif kind.startswith("x-") or (prefix is not None and kind.startswith(prefix)):
                self.extension += 1
            else:
                ext = f"'x-' or '{prefix}'" if prefix else "'x-'"
                close = [_SYNONYMS[kind]] if kind in _SYNONYMS else difflib.get_close_matches(kind, CORE_KINDS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self._err("kind", f"unknown kind {kind!r} (core kinds: {', '.join(CORE_KINDS)}; "
                                        f"extension kinds start with {ext}){hint}")
        self.events = n_events

    def _forced_not_followed(self, i: int) -> None:
        if self.protocol is not None:
            s = self.pend[i]
            self._fail("forced-checkpoints", s, f"seq {s}: a forced checkpoint of {self.names[i]} that "
                       "is not immediately followed by a delivery of that process")
        self.pend[i] = 0

    # ------------------------------------------------------------------ failure and recovery
    def _failure(self, obj: dict[str, Any], seq: int) -> None:
        procs = obj.get("processes")
        if not isinstance(procs, list) or not procs:
            raise self._err("processes", f"expected a non-empty list of process names, got {procs!r}")
        idx = [self._proc({"processes": p}, "processes") for p in procs]
        if len(set(idx)) != len(idx):
            raise self._err("processes", "a process is listed twice")
        if self.failure_seq is None:
            self.failure_seq = seq
        if self.keep_first and self.first_pattern is None:
            self.first_pattern = (self._pattern(), self.seqs.tolist())
        self.failures += 1
        for i in idx:
            self.pend[i] = 0
        self.failed.update(idx)

    def _recovery(self, obj: dict[str, Any], seq: int) -> None:
        from rollcheck.pyimpl.consistency import in_transit, orphans
        from rollcheck.pyimpl.recovery import recovery_line

        if not self.failed:
            raise self._err("kind", "a recovery without a failure before it")
        line_doc = obj.get("line")
        if not isinstance(line_doc, dict):
            raise self._err("line", f"expected an object {{process: checkpoint index | \"volatile\"}}, got {line_doc!r}")
        it_doc = obj.get("in_transit")
        if not isinstance(it_doc, list) or not all(type(x) in (str, int) for x in it_doc):
            raise self._err("in_transit", f"expected a list of message ids, got {it_doc!r}")
        for k in line_doc:
            if k not in self.pos:
                self._proc({"line": k}, "line")
        p = self._pattern()
        names = self.names
        cut: list[int] = []
        never: list[str] = []
        for i, name in enumerate(names):
            v = line_doc.get(name, "volatile")
            if v == "volatile":
                cut.append(p.volatile_index(i))
            elif type(v) is int and 0 <= v <= p.last_index(i):
                cut.append(v)
            elif type(v) is int and v > p.last_index(i):
                # the engine restored a checkpoint the trace never shows: a wrong line, not bad JSON
                never.append(f"{name}:{v} was never taken ({name} has checkpoints 0..{p.last_index(i)})")
                cut.append(p.last_index(i))
            else:
                raise self._err(f"line.{name}", f"expected a checkpoint index (0, 1, …) of {name} or "
                                                f"\"volatile\", got {v!r}")
        failed = sorted(self.failed)
        self.recoveries += 1
        self._useless(p, f"before the recovery at seq {seq}")
        if self._keeping():
            self.segments.append(self._segment(f"before the recovery at seq {seq}", p))
        ref = recovery_line(p, failed, virtual=self.virtual)

        def show(c: Sequence[int]) -> str:
            return "{" + ", ".join(f"{names[i]}: {'V' if c[i] == p.volatile_index(i) else c[i]}"
                                   for i in range(self.n)) + "}"

        problem = None
        vol = [names[f] for f in failed if cut[f] == p.volatile_index(f)]
        orph = orphans(p, cut)
        if never:
            problem = f"restored {'; '.join(never)}; the recovery line is {show(ref.line)}"
        elif vol:
            problem = f"the failed process(es) {', '.join(vol)} cannot keep their volatile state"
        elif orph:
            m = orph[0]
            problem = (f"too little rollback: {m.id!r} is an orphan (sent by {names[m.sender]} after its "
                       f"restored {p.checkpoint_name((m.sender, cut[m.sender]))}, delivered by "
                       f"{names[m.receiver]} before its restored {p.checkpoint_name((m.receiver, cut[m.receiver]))})"
                       f"; the recovery line is {show(ref.line)}")
        elif tuple(cut) != ref.line:
            over = [i for i in range(self.n) if cut[i] < ref.line[i]]
            under = [i for i in range(self.n) if cut[i] > ref.line[i]]
            if over and not under:
                i = over[0]
                problem = (f"too much rollback: {names[i]} restored "
                           f"{p.checkpoint_name((i, cut[i]))}, but the maximum consistent line keeps "
                           f"{p.checkpoint_name((i, ref.line[i]))}; the recovery line is {show(ref.line)}")
            else:
                problem = f"restored {show(cut)}; the recovery line is {show(ref.line)}"
        transit = [m.id for m in in_transit(p, cut)]
        got_it = sorted({str(x) for x in it_doc})
        if problem is None and sorted(transit) != got_it:
            missing = sorted(set(transit) - set(got_it))
            extra = sorted(set(got_it) - set(transit))
            problem = (f"in_transit lists {got_it}; the channel state of the restored line is "
                       f"{sorted(transit)} (missing {missing}, extra {extra})")
        if problem is not None:
            self._fail("recovery-line", seq, f"recovery at seq {seq} after the failure of "
                       f"{', '.join(names[f] for f in failed)}: {problem}")
        else:
            self.rec_details.append(f"seq {seq}: {show(cut)}, {len(transit)} in transit")
        # Messages still awaited from an earlier recovery are in transit for this line too (their
        # sends are kept and they are undelivered), so the new set replaces the old one.
        self.rec_pending = set(transit)
        self.rec_seq = seq
        self._cut(p, cut, seq)
        self.failed.clear()
        self.failure_seq = None

    def _cut(self, p: Pattern, cut: list[int], seq: int) -> None:
        """Remove the events after the restored checkpoints from the effective execution."""
        n = self.n
        lim = [None if cut[i] == p.volatile_index(i) else cut[i] for i in range(n)]
        c = [0] * n
        new_evs: list[Event] = []
        new_seqs = array("q")
        kept: set[str] = set()
        delivered: set[str] = set()
        msgs = self.msgs
        for ev, s in zip(self.evs, self.seqs, strict=True):
            i = ev.process
            x = lim[i]
            kind = ev.kind
            if kind == CHECKPOINT:
                c[i] += 1
                if x is not None and c[i] > x:
                    continue
                if x is not None and c[i] == x:
                    self.given_seqs.add(s)
            elif x is not None and c[i] >= x:
                continue
            if kind == SEND:
                kept.add(ev.message)  # type: ignore[arg-type]
            elif kind == DELIVER:
                if ev.message not in kept:
                    continue  # an orphan left by a wrong line: already reported
                delivered.add(ev.message)  # type: ignore[arg-type]
            new_evs.append(ev)
            new_seqs.append(s)
        for mid in list(msgs):
            if mid not in kept:
                del msgs[mid]
                self.undone[mid] = seq
            elif mid in delivered:
                msgs[mid] |= 1
            else:
                msgs[mid] &= ~1
        self.evs[:] = new_evs
        self.seqs[:] = new_seqs
        if self.reference is not None:
            self.outputs[:] = [o for o in self.outputs if lim[o[0]] is None or o[1] < lim[o[0]]]  # type: ignore[operator]
        for i in range(n):
            x = lim[i]
            if x is None:
                continue
            self.count[i] = x
            self.pend[i] = 0
        if self.protocol is not None:
            self._replay_protocol()

    def _replay_protocol(self) -> None:
        """Protocol states and in-flight piggybacks of the effective execution, from the start.

        Re-running the transition functions over the events that stand (in their global order,
        checkpoints as recorded) gives each rolled-back process the state of its restored checkpoint
        and each message in transit its piggyback again, without keeping a snapshot per checkpoint or
        a piggyback per delivered message during the pass: one linear pass per recovery.
        """
        proto = self.protocol
        n = self.n
        st = [proto.initial(i, n) for i in range(n)]
        pbs: dict[str, Any] = {}
        msgs = self.msgs
        for ev in self.evs:
            i = ev.process
            if ev.kind == SEND:
                st[i], pbs[ev.message] = proto.on_send(st[i], ev.to)  # type: ignore[index]
            elif ev.kind == DELIVER:
                src = (msgs[ev.message] >> 1) // n  # type: ignore[index]
                st[i] = proto.on_deliver(st[i], src, pbs.pop(ev.message))  # type: ignore[arg-type]
            else:
                st[i] = proto.on_checkpoint(st[i])
        self.st[:] = st
        self.pbs.clear()
        self.pbs.update(pbs)

    # ------------------------------------------------------------------ useless checkpoints
    def _useless(self, p: Pattern, where: str) -> None:
        from rollcheck.pyimpl.zpaths import useless_checkpoints

        if self.protocol is None or not getattr(self.protocol, "zcycle_free", False):
            return
        if "no-useless-checkpoints" in self.bad:
            return
        self.useless_checked += 1
        u = useless_checkpoints(p)
        if not u:
            return
        lo, hi = 1, len(p.events)  # a Z-cycle in a prefix stays one when events are appended
        while lo < hi:
            mid = (lo + hi) // 2
            if useless_checkpoints(Pattern(p.processes, p.events[:mid])):
                hi = mid
            else:
                lo = mid + 1
        s = self.seqs[lo - 1]
        names = ", ".join(p.checkpoint_name(c) for c in u[:5])
        self._fail("no-useless-checkpoints", s, f"{len(u)} useless checkpoint(s) {where} ({names}"
                   f"{', …' if len(u) > 5 else ''}): the first Z-cycle closes at seq {s}")

    def _keeping(self) -> bool:
        if self.keep_segments and self.segment_limit is not None and self.events > self.segment_limit:
            self.segments.clear()
            return False
        return self.keep_segments

    def _segment(self, label: str, p: Pattern) -> Segment:
        seqs = self.seqs.tolist()
        given = {k for k, s in enumerate(seqs) if s in self.given_seqs}
        return Segment(label, p, seqs, given)

    # ------------------------------------------------------------------ verdict
    def final_pattern(self) -> Pattern:
        """The effective execution at this point, as a pattern."""
        return self._pattern()

    def finish(self, truncated: bool = False, truncated_after_seq: int | None = None) -> TraceReport:
        """The checks after the last event (``truncated``: the file ended in an incomplete line)."""
        bad = self.bad
        proto = self.protocol
        final: Pattern | None = None
        n_msgs = len(self.msgs)
        # the run is over: free what only the pass needed before the final pattern is built
        self.pbs.clear()
        self.msgs.clear()
        keep = self._keeping()
        if keep or (proto is not None and getattr(proto, "zcycle_free", False)):
            final = self._pattern()
            self._useless(final, "in the final effective execution")
            if keep:
                self.segments.append(self._segment("final effective execution", final))
        ended = self.ended
        stopped = ("" if ended else
                   f"; the recording stopped after seq {self.events} without an end event, so what "
                   "needs the end was not checked")
        if self.failed and ended:
            self._fail("recovery-line", self.failure_seq or 0,
                       f"the failure at seq {self.failure_seq} has no recovery")
        if ended and self.rec_pending:
            miss = sorted(self.rec_pending)
            self._fail("log-replay", self.end_seq or 0,
                       f"{miss} in transit for the line restored at seq {self.rec_seq} "
                       f"{'was' if len(miss) == 1 else 'were'} never replayed (end at seq {self.end_seq})")
        rep = TraceReport(truncated=truncated or not ended,
                          truncated_after_seq=truncated_after_seq if truncated else (None if ended else self.events),
                          events=self.events, ended=ended, source=self.engine)
        checks = rep.checks

        def add(name: str, ok_detail: str, applicable: bool = True) -> None:
            if name in bad:
                s, d = bad[name]
                checks.append(CheckResult(name, False, d, s))
            elif applicable:
                checks.append(CheckResult(name, True, ok_detail))

        n_ck = sum(self.count)
        add("pattern-valid", f"{self.events} events ({self.extension} extension); the effective "
            f"execution has {len(self.evs)} events, {n_msgs} messages, {n_ck} checkpoints; "
            "no orphan delivery" + stopped)
        if self.events == 0:
            checks[-1] = CheckResult("pattern-valid", None, "the trace has no events")
        if proto is not None:
            add("forced-checkpoints", f"{proto.name}: forced exactly where the protocol forces "
                f"({self.forced_recorded} forced checkpoint(s) recorded, {self.forced_decided} decided)")
            if getattr(proto, "zcycle_free", False):
                add("no-useless-checkpoints", f"no checkpoint on a Z-cycle in {self.useless_checked} "
                    "execution(s) (before each recovery and the final one)")
        if self.failed and not ended and "recovery-line" not in bad:
            pending = (f"the failure at seq {self.failure_seq} has no recovery before the recording "
                       "stops")
            checks.append(CheckResult("recovery-line", True if self.recoveries else None,
                                      (f"{self.recoveries} recovery(ies) restored the recovery line "
                                       f"({'; '.join(self.rec_details)}); " if self.recoveries else "")
                                      + pending + stopped))
        elif self.failures or "recovery-line" in bad:
            add("recovery-line", f"{self.recoveries} recovery(ies), each restored the maximum consistent "
                f"line for the failed processes with its channel state: {'; '.join(self.rec_details)}")
        if self.recoveries or "log-replay" in bad:
            if "log-replay" in bad or ended:
                add("log-replay", f"{self.replayed} replayed delivery(ies): exactly the in-transit "
                    "messages of each restored line, each once")
            else:
                checks.append(CheckResult("log-replay", True if self.replayed else None,
                                          f"{self.replayed} replayed delivery(ies) checked so far" + stopped))
        if self.reference is not None:
            self._outputs(checks)
        add("checkpoint-indices", f"{self.indexed} checkpoint index field(s) follow the numbering (1, 2, … "
            "per process, continuing from the restored checkpoint after a recovery)", self.indexed > 0)
        return rep

    def _outputs(self, checks: list[CheckResult]) -> None:
        ref = self.reference
        assert ref is not None
        if not self.ended:
            checks.append(CheckResult("outputs-exactly-once", None,
                                      f"not reached: no end event ({self.n_outputs} output(s) so far)"))
            return
        seen: Counter[str] = Counter()
        first: tuple[int, str] | None = None
        for _i, _x, canon, s in self.outputs:
            seen[canon] += 1
            if seen[canon] > ref[canon] and first is None:
                if ref[canon]:
                    first = (s, f"seq {s}: duplicate output {_describe(canon)} (the reference has it "
                                f"{ref[canon]} time(s))")
                else:
                    first = (s, f"seq {s}: unexpected output {_describe(canon)} (not in the reference)")
        missing = sorted(c for c in ref if seen[c] < ref[c])
        if first is None and missing:
            first = (self.end_seq or 0, f"missing output {_describe(missing[0])}"
                     + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
                     + f" at the end (seq {self.end_seq})")
        if first is not None:
            checks.append(CheckResult("outputs-exactly-once", False, first[1], first[0]))
        else:
            checks.append(CheckResult("outputs-exactly-once", True,
                                      f"{sum(seen.values())} output(s) after removing rolled-back work "
                                      f"({self.n_outputs} recorded) equal the reference multiset"))


def _raised_in_protocol(e: BaseException, proto: Any) -> bool:
    """True when the innermost frame of ``e`` is in the protocol's own module (a user's bug)."""
    tb = e.__traceback__
    mod = type(proto).__module__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == mod:
            return True
        tb = tb.tb_next
    return False
