"""The streamed view of a run: one pass over a trace, the core vocabulary validated, plug-ins fed.

:class:`RunView` consumes the events of a ``rollcheck.trace/1`` file in order and keeps only the
*effective execution* — the events that the recoveries so far have left standing — as compact
pattern events (process index, kind, message id), never the JSON objects. At every ``recovery``
the restored line and its channel state are derived (:class:`~rollcheck.pyimpl.traces.plugin.Recovery`),
handed to the plug-ins, and every rolled-back process loses its events after its restored
checkpoint (deliveries become messages in transit, sends are undone and may be sent again under
the same id).

Structural defects are bad input (exit 2, naming the line and ``seq``); everything a plug-in judges
is a check result. The view itself judges nothing: the checks are the plug-ins of
:mod:`rollcheck.pyimpl.traces.checks` and the engines' own.

References
----------
``specs/formats.md#trace``; FERDiS paper §4 (consistent global states), §6.1 (recovery lines).
"""

from __future__ import annotations

import difflib
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from rollcheck.pyimpl.errors import InternalError, InvalidInputError, RollcheckError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
from rollcheck.pyimpl.traces.plugin import HOOKS, Recovery, TraceCheck
from rollcheck.pyimpl.traces.reader import trace_error
from rollcheck.pyimpl.verdict import Check, Report

__all__ = ["CORE_KINDS", "RunView", "check_header"]

CORE_KINDS = ("send", "deliver", "checkpoint", "failure", "recovery", "output", "end")
# other engines' words for the core kinds (only used to suggest the right one in an error)
_SYNONYMS = {"recv": "deliver", "receive": "deliver", "delivery": "deliver", "ckpt": "checkpoint",
             "snapshot": "checkpoint", "crash": "failure", "fail": "failure", "restart": "recovery",
             "restore": "recovery", "emit": "output", "sink": "output"}


def check_header(header: dict[str, Any], source: str | None = None) -> tuple[list[str], str]:
    """The process names and the engine name of an engine-neutral header (else bad input).

    >>> check_header({"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"]})
    (['a', 'b'], 'toy')

    Parameters
    ----------
    header : dict
        The trace's first line.
    source : str, optional
        The trace file's name for messages.
    """
    names = header.get("processes")
    if (not isinstance(names, list) or not names
            or not all(isinstance(x, str) and x for x in names) or len(set(names)) != len(names)):
        raise InvalidInputError("processes: expected a non-empty list of distinct process names "
                                f"(the engine-neutral header), got {names!r}",
                                source=source, location="line 1")
    src = header.get("source", "")
    if src is not None and not isinstance(src, str):
        raise InvalidInputError(f"source: expected a string, got {src!r}", source=source, location="line 1")
    return names, src or ""


class RunView:
    """One pass over a trace's events, feeding the check plug-ins (module docstring).

    Parameters
    ----------
    header : dict
        The header line (``processes`` required; ``source`` names the engine's extension prefix).
    checks : list of TraceCheck
        The plug-ins, in the order their results are reported.
    source : str, optional
        The file name, for error messages.
    protocol : Protocol, optional
        The protocol whose code runs inside the pass (an exception raised in it is named as the
        protocol's, exit 2).
    keep_first : bool
        Keep the pattern of the run before the first failure (``rollcheck trace to-pattern``).

    Attributes
    ----------
    names, pos, n : the processes; evs, seqs : the effective execution and the seq of each event;
    count : checkpoints per process in it; events : the trace's own events read (not those an
    adapter derived); last_seq : the last seq read; msgs : message id -> ``((sender * n + receiver) << 1) |
    delivered``; undone : message id -> seq of the recovery that undid its send; events, extension,
    failures, recoveries, ended, end_seq, failed, failure_seq, given_seqs.

    Examples
    --------
    >>> from rollcheck.pyimpl.traces.checks import generic_checks
    >>> hdr = {"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"]}
    >>> evs = [{"seq": 1, "kind": "send", "process": "a", "message": "m", "to": "b"},
    ...        {"seq": 2, "kind": "deliver", "process": "b", "message": "m"},
    ...        {"seq": 3, "kind": "end"}]
    >>> v = RunView(hdr, generic_checks(protocol=None))
    >>> r = v.run((k + 2, e) for k, e in enumerate(evs)).finish()
    >>> r.verdict.value, [(c.name, c.status.value) for c in r.checks]   # doctest: +NORMALIZE_WHITESPACE
    ('inconclusive', [('pattern-valid', 'held'), ('recovery-line', 'not-applicable'),
                      ('log-replay', 'not-applicable')])
    """

    def __init__(self, header: dict[str, Any], checks: Sequence[TraceCheck], source: str | None = None, *,
                 protocol: Any = None, keep_first: bool = False):
        self.source = source
        self.header = header
        names, engine = check_header(header, source)
        self.engine = engine
        self.prefix = f"{engine}." if engine else None
        self.names: tuple[str, ...] = tuple(names)
        self.pos = {x: k for k, x in enumerate(names)}
        self.n = len(names)
        self.protocol = protocol
        self.checks = list(checks)
        seen: set[str] = set()
        for c in self.checks:
            if not isinstance(c, TraceCheck) or not c.name:
                raise TypeError(f"a trace check must be a named TraceCheck, got {c!r}")
            if c.name in seen:
                raise ValueError(f"two trace checks are called {c.name!r}")
            seen.add(c.name)
        self._subs: dict[str, list[Any]] = {h: [getattr(c, h) for c in self.checks if h in c.hooks()]
                                            for h in HOOKS}
        self.keep_first = keep_first
        self._ck_events = [(Event(i, CHECKPOINT, None, None, False), Event(i, CHECKPOINT, None, None, True))
                           for i in range(self.n)]
        self.evs: list[Event] = []
        self.seqs = array("q")
        self.count = [0] * self.n
        self.msgs: dict[str, int] = {}
        self.undone: dict[str, int] = {}
        self.failed: set[int] = set()
        self.failure_seq: int | None = None
        self.failures = 0
        self.recoveries = 0
        self.last_recovery_seq: int | None = None
        self.given_seqs: set[int] = set()
        self.first_pattern: tuple[Pattern, list[int]] | None = None
        self.ended = False
        self.end_seq: int | None = None
        self.events = 0
        self.last_seq = 0
        self.extension = 0
        self.n_outputs = 0
        self.truncated = False
        self.truncated_after_seq: int | None = None
        self._line = 1
        self._seq: int | None = None

    # ------------------------------------------------------------------ helpers
    def err(self, field_: str | None, reason: str) -> InvalidInputError:
        """Bad input at the event being read: ``FILE: line N (seq S): field: reason``.

        Parameters
        ----------
        field_ : str or None
            The offending field (None: the event as a whole).
        reason : str
            What is wrong.
        """
        return trace_error(self.source, self._line, self._seq, field_, reason)

    def _proc(self, obj: dict[str, Any], name: str) -> int:
        v = obj.get(name)
        if type(v) is str:
            i = self.pos.get(v)
            if i is not None:
                return i
            close = difflib.get_close_matches(v, self.names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.err(name, f"unknown process {v!r} (the header lists {', '.join(self.names)}){hint}")
        if v is None:
            raise self.err(name, "missing")
        raise self.err(name, f"expected a process name, got {v!r}")

    def _mid(self, obj: dict[str, Any]) -> str:
        v = obj.get("message")
        if type(v) is str and v:
            return v
        if type(v) is int:
            return str(v)
        if v is None:
            raise self.err("message", "missing")
        raise self.err("message", f"expected a message id (string or integer), got {v!r}")

    def _alive(self, i: int) -> None:
        if self.failed and i in self.failed:
            raise self.err("process", f"{self.names[i]} failed at seq {self.failure_seq} and has not been "
                                      "recovered yet")

    def sender_of(self, mid: str) -> int:
        """The sender of a message of the effective execution."""
        return (self.msgs[mid] >> 1) // self.n

    def pattern(self) -> Pattern:
        """The effective execution at this point, as a pattern."""
        try:
            return Pattern(self.names, tuple(self.evs))
        except InvalidInputError as e:  # the one-pass validation should make this impossible
            raise InternalError(f"effective execution is not a pattern: {e}") from None

    # ------------------------------------------------------------------ the pass
    def run(self, pairs: Iterable[tuple[int, dict[str, Any]]]) -> RunView:
        """Consume ``(line number, event object)`` pairs (events in ``seq`` order)."""
        try:
            self._run(pairs)
        except RollcheckError:
            raise
        except Exception as e:
            if self.protocol is not None and _raised_in_protocol(e, self.protocol):
                raise self.err(None, f"the protocol {getattr(self.protocol, 'name', '?')} raised "
                                     f"{type(e).__name__}: {e}") from None
            raise
        return self

    def _run(self, pairs: Iterable[tuple[int, dict[str, Any]]]) -> None:
        s_event = self._subs["on_event"]
        handlers = {"send": self._send, "deliver": self._deliver, "checkpoint": self._checkpoint,
                    "output": self._output, "failure": self._failure, "recovery": self._recovery,
                    "end": self._end}
        prefix = self.prefix
        for line, obj in pairs:
            kind = obj["kind"]
            seq = obj["seq"]
            if not obj.get("derived"):  # core events an adapter derived share their origin's seq
                self.events += 1
                self.last_seq = seq
            self._line = line
            self._seq = seq
            if self.ended:
                raise self.err("kind", f"{kind!r} after the end event (seq {self.end_seq})")
            for f in s_event:
                f(self, line, obj)
            h = handlers.get(kind)
            if h is not None:
                h(obj, seq)
            elif kind.startswith("x-") or (prefix is not None and kind.startswith(prefix)):
                self.extension += 1
            else:
                ext = f"'x-' or '{prefix}'" if prefix else "'x-'"
                close = [_SYNONYMS[kind]] if kind in _SYNONYMS else difflib.get_close_matches(kind, CORE_KINDS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self.err("kind", f"unknown kind {kind!r} (core kinds: {', '.join(CORE_KINDS)}; "
                                       f"extension kinds start with {ext}){hint}")

    def _pid(self, obj: dict[str, Any], name: str) -> int:
        v = obj.get(name)
        i = self.pos.get(v) if type(v) is str else None
        return self._proc(obj, name) if i is None else i

    def _message(self, obj: dict[str, Any]) -> str:
        mid = obj.get("message")
        return mid if type(mid) is str and mid else self._mid(obj)

    # ------------------------------------------------------------------ the core kinds
    def _send(self, obj: dict[str, Any], seq: int) -> None:
        i, j, mid = self._pid(obj, "process"), self._pid(obj, "to"), self._message(obj)
        if i == j:
            raise self.err("to", f"self-send of message {mid!r}")
        if mid in self.msgs:
            raise self.err("message", f"duplicate message id {mid!r} (already sent)")
        self._alive(i)
        for f in self._subs["on_send"]:
            f(self, seq, i, j, mid)
        self.msgs[mid] = (i * self.n + j) << 1
        if self.undone:
            self.undone.pop(mid, None)
        self.evs.append(Event(i, SEND, mid, j))
        self.seqs.append(seq)

    def _deliver(self, obj: dict[str, Any], seq: int) -> None:
        i, mid = self._pid(obj, "process"), self._message(obj)
        replayed = obj.get("replayed", False)
        if type(replayed) is not bool:
            raise self.err("replayed", f"expected true or false (a JSON boolean), got {replayed!r}")
        code = self.msgs.get(mid)
        if code is None:
            if mid in self.undone:
                for f in self._subs["on_orphan"]:
                    f(self, seq, i, mid, self.undone[mid])
                return
            raise self.err("message", f"delivery of {mid!r}, which was never sent")
        src, to = divmod(code >> 1, self.n)
        if to != i:
            raise self.err("process", f"message {mid!r} is addressed to {self.names[to]!r}, "
                                      f"delivered by {self.names[i]!r}")
        self._alive(i)
        if code & 1:
            if not replayed:
                raise self.err("message", f"{mid!r} is already delivered")
            for f in self._subs["on_redeliver"]:
                f(self, seq, i, mid)
            return
        for f in self._subs["on_deliver"]:
            f(self, seq, i, src, mid, replayed)
        self.msgs[mid] = code | 1
        self.evs.append(Event(i, DELIVER, mid))
        self.seqs.append(seq)

    def _checkpoint(self, obj: dict[str, Any], seq: int) -> None:
        i = self._pid(obj, "process")
        forced = obj.get("forced", False)
        if type(forced) is not bool:
            raise self.err("forced", f"expected true or false (a JSON boolean), got {forced!r}")
        idx = obj.get("index")
        if idx is not None and type(idx) is not int:
            raise self.err("index", f"expected an integer, got {idx!r}")
        self._alive(i)
        self.count[i] += 1
        for f in self._subs["on_checkpoint"]:
            f(self, seq, i, forced, idx)
        self.evs.append(self._ck_events[i][forced])  # shared: 2 objects per process, not one per checkpoint
        self.seqs.append(seq)

    def _output(self, obj: dict[str, Any], seq: int) -> None:
        i = self._proc(obj, "process")
        if "key" not in obj or "value" not in obj:
            raise self.err("key" if "key" not in obj else "value", "missing")
        self._alive(i)
        self.n_outputs += 1
        for f in self._subs["on_output"]:
            f(self, seq, i, obj["key"], obj["value"])

    def _end(self, obj: dict[str, Any], seq: int) -> None:
        self.ended = True
        self.end_seq = seq
        for f in self._subs["on_end"]:
            f(self, seq)

    # ------------------------------------------------------------------ failure and recovery
    def _failure(self, obj: dict[str, Any], seq: int) -> None:
        procs = obj.get("processes")
        if not isinstance(procs, list) or not procs:
            raise self.err("processes", f"expected a non-empty list of process names, got {procs!r}")
        idx = [self._proc({"processes": p}, "processes") for p in procs]
        if len(set(idx)) != len(idx):
            raise self.err("processes", "a process is listed twice")
        if self.failure_seq is None:
            self.failure_seq = seq
        if self.keep_first and self.first_pattern is None:
            self.first_pattern = (self.pattern(), self.seqs.tolist())
        self.failures += 1
        for f in self._subs["on_failure"]:
            f(self, seq, idx)
        self.failed.update(idx)

    def _recovery(self, obj: dict[str, Any], seq: int) -> None:
        from rollcheck.pyimpl.consistency import in_transit

        if not self.failed:
            raise self.err("kind", "a recovery without a failure before it")
        line_doc = obj.get("line")
        if not isinstance(line_doc, dict):
            raise self.err("line", f"expected an object {{process: checkpoint index | \"volatile\"}}, got {line_doc!r}")
        it_doc = obj.get("in_transit")
        if not isinstance(it_doc, list) or not all(type(x) in (str, int) for x in it_doc):
            raise self.err("in_transit", f"expected a list of message ids, got {it_doc!r}")
        for k in line_doc:
            if k not in self.pos:
                self._proc({"line": k}, "line")
        p = self.pattern()
        cut: list[int] = []
        never: list[str] = []
        for i, name in enumerate(self.names):
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
                raise self.err(f"line.{name}", f"expected a checkpoint index (0, 1, …) of {name} or "
                                               f"\"volatile\", got {v!r}")
        self.recoveries += 1
        limit = [None if cut[i] == p.volatile_index(i) else cut[i] for i in range(self.n)]
        rec = Recovery(seq, sorted(self.failed), p, self.seqs.tolist(), cut, limit, never,
                       [m.id for m in in_transit(p, cut)], sorted({str(x) for x in it_doc}))
        rec.given = {k for k, s in enumerate(rec.seqs) if s in self.given_seqs}
        for f in self._subs["on_recovery"]:
            f(self, rec)
        self._cut(limit, seq)
        self.failed.clear()
        self.failure_seq = None
        self.last_recovery_seq = seq
        for f in self._subs["after_cut"]:
            f(self, rec)

    def _cut(self, lim: list[int | None], seq: int) -> None:
        """Remove the events after the restored checkpoints from the effective execution."""
        n = self.n
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
                    continue  # an orphan left by a wrong line: reported by recovery-line
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
        for i in range(n):
            x = lim[i]
            if x is not None:
                self.count[i] = x

    # ------------------------------------------------------------------ the results
    def finish(self, truncated: bool = False, truncated_after_seq: int | None = None) -> Report:
        """Every plug-in's result after the last event, as a :class:`~rollcheck.pyimpl.verdict.Report`.

        ``truncated``: the file ended in an incomplete line. A recording without an ``end`` event
        is reported truncated too (after its last seq).

        Parameters
        ----------
        truncated : bool, optional
            The file ended in an incomplete line.
        truncated_after_seq : int, optional
            The last ``seq`` before the incomplete line.
        """
        self.truncated = truncated or not self.ended
        self.truncated_after_seq = (truncated_after_seq if truncated
                                    else (None if self.ended else self.last_seq))
        results: dict[str, Check] = {}
        by_plugin: dict[int, list[Check]] = {}
        order = ([c for c in self.checks if not c.after] + [c for c in self.checks if c.after])
        for c in order:
            out = c.finish(self, dict(results))
            got = [] if out is None else [out] if isinstance(out, Check) else list(out)
            for x in got:
                if not isinstance(x, Check):
                    raise TypeError(f"trace check {c.name!r} returned {type(x).__name__}, not a Check")
                results[x.name] = x
            by_plugin[id(c)] = got
        checks = [x for c in self.checks for x in by_plugin[id(c)]]
        return Report(checks, subject=self.source or "",
                      extra={"truncated": self.truncated, "truncated_after_seq": self.truncated_after_seq,
                             "events": self.events, "ended": self.ended, "source": self.engine})


def _raised_in_protocol(e: BaseException, proto: Any) -> bool:
    """True when the innermost frame of ``e`` is in the protocol's own module (a user's bug)."""
    tb = e.__traceback__
    mod = type(proto).__module__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == mod:
            return True
        tb = tb.tb_next
    return False
