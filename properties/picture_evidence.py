"""What a killed mutant's violation names, as the evidence a space-time diagram draws.

:func:`pattern_evidence` reads the violation's text (a snapshot cut with its orphans, a failure
with the recovery line and the wrongly restored checkpoint, useless checkpoints) into arguments of
:func:`rollcheck.pyimpl.render.render_pattern` with a ``why`` sentence for the caption;
:func:`crop_to_evidence` cuts a pattern too large to draw down to that evidence.

Examples
--------
>>> class Spec:
...     name = "m1"
>>> why(Spec(), "foundation-x: PropertyViolation: the line is wrong")
'm1 is killed: the line is wrong'
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["why", "pattern_evidence", "crop_to_evidence"]


def why(spec: Any, detail: str) -> str:
    """``<mutant> is killed: <the violation, without the property's prefix>``."""
    text = re.sub(r"^[\w-]+: PropertyViolation: ", "", detail or "").strip()
    return f"{spec.name} is killed: {text[:240]}" if text else f"{spec.name} is killed"



def crop_to_evidence(p: Any, found: dict[str, Any], title: str) -> tuple[Any, str]:
    """A pattern too large to draw event by event, cut down to its evidence.

    The sender and the receiver of the first orphan, up to their snapshot checkpoints and the
    orphan's delivery, so that the diagram can show and name them (the caption says what was
    left out).
    """
    from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
    from rollcheck.pyimpl.render import MAX_DETAILED_MESSAGES, MAX_DETAILED_PROCESSES

    cuts = list((found.get("other_lines") or {}).items())
    if (p.num_messages <= MAX_DETAILED_MESSAGES and p.n <= MAX_DETAILED_PROCESSES) or len(cuts) != 1:
        return p, title
    label, cut = cuts[0]
    by_id = p.message_by_id
    first = next((by_id[m] for m in found.get("highlight", []) if m in by_id), None)
    if first is None or first.deliver_event is None:
        return p, title
    keep = sorted({first.sender, first.receiver})
    end = max([first.deliver_event] + [p.checkpoint_event(i, cut[i]) for i in keep if cut[i] <= p.last_index(i)])
    new_index = {old: k for k, old in enumerate(keep)}
    events = []
    for e in p.events[: end + 1]:
        if e.process not in new_index:
            continue
        if e.kind == CHECKPOINT:
            events.append(Event(new_index[e.process], CHECKPOINT, forced=e.forced))
        elif e.kind == SEND and e.to in new_index:
            events.append(Event(new_index[e.process], SEND, e.message, new_index[e.to]))
        elif e.kind == DELIVER and e.message in by_id and by_id[e.message].sender in new_index:
            events.append(Event(new_index[e.process], DELIVER, e.message))
    q = Pattern(tuple(p.processes[i] for i in keep), tuple(events))
    if q.num_messages > MAX_DETAILED_MESSAGES:
        return p, title
    kept = {m.id for m in q.messages}
    found["other_lines"] = {label: tuple(cut[i] for i in keep)}
    found["highlight"] = [m for m in found.get("highlight", []) if m in kept]
    found["why"] = found.get("why", "") + (f". Drawn: only {' and '.join(q.processes)} (the orphan's sender and "
                                           f"receiver), their events up to the snapshot; the whole run has "
                                           f"{p.n} processes and {p.num_messages} messages")
    return q, title


_SNAPSHOT = re.compile(r"snapshot (\d+) cut \(([\d, ]+)\):? (?:has )?orphans \[([^\]]*)\]")
_RESTORES = re.compile(r"restores C\[(\d+),(\d+)\], not its last checkpoint (\d+) \(line \(([\d, ]+)\)\)")
_FAILED = re.compile(r"fail=([^@\s]+)@")
_USELESS = re.compile(r"useless checkpoints?(?:\(s\))? \[?([\w.:, ']+)\]?")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def pattern_evidence(spec: Any, p: Any, detail: str) -> dict[str, Any]:
    """What the violation in ``detail`` names, as arguments of ``render_pattern``.

    The snapshot cut with its orphans, the failure with the recovery line and the wrongly
    restored checkpoint, or the useless checkpoints; and a ``why`` sentence naming them for the
    caption.
    """
    out: dict[str, Any] = {}
    m = _SNAPSHOT.search(detail)
    if m:
        k, cut = int(m.group(1)), _ints(m.group(2))
        orphans = re.findall(r"m\d+", m.group(3))
        if len(cut) == p.n:
            out["other_lines"] = {f"snapshot {k}": cut}
        if orphans:
            out["highlight"] = orphans
            first = orphans[0] + (f" (and {len(orphans) - 1} more)" if len(orphans) > 1 else "")
            out["why"] = (f"{spec.name} is killed: orphan {first} in snapshot {k} — sent after its sender's "
                          f"snapshot and delivered before its receiver's")
        else:
            out["why"] = f"{spec.name} is killed: snapshot {k} is inconsistent"
        return out
    m = _RESTORES.search(detail)
    if m:
        f, restored, last, line = int(m.group(1)), int(m.group(2)), int(m.group(3)), _ints(m.group(4))
        fm = _FAILED.search(detail)
        name = fm.group(1) if fm else None
        if name is not None and name in p.processes:
            f = p.process_index(name)
        if 0 <= f < p.n and len(line) == p.n:
            out.update(failed=(f,), line=line, highlight_checkpoints=[(f, restored)])
            out["why"] = (f"{spec.name} is killed: {p.processes[f]} fails and the recovery line rolls it back to "
                          f"C{restored}, not its last checkpoint C{last} (ringed in red): the rollback propagates "
                          "along the Z-cycles below (domino effect)")
        return out
    m = _USELESS.search(detail)
    if m:
        out["why"] = f"{spec.name} is killed: useless checkpoint(s) {m.group(1).strip()}"
    else:
        out["why"] = why(spec, detail)
    return out

