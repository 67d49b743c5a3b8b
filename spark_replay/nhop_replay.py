"""Conformance checks of recorded message-passing runs (``source == "spark-nhop"``).

The trace's ``send``/``deliver``/``checkpoint`` events form a checkpoint-and-communication
pattern. Two patterns are derived (``specs/spark.md#message-passing-conformance``):

- the *pre-failure* pattern: every event before the ``failure`` event;
- the *effective* pattern: the execution that the recovery leaves standing - at the ``recovery``
  event each rolled-back process loses its events after its restored checkpoint (its
  deliveries become messages in transit, its sends are undone and later re-sent under the same
  ids), then the events after the recovery are appended.

Checks:

- ``pattern-valid``: both are valid patterns (a delivery of a message whose send was undone is an
  orphan and fails here);
- ``forced-checkpoints``: re-running the Python protocol (:func:`rollcheck.pyimpl.protocols.run_protocol`)
  on the effective pattern's *basic* schedule forces exactly the recorded forced checkpoints;
- ``no-useless-checkpoints`` (BCS, HMNR): no checkpoint of either pattern is on a Z-cycle;
- ``recovery-line``: the line, rolled-back set and replayed messages Spark's driver computed from
  the checkpoint files equal :func:`rollcheck.pyimpl.recovery.recovery_line` on the pre-failure pattern;
- ``outputs-failure-free``: the final application state equals the failure-free run
  (:func:`rollcheck.spark_replay.nhop.simulate`).

TLC trace validation of HMNR traces (the TLA+ model) is added by the CLI layer, which may import
``tla``.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
from rollcheck.spark_replay.replay import Check
from rollcheck.spark_replay.trace import Trace

__all__ = ["check_nhop", "derive_patterns", "DerivedPatterns"]


class DerivedPatterns:
    """Patterns of a message-passing trace and the trace ``seq`` of each of their events."""

    def __init__(self) -> None:
        self.pre: Pattern | None = None
        self.pre_seqs: list[int] = []
        self.effective: Pattern | None = None
        self.effective_seqs: list[int] = []
        self.recovery: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.invalid: Check | None = None
        #: Positions in ``effective`` of the checkpoints that rolled-back processes restored.
        self.restored_positions: set[int] = set()


def _event(e: dict[str, Any], pos: dict[str, int], trace: Trace) -> Event:
    try:
        proc = pos[e["process"]]
        if e["kind"] == SEND:
            return Event(proc, SEND, str(e["message"]), pos[e["to"]])
        if e["kind"] == DELIVER:
            return Event(proc, DELIVER, str(e["message"]))
        return Event(proc, CHECKPOINT, None, None, bool(e.get("forced", False)))
    except KeyError as k:
        raise InvalidInputError(f"event seq {e['seq']} ({e['kind']}): missing or unknown {k}",
                                source=trace.source, location=f"line {e.get('_line')}") from None


def _pattern(names: list[str], evs: list[Event], seqs: list[int], what: str) -> tuple[Pattern | None, Check | None]:
    try:
        return Pattern(tuple(names), tuple(evs)), None
    except InvalidInputError as err:
        loc = err.location or ""
        seq = None
        if loc.startswith("events["):
            seq = seqs[int(loc[7:-1])]
        return None, Check("pattern-valid", False, f"{what} pattern is invalid at seq {seq}: {err.reason}", seq)


def derive_patterns(trace: Trace) -> DerivedPatterns:
    """Build the pre-failure and effective patterns (module docstring)."""
    cfg = trace.header.get("config") or {}
    names = cfg.get("processes_names")
    if not isinstance(names, list) or not names:
        raise InvalidInputError("header config has no processes_names", source=trace.source, location="line 1")
    pos = {str(x): k for k, x in enumerate(names)}
    d = DerivedPatterns()
    kept: list[tuple[Event, int]] = []
    pre: list[tuple[Event, int]] | None = None
    restored_seqs: set[int] = set()
    for e in trace.events:
        k = e["kind"]
        if k in (SEND, DELIVER, CHECKPOINT):
            kept.append((_event(e, pos, trace), e["seq"]))
        elif k == "failure":
            d.failure = e
            if pre is None:
                pre = list(kept)
        elif k == "recovery":
            d.recovery = e
            line = e.get("line") or {}
            new: list[tuple[Event, int]] = []
            count = [0] * len(names)
            last_kept: dict[int, int] = {}
            for ev, seq in kept:
                x = line.get(names[ev.process], "volatile")
                c = count[ev.process]
                if ev.kind == CHECKPOINT:
                    count[ev.process] += 1
                if x != "volatile":  # keep the events up to and including C[i,x]
                    if (ev.kind == CHECKPOINT and c + 1 > int(x)) or (ev.kind != CHECKPOINT and c >= int(x)):
                        continue
                new.append((ev, seq))
                if ev.kind == CHECKPOINT:
                    last_kept[ev.process] = seq
            kept = new
            restored_seqs.update(last_kept.get(names.index(pn), -1) for pn, x in line.items()
                                 if x != "volatile" and pn in names)
        elif k == "end":
            d.end = e
    pre = kept if pre is None else pre
    d.pre, bad = _pattern(names, [x for x, _ in pre], [s for _, s in pre], "pre-failure")
    d.pre_seqs = [s for _, s in pre]
    d.effective_seqs = [s for _, s in kept]
    d.effective, bad_eff = _pattern(names, [x for x, _ in kept], d.effective_seqs, "effective")
    bads = [b for b in (bad, bad_eff) if b is not None]
    d.invalid = min(bads, key=lambda c: c.offending_seq or 0) if bads else None
    d.restored_positions = {k for k, s in enumerate(d.effective_seqs) if s in restored_seqs}
    return d


def _first_useless_prefix(p: Pattern, useless: Any) -> int:
    """The length of the shortest prefix of ``p`` with a useless checkpoint (``p`` has one).

    A Z-cycle in a prefix stays a Z-cycle when events are appended, so "some checkpoint is useless"
    is monotone in the prefix length: binary search.
    """
    lo, hi = 1, len(p.events)
    while lo < hi:
        mid = (lo + hi) // 2
        if useless(Pattern(p.processes, p.events[:mid])):
            hi = mid
        else:
            lo = mid + 1
    return lo


def check_nhop(trace: Trace) -> list[Check]:
    """The message-passing conformance checks over a parsed trace."""
    from rollcheck.pyimpl.protocols import run_protocol
    from rollcheck.pyimpl.recovery import recovery_line
    from rollcheck.pyimpl.zpaths import useless_checkpoints
    from rollcheck.spark_replay.nhop import NhopConfig, simulate

    cfg_doc = dict(trace.header.get("config") or {})
    try:
        cfg = NhopConfig(**{k: v for k, v in cfg_doc.items() if k in NhopConfig.__dataclass_fields__})
        cfg.validate()
    except (TypeError, InvalidInputError) as err:
        raise InvalidInputError(f"header config is not an nhop configuration: {err}",
                                source=trace.source, location="line 1") from None
    d = derive_patterns(trace)
    checks: list[Check] = []
    if d.invalid is not None:
        checks.append(d.invalid)
    else:
        assert d.pre is not None and d.effective is not None
        checks.append(Check("pattern-valid", True,
                            f"pre-failure ({len(d.pre)} events) and effective ({len(d.effective)} "
                            f"events) patterns are valid"))
    # The remaining checks run on whichever patterns are valid.
    patterns = [(what, p, seqs, fixed) for what, p, seqs, fixed in
                (("pre-failure", d.pre, d.pre_seqs, set()),
                 ("effective", d.effective, d.effective_seqs, d.restored_positions)) if p is not None]
    # Forced checkpoints: the Python protocol on the same basic schedule, before the failure and
    # on the effective execution (where a restored forced checkpoint is a given, basic, one: the
    # delivery it preceded was undone).
    bad_check: tuple[int, str] | None = None
    n_forced = 0
    for what, p, seqs, fixed in patterns:
        basic = Pattern(p.processes, tuple(
            Event(ev.process, CHECKPOINT) if (ev.kind == CHECKPOINT and k in fixed) else ev
            for k, ev in enumerate(p.events) if not (ev.kind == CHECKPOINT and ev.forced and k not in fixed)))
        run = run_protocol(cfg.protocol, basic)
        n_forced = max(n_forced, run.forced_checkpoints)
        want = [ev if k not in fixed else ev for k, ev in enumerate(run.pattern.events)]
        got = [Event(ev.process, CHECKPOINT) if (ev.kind == CHECKPOINT and k in fixed) else ev
               for k, ev in enumerate(p.events)]
        i = 0
        while i < max(len(got), len(want)):
            a = got[i] if i < len(got) else None
            b = want[i] if i < len(want) else None
            if a != b:
                seq = seqs[min(i, len(seqs) - 1)]
                if b is not None and b.kind == CHECKPOINT and b.forced:
                    msg = (f"{what}: the protocol forces a checkpoint of {p.processes[b.process]} before "
                           f"the event at seq {seq}; the recording has none")
                else:
                    msg = f"{what}: the recording has a forced checkpoint at seq {seq} the protocol does not take"
                bad_check = (seq, msg)
                break
            i += 1
        if bad_check:
            break
    checks.append(Check("forced-checkpoints", bad_check is None,
                        bad_check[1] if bad_check else
                        f"{cfg.protocol}: re-running the Python protocol on the recorded basic schedule "
                        f"forces the same checkpoints ({n_forced})", bad_check[0] if bad_check else None))
    # Useless checkpoints.
    if cfg.protocol in ("bcs", "hmnr"):
        bad = None
        for name, p, seqs, _fixed in patterns:
            u = useless_checkpoints(p)
            if u:
                c = u[0]
                k = _first_useless_prefix(p, useless_checkpoints)
                bad = (seqs[k - 1],
                       f"{name} pattern: {len(u)} useless checkpoint(s), first {p.checkpoint_name(c)}; "
                       f"the first Z-cycle closes at seq {seqs[k - 1]}")
                break
        checks.append(Check("no-useless-checkpoints", bad is None,
                            bad[1] if bad else f"no checkpoint on a Z-cycle "
                            f"({sum(patterns[-1][1].last_indices) if patterns else 0} checkpoints)",
                            bad[0] if bad else None))
    else:
        if patterns:
            what, p, _s, _f = patterns[-1]
            checks.append(Check("useless-checkpoints-reported", True,
                                f"uc guarantees nothing: {len(useless_checkpoints(p))} useless "
                                f"checkpoint(s) in the {what} pattern"))
    # Recovery line.
    if d.recovery is not None and d.pre is not None:
        rec = d.recovery
        failed = [d.pre.process_index(x) for x in rec.get("failed", [])]
        line = recovery_line(d.pre, failed, virtual=True)
        want_json: dict[str, Any] = line.to_json(d.pre)
        got_line = rec.get("line")
        got_rb = sorted(rec.get("rolled_back", []))
        got_it = sorted(rec.get("in_transit", []))
        ok = (got_line == want_json["line"] and got_rb == sorted(want_json["rolled_back"])
              and got_it == sorted(want_json["in_transit"]))
        checks.append(Check("recovery-line", ok,
                            (f"the recorded line {got_line} (replayed {len(got_it)} message(s)) equals the "
                             f"Python recovery line") if ok else
                            f"the run recovered to {got_line}, rolled back {got_rb}, replayed {got_it}; the "
                            f"Python recovery line is {want_json['line']}, rolled back "
                            f"{want_json['rolled_back']}, in transit {sorted(want_json['in_transit'])}",
                            None if ok else rec["seq"]))
        # Every in-transit message is delivered exactly once after the recovery, from the log.
        after = [e for e in trace.events if e["seq"] > rec["seq"] and e["kind"] == DELIVER]
        replayed = [e["message"] for e in after if e.get("replayed")]
        dup = sorted({m for m in replayed if replayed.count(m) > 1})
        extra = sorted(set(replayed) - set(got_it))
        missing = sorted(set(got_it) - set(replayed)) if d.end is not None else []
        bad_r = next((e["seq"] for e in after if e.get("replayed") and (e["message"] in extra or e["message"] in dup)),
                      d.end["seq"] if missing and d.end is not None else None)
        checks.append(Check("log-replay", bad_r is None,
                            f"{len(replayed)} in-transit message(s) replayed from the senders' logs, "
                            f"each delivered once" if bad_r is None else
                            f"replayed deliveries differ from the in-transit set: extra {extra}, "
                            f"duplicated {dup}, never delivered {missing}", bad_r))
    elif d.failure is not None and d.recovery is None:
        checks.append(Check("recovery-line", False, "a failure without a recovery", d.failure["seq"]))
    # Outputs.
    if d.end is None:
        last = trace.events[-1]["seq"] if trace.events else 0
        checks.append(Check("end-of-run", True, f"not reached: the recording stopped after seq {last}; "
                                                f"the prefix was checked"))
        return checks
    ref = simulate(cfg)["outputs"]
    got_out = d.end.get("outputs")
    checks.append(Check("outputs-failure-free", got_out == ref,
                        "per-process (count, sum) of delivered payloads equal the failure-free run"
                        if got_out == ref else f"outputs {got_out} differ from the failure-free {ref}",
                        None if got_out == ref else d.end["seq"]))
    return checks


def tlc_pattern(d: DerivedPatterns) -> Pattern | None:
    """The effective execution for TLC trace validation: restored forced checkpoints made basic.

    A rolled-back process resumes from its restored checkpoint; if that checkpoint was forced, the
    delivery it preceded was undone, so in the effective execution it is a given checkpoint.
    """
    if d.effective is None:
        return None
    evs = tuple(Event(ev.process, CHECKPOINT) if (ev.kind == CHECKPOINT and k in d.restored_positions) else ev
                for k, ev in enumerate(d.effective.events))
    return Pattern(d.effective.processes, evs)
