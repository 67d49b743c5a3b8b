"""Recovery after one fail-stop failure: recovery line, rollback, channel clearing, log replay.

At the failure time: the recovery line of the pattern so far
(:func:`rollcheck.pyimpl.recovery.recovery_line`, with or without virtual checkpoints) is
restored; logs of failed processes are lost unless persistent; a channel is flushed exactly when
both its ends roll back (FERDiS §7.2.6 case A); receivers that rolled back get the missing
sequence numbers replayed from the sender's log (or the recorded channel state), lost ones are
skipped, duplicates dropped; an in-progress snapshot is aborted. Step by step:
``specs/simulate.md#recovery``. Theorems checked on simulated runs:
``specs/simulate.md#t-exactly-once``, ``#t-at-most-once`` and ``#t-clearing``.

References
----------
.. [1] FERDiS paper, §7.2.4 (coordinator), §7.2.5 (recovery line, virtual checkpoints), §7.2.6
   (post-rollback channel state, cases A–C), §7.2.8 (message-log replay, sequence numbers,
   deduplication, volatile logs and lost messages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcheck.pyimpl.errors import InternalError
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.recovery import RecoveryLine, recovery_line
from rollcheck.pyimpl.simulate.state import WAKE, EngineView, Msg

__all__ = ["Recovery", "recover", "lost_from_pattern"]


@dataclass(frozen=True)
class Recovery:
    """What one recovery did.

    Attributes
    ----------
    failed : int
        The failed process.
    time : float
        Failure (and recovery) time.
    pattern : Pattern
        The pattern of the run up to the failure.
    line : RecoveryLine
        The recovery line on ``pattern``.
    lost : int
        Messages a rolled-back receiver needed that neither a log nor a recorded channel state
        held (computed from sequence numbers).
    replayed : int
        Messages re-sent from logs or recorded channel state.
    cleared : int
        Messages flushed from channels whose two ends rolled back.
    rollback_time : dict
        Per rolled-back process name: failure time minus the restored checkpoint's time.
    """

    failed: int
    time: float
    pattern: Pattern
    line: RecoveryLine
    lost: int
    replayed: int
    cleared: int
    rollback_time: dict[str, float]


def lost_from_pattern(p: Pattern, line: RecoveryLine, failed: int) -> int:
    """Lost messages predicted from the pattern alone when the failed process's log is volatile.

    They are the line's in-transit messages sent by the failed process: its log is gone, and what
    was in flight on its connections was lost with them.

    Parameters
    ----------
    p : Pattern
        The run's pattern.
    line : RecoveryLine
        The restored line.
    failed : int
        The failed process.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); m = b.send(0, 1); b.checkpoint(0); b.checkpoint(1)
    1
    1
    >>> b.deliver(1, m); p = b.build()
    >>> lost_from_pattern(p, recovery_line(p, [0], virtual=False), failed=0)
    1
    """
    by_id = p.message_by_id
    return sum(1 for mid in line.in_transit if by_id[mid].sender == failed)


def recover(eng: EngineView, failed: int) -> Recovery:
    """Perform the recovery of ``eng`` after ``failed`` crashed at ``eng.now`` (see module doc).

    Raises
    ------
    InternalError
        The engine no longer records its pattern (a second failure in one run: a bug).
    """
    cfg, topo, now = eng.cfg, eng.topo, eng.now
    if eng.builder is None:
        raise InternalError("recovery called twice in one run (the pattern was already closed)")
    pattern = eng.builder.build()
    eng.builder = None
    rl = recovery_line(pattern, [failed], virtual=cfg.virtual)
    rolled = set(rl.rolled_back)
    names = topo.process_names

    if not cfg.persistent_logs:
        losers = rolled if cfg.variant.volatile_logs_of_rolled_back else {failed}
        for i in losers:
            for c in topo.outputs[i]:
                eng.logs[c] = {}
    rollback_time: dict[str, float] = {}
    for i in sorted(rolled):
        pr = eng.procs[i]
        sv = pr.saved[rl.line[i]]
        rollback_time[names[i]] = now - sv.time
        if isinstance(pr.app, list):
            del pr.app[sv.app:]
        else:
            pr.app = dict(sv.app)
        pr.out_seq = dict(sv.out_seq)
        pr.in_seq = dict(sv.in_seq)
        for c, k in sv.applied.items():
            del pr.applied[c][k:]
        pr.proto = sv.proto
        pr.offset = sv.offset
        del pr.saved[rl.line[i] + 1:]
        pr.inc += 1
        pr.busy_until = now
        pr.next_emit = now
        pr.skip = {}
        if pr.timer is not None:
            eng.restart_timer(pr)

    cleared = 0
    flushed: set[int] = set()
    for ch in topo.channels:
        u, v = ch.src, ch.dst
        if u in rolled:
            top = eng.procs[u].out_seq[ch.index]
            eng.logs[ch.index] = {s: x for s, x in eng.logs[ch.index].items() if s <= top}
            eng.undone[ch.index] = (eng.procs[u].inc, top)
        q = eng.chan[ch.index]
        if failed in (u, v):
            # fail-stop: the failed instance's connections are lost with their contents
            cleared += sum(1 for m in q if not m.is_marker)
            q.clear()
            flushed.add(ch.index)
        elif u in rolled and v in rolled and cfg.variant.clear_channels:
            cleared += sum(1 for m in q if not m.is_marker)
            q.clear()
            flushed.add(ch.index)
        elif any(m.is_marker for m in q):
            eng.chan[ch.index] = type(q)(m for m in q if not m.is_marker)

    # abort an in-progress snapshot
    if eng.cl is not None:
        for pr in eng.procs:
            pr.cl = eng.cl.initial(pr.pid, topo.inputs[pr.pid], topo.outputs[pr.pid])._replace(snapshot=eng.snapshot_id)
            pr.recording = {}
        eng.snap_pending = set()

    lost = replayed = 0
    for ch in topo.channels:
        u, v = ch.src, ch.dst
        if v not in rolled and ch.index not in flushed:
            continue
        rv = eng.procs[v]
        recorded: dict[int, Any] = {}
        if v in rolled:
            for s, _, payload in rv.saved[rl.line[v]].recorded.get(ch.index, ()):
                recorded[s] = payload
        log = eng.logs[ch.index]
        first = rv.in_seq[ch.index] + cfg.variant.replay_offset
        last = eng.procs[u].out_seq[ch.index]
        for s in range(first, last + 1):
            if s in log:
                payload = log[s]
            elif s in recorded:
                payload = recorded[s]
            else:
                lost += 1
                rv.skip.setdefault(ch.index, set()).add(s)
                continue
            replayed += 1
            eng.enqueue(Msg(ch.index, s, payload, None, None, eng.procs[u].inc, 0.0, replayed=True))
    for pr in eng.procs:
        eng.push(now, WAKE, pr.pid)
    return Recovery(failed, now, pattern, rl, lost, replayed, cleared, rollback_time)
