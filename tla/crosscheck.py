"""Cross-checks between TLC and the Python reference implementations.

A TLC counterexample of ``CIC.tla`` or ``RecoveryLine.tla`` is turned back into a pattern on
which the Python reference must see the same violation (a useless checkpoint and the same forced
checkpoints; for a broken recovery-line variant, a line that differs from the reference's, which
is the maximum consistent cut). See docs/internals/tla.md#crosscheck and
``specs/tla.md#crosscheck``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
from rollcheck.tla.runner import TraceState

__all__ = [
    "CrossCheck",
    "pattern_from_cic_trace",
    "pattern_from_recovery_trace",
    "crosscheck_cic",
    "crosscheck_recovery",
    "propagation_line",
]


@dataclass
class CrossCheck:
    """The outcome of one cross-check."""

    agrees: bool
    detail: str
    pattern: Pattern | None = None
    pattern_path: str | None = None
    picture_path: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)


def _proc_order(names: list[str]) -> dict[str, int]:
    return {n: k for k, n in enumerate(sorted(names, key=lambda s: (len(s), s)))}


def pattern_from_cic_trace(trace: list[TraceState]) -> Pattern:
    """Rebuild the pattern of a ``CIC.tla`` counterexample from its state sequence.

    Processes are the model values (``p0``, ``p1``, ...) in name order; message ``k`` of the
    model is called ``m<k>``.

    Raises
    ------
    InvalidInputError
        If two consecutive states do not differ by exactly one event of the model.
    """
    if not trace:
        raise InvalidInputError("empty counterexample", location="trace")
    first = trace[0].values
    order = _proc_order([str(p) for p in first["ck"]])
    events: list[Event] = []
    for k in range(1, len(trace)):
        a, b = trace[k - 1].values, trace[k].values
        if trace[k].stuttering or trace[k].back_to is not None:
            continue
        new = set(b["net"]) - set(a["net"])
        gone = set(a["net"]) - set(b["net"])
        rose = [p for p in b["ck"] if b["ck"][p] != a["ck"][p]]
        if new and not gone:
            (m,) = new
            events.append(Event(order[str(m["from"])], SEND, f"m{m['id']}", order[str(m["to"])]))
        elif gone and not new:
            (m,) = gone
            dst = order[str(m["to"])]
            if rose:
                events.append(Event(dst, CHECKPOINT, forced=True))
            events.append(Event(dst, DELIVER, f"m{m['id']}"))
        elif rose and len(rose) == 1:
            events.append(Event(order[str(rose[0])], CHECKPOINT))
        elif a != b:
            raise InvalidInputError(f"state {k + 1} is not one CIC step away from state {k}", location="trace")
    names = [n for n, _ in sorted(order.items(), key=lambda kv: kv[1])]
    return Pattern(tuple(names), tuple(events))


def pattern_from_recovery_trace(trace: list[TraceState]) -> Pattern:
    """Rebuild the pattern of a ``RecoveryLine.tla`` counterexample (processes ``P0..``)."""
    if not trace:
        raise InvalidInputError("empty counterexample", location="trace")
    ck0 = trace[0].values["ck"]
    n = len(ck0)
    events: list[Event] = []
    for k in range(1, len(trace)):
        a, b = trace[k - 1].values, trace[k].values
        if trace[k].stuttering or trace[k].back_to is not None:
            continue
        ma, mb = a["msgs"], b["msgs"]
        if len(mb) == len(ma) + 1:
            m = mb[-1]
            events.append(Event(int(m["s"]), SEND, f"m{len(mb)}", int(m["r"])))
            continue
        changed = [j for j in range(len(ma)) if ma[j] != mb[j]]
        if changed:
            j = changed[0]
            events.append(Event(int(mb[j]["r"]), DELIVER, f"m{j + 1}"))
            continue
        diff = [i for i in b["ck"] if b["ck"][i] != a["ck"][i]]
        if len(diff) == 1:
            events.append(Event(int(diff[0]), CHECKPOINT))
        elif a != b:
            raise InvalidInputError(f"state {k + 1} is not one step away from state {k}", location="trace")
    return Pattern(tuple(f"P{i}" for i in range(n)), tuple(events))


def _save(p: Pattern, out_dir: Path | None, stem: str, zcycles: bool) -> tuple[str | None, str | None]:
    if out_dir is None:
        return None, None
    from rollcheck.pyimpl.patternio import dump_pattern
    from rollcheck.pyimpl.render import render_pattern

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.json"
    dump_pattern(p, path)
    pic = out_dir / f"{stem}.png"
    render_pattern(p, pic, zcycles=zcycles, title=f"TLC counterexample: {stem}")
    return str(path), str(pic)


def crosscheck_cic(trace: list[TraceState], protocol: str, out_dir: Path | None = None,
                   stem: str | None = None) -> CrossCheck:
    """Confirm a ``CIC.tla`` NoUseless counterexample with the Python reference."""
    from rollcheck.pyimpl.protocols import run_protocol
    from rollcheck.pyimpl.protocols.run import strip_forced
    from rollcheck.pyimpl.zpaths import useless_checkpoints

    p = pattern_from_cic_trace(trace)
    useless = useless_checkpoints(p)
    rerun = run_protocol(protocol, strip_forced(p)).pattern
    same_forcing = rerun == p
    path, pic = _save(p, out_dir, stem or f"cic-{protocol}", True)
    names = [p.checkpoint_name(c) for c in useless]
    ok = bool(useless) and same_forcing
    detail = (
        f"{len(p.events)} events; Python finds useless {', '.join(names) or 'none'}; "
        f"Python {protocol} {'takes the same' if same_forcing else 'takes DIFFERENT'} forced checkpoints"
    )
    return CrossCheck(ok, detail, p, path, pic, {"useless": names, "same_forcing": same_forcing})


def _raw_pattern(state: dict[str, Any]) -> tuple[list[int], list[tuple[int, int, int, int]]]:
    """(ck, [(s, r, sx, dy)]) of a ``RecoveryLine.tla`` state, with process indices as ints."""
    ckv = state["ck"]
    n = len(ckv)
    ck = [int(ckv[i]) for i in range(n)]
    msgs = [(int(m["s"]), int(m["r"]), int(m["sx"]), int(m["dy"])) for m in state["msgs"]]
    return ck, msgs


def _tops(ck: list[int], failed: tuple[int, ...], virtual: bool) -> list[int]:
    return [c + 1 if (virtual and i not in failed) else c for i, c in enumerate(ck)]


def _consistent(msgs: list[tuple[int, int, int, int]], cut: tuple[int, ...]) -> bool:
    """No delivered message is an orphan: received before the cut, sent after it."""
    return not any(dy >= 0 and dy < cut[r] and sx >= cut[s] for s, r, sx, dy in msgs)


def _max_consistent(ck: list[int], msgs: list[tuple[int, int, int, int]], failed: tuple[int, ...],
                    virtual: bool) -> tuple[int, ...]:
    """The maximum consistent cut under the failure set, by brute force over every cut."""
    best: tuple[int, ...] | None = None
    for cut in itertools.product(*(range(t + 1) for t in _tops(ck, failed, virtual))):
        if _consistent(msgs, cut) and (best is None or all(c >= b for c, b in zip(cut, best, strict=True))):
            best = cut
    assert best is not None  # the all-zero cut is always consistent
    return best


def propagation_line(ck: list[int], msgs: list[tuple[int, int, int, int]], failed: tuple[int, ...],
                     virtual: bool, variant: str = "correct") -> tuple[int, ...]:
    """Rollback propagation on the checkpoint graph as ``RecoveryLine.tla`` states it.

    Its broken variants are included (``single-pass``: one marking round; ``no-local-edges``: no
    C[i,x] -> C[i,x+1] edges). A second encoding of the model's ``Line(F)``, used to confirm a
    mutant's counterexample.

    Examples
    --------
    >>> ck, msgs = [1, 0], [(0, 1, 1, 0)]   # P0 checkpoints, then sends m to P1
    >>> propagation_line(ck, msgs, (0,), True)
    (1, 0)
    """
    n = len(ck)
    top = _tops(ck, failed, virtual)

    def avail(node: tuple[int, int]) -> bool:
        return node[1] <= top[node[0]]

    local = [] if variant == "no-local-edges" else [((i, x), (i, x + 1)) for i in range(n) for x in range(ck[i] + 1)]
    mess = [((s, sx), (r, dy + 1)) for s, r, sx, dy in msgs if dy >= 0]
    succ: dict[tuple[int, int], set[tuple[int, int]]] = {}
    for a, b in local + mess:
        if avail(a) and avail(b):
            succ.setdefault(a, set()).add(b)
    root = list(top)
    while True:
        frontier = {b for i in range(n) for b in succ.get((i, root[i]), ())}
        marked = set(frontier)
        while frontier:
            frontier = {b for a in frontier for b in succ.get(a, ()) if b not in marked}
            marked |= frontier
        root2 = []
        for i in range(n):
            if (i, root[i]) in marked:
                unmarked = [x for x in range(root[i] + 1) if (i, x) not in marked]
                root2.append(max(unmarked) if unmarked else 0)
            else:
                root2.append(root[i])
        if root2 == root or variant == "single-pass":
            return tuple(root2)
        root = root2


def crosscheck_recovery(trace: list[TraceState], out_dir: Path | None = None,
                        stem: str = "recovery-line", virtual: bool = True,
                        variant: str | None = None) -> CrossCheck:
    """Confirm a ``RecoveryLine.tla`` mutant counterexample with the Python reference.

    On the pattern of the counterexample's last state, for every nonempty failure set: the Python
    reference line (:func:`rollcheck.pyimpl.recovery.recovery_line`) must equal the maximum
    consistent cut by brute force, and — when ``variant`` names the model's broken variant — that
    variant's line (:func:`propagation_line`) must differ from it for at least one failure set:
    the mutant, not the reference, is wrong there.
    """
    from rollcheck.pyimpl.recovery import recovery_line

    p = pattern_from_recovery_trace(trace)
    ck, msgs = _raw_pattern(trace[-1].values)
    bad: list[str] = []
    wrong: list[str] = []
    checked = 0
    for r in range(1, p.n + 1):
        for failed in itertools.combinations(range(p.n), r):
            best = _max_consistent(ck, msgs, failed, virtual)
            line = tuple(recovery_line(p, failed, virtual=virtual).line)
            checked += 1
            if line != best:
                bad.append(f"failed={failed}: Python line {line}, maximum consistent {best}")
            if variant is not None:
                mline = propagation_line(ck, msgs, failed, virtual, variant)
                if mline != best:
                    wrong.append(f"failed={failed}: {variant} gives {mline}, maximum consistent {best}"
                                 f"{'' if _consistent(msgs, mline) else ' (inconsistent)'}")
    path, pic = _save(p, out_dir, stem, False)
    mutant_wrong = variant is None or bool(wrong)
    ok = not bad and checked > 0 and mutant_wrong
    if ok:
        detail = (f"{len(p.events)} events; Python recovery line is the maximum consistent cut for all "
                  f"{checked} failure sets")
        if variant is not None:
            detail += f"; {variant} is wrong at {wrong[0]}"
    else:
        detail = "; ".join(bad) or (f"{variant} gives the maximum consistent cut for every failure set "
                                    "of this counterexample: nothing confirms it is wrong")
    return CrossCheck(ok, detail, p, path, pic,
                      {"failure_sets": checked, "mutant_wrong": wrong, "reference_wrong": bad})
