"""Z3 cross-checks of the pattern algorithms (SMT over one integer index per process).

Encoding: ``x_i`` ∈ [0, upper_i] is the checkpoint chosen for P_i (upper_i = last+1 allows V).
For every delivered message m sent in I[s,a] and delivered in I[r,b], "no orphan" is the
implication ``x_r > b → x_s > a`` (if the receiver's state includes the delivery, the sender's
includes the send). Theorems checked: ``specs/theorems.md#t2-netzer-xu`` (a consistent global
checkpoint contains C iff C is not useless) and ``#t5-recovery-line`` (nothing consistent lies
above the recovery line).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from rollcheck.properties.foundation import PITFALLS, expect
from rollcheck.properties.registry import interesting, prop
from rollcheck.properties.strategies import patterns, walk_patterns, weighted, zcycle_patterns
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.recovery import recovery_line
from rollcheck.pyimpl.zpaths import useless_checkpoints

__all__ = ["consistency_solver", "z3_contains_consistent", "z3_above_line"]


def consistency_solver(p: Pattern, upper: Sequence[int]) -> tuple[Any, list[Any]]:
    """A Z3 solver whose models are exactly the consistent cuts of ``p`` below ``upper``."""
    import z3

    xs = [z3.Int(f"x_{i}") for i in range(p.n)]
    s = z3.Solver()
    for i, x in enumerate(xs):
        s.add(x >= 0, x <= upper[i])
    for m in p.messages:
        if m.deliver_interval is not None:
            s.add(z3.Implies(xs[m.receiver] > m.deliver_interval, xs[m.sender] > m.send_interval))
    return s, xs


def z3_contains_consistent(p: Pattern, c: tuple[int, int], solver: tuple[Any, list[Any]] | None = None) -> bool:
    """Whether a consistent global checkpoint (V allowed) contains checkpoint ``c``.

    ``solver`` is ``consistency_solver(p, volatile indices)`` when several checkpoints of ``p`` are
    asked about: each question is then an assumption ``x_i == index`` on the one encoding.
    """
    import z3

    s, xs = solver if solver is not None else consistency_solver(p, [p.volatile_index(i) for i in range(p.n)])
    return s.check(xs[c[0]] == c[1]) == z3.sat


def z3_above_line(p: Pattern, failed: Iterable[int], virtual: bool, line: Sequence[int]) -> tuple[bool, bool]:
    """(line is consistent and available, some consistent cut lies strictly above it)."""
    import z3

    f = set(failed)
    upper = [p.volatile_index(i) if (virtual and i not in f) else p.last_index(i) for i in range(p.n)]
    s, xs = consistency_solver(p, upper)
    s.push()
    s.add(*[x == int(v) for x, v in zip(xs, line, strict=True)])
    line_ok = s.check() == z3.sat
    s.pop()
    s.add(*[x >= int(v) for x, v in zip(xs, line, strict=True)])
    s.add(z3.Or(*[x > int(v) for x, v in zip(xs, line, strict=True)]))
    above = s.check() == z3.sat
    return line_ok, above


#: Larger than the brute-force oracle can enumerate comfortably.
medium_patterns = weighted(
    (3, zcycle_patterns(max_processes=5, max_steps=16)),
    (1, walk_patterns(max_processes=3, max_steps=50)),
    (1, walk_patterns(max_processes=5, max_steps=60)),
    (1, patterns(min_processes=2, max_processes=6, max_actions=40, topology=None)),
)


@prop("z3-useless-agrees", target="zpaths", theorem="specs/theorems.md#t2-netzer-xu", area="foundation",
      interesting="a useless checkpoint", floor=0.25)
@example(p=PITFALLS["volatile-needed"])
@given(p=medium_patterns)
def z3_useless_agrees(p: Pattern, useless: Any = useless_checkpoints) -> None:
    """Z3 finds a consistent global checkpoint containing C exactly when C is not useless."""
    flagged = {tuple(c) for c in useless(p)}
    found = False
    solver = consistency_solver(p, [p.volatile_index(i) for i in range(p.n)])
    for c in p.checkpoints(include_initial=False):
        exists = z3_contains_consistent(p, c, solver)
        found = found or not exists
        expect(exists == (tuple(c) not in flagged), f"{p.checkpoint_name(c)}: Z3 sat={exists}, useless={tuple(c) in flagged}", p)
    interesting(found, "a useless checkpoint")


@prop("z3-line-maximal", target="recovery", theorem="specs/theorems.md#t5-recovery-line", area="foundation",
      interesting="a surviving process rolls back")
@given(p=medium_patterns, data=st.data())
def z3_line_maximal(p: Pattern, data: Any, line_fn: Any = recovery_line) -> None:
    """The recovery line is consistent and available, and Z3 finds no consistent cut above it."""
    failed = data.draw(st.frozensets(st.integers(0, p.n - 1), min_size=1), label="failed")
    virtual = data.draw(st.booleans(), label="virtual")
    line = line_fn(p, failed, virtual=virtual).line
    interesting(any(line[i] < p.volatile_index(i) - (0 if virtual else 1) for i in range(p.n) if i not in failed),
                "a surviving process rolls back")
    ok, above = z3_above_line(p, failed, virtual, line)
    expect(ok, f"line {line} is not consistent/available (failed={sorted(failed)}, virtual={virtual})", p)
    expect(not above, f"a consistent cut lies above {line} (failed={sorted(failed)}, virtual={virtual})", p)
