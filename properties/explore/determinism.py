"""Checking that a protocol is deterministic before the explorer relies on it.

:func:`refute_determinism` runs sample schedules twice each and names the first method whose
result differs on the same arguments (state kept outside ``st`` would make verdicts
irreproducible). See docs/internals/properties.md#explore-determinism.

References
----------
``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from rollcheck.properties.explore.calls import (
    NotCopyable,
    ProtocolCalls,
    ProtocolCodeError,
    Watchdog,
    method_codes,
    method_source,
    short_repr,
    snapshot,
)
from rollcheck.properties.explore.engine import CKPT, SEND
from rollcheck.properties.explore.symmetry import random_word

__all__ = ["run_recorded", "refute_determinism", "nondeterminism_on", "NONDETERMINISTIC"]

#: The advice that ends every report of a nondeterministic protocol.
NONDETERMINISTIC = ("the protocol is not deterministic: keep every piece of state in the "
                    "per-process state that the methods receive and return, not in the object, "
                    "the class, a random generator or the clock")

Word = tuple[tuple[int, int, int], ...]


def run_recorded(calls: ProtocolCalls, n: int, word: Sequence[tuple[int, int, int]]
                 ) -> list[tuple[int, str, Any, bytes | None]]:
    """Run ``word`` linearly; per call ``(event, method, result, snapshot of the result)``.

    ``event`` is the word position (-1 for ``initial``). A result that cannot be snapshotted has
    ``None`` (a checking ``calls`` refuses such states before that).

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import BCS
    >>> rec = run_recorded(ProtocolCalls(BCS(), "bcs"), 2, [(0, CKPT, 0), (0, SEND, 1), (1, 2, 1)])
    >>> [(e, m) for e, m, _, _ in rec][2:]
    [(0, 'on_checkpoint'), (1, 'on_send'), (2, 'must_force'), (2, 'on_checkpoint'), (2, 'on_deliver')]
    """
    out: list[tuple[int, str, Any, bytes | None]] = []

    def note(event: int, method: str, value: Any) -> Any:
        try:
            img: bytes | None = snapshot(value)
        except NotCopyable:
            img = None
        out.append((event, method, value, img))
        return value

    st = [note(-1, "initial", calls.initial(i, n)) for i in range(n)]
    pbs: dict[int, tuple[int, Any]] = {}
    for pos, (p, kind, arg) in enumerate(word):
        if kind == CKPT:
            st[p] = note(pos, "on_checkpoint", calls.on_checkpoint(st[p], False))
        elif kind == SEND:
            st[p], pb = note(pos, "on_send", calls.on_send(st[p], arg))
            pbs[pos] = (p, pb)
        else:
            src, pb = pbs[arg]
            forced = note(pos, "must_force", calls.must_force(st[p], src, pb))
            s = note(pos, "on_checkpoint", calls.on_checkpoint(st[p], True)) if forced else st[p]
            st[p] = note(pos, "on_deliver", calls.on_deliver(s, src, pb))
    return out


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` as a plain bool (False when the comparison raises or is not a bool).

    Equal values whose images differ only in how objects are shared (a cache returning the same
    object twice) are the same result.
    """
    try:
        r = a == b
    except Exception:
        return False
    return r is True


def _outcome(calls: ProtocolCalls, n: int, word: Word
             ) -> tuple[list[tuple[int, str, Any, bytes | None]], ProtocolCodeError | None]:
    try:
        return run_recorded(calls, n, word), None
    except ProtocolCodeError as e:
        return [], e


def nondeterminism_on(proto: Any, label: str, n: int, word: Word, *, runs: int = 2
                      ) -> ProtocolCodeError | None:
    """Run ``word`` ``runs`` times; the error naming the first method whose result differed.

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import BCS
    >>> class Moody(BCS):                       # forces on every other call, whatever the input
    ...     calls = 0
    ...     def must_force(self, st, src, pb):
    ...         Moody.calls += 1
    ...         return Moody.calls % 2 == 0
    >>> w = ((0, SEND, 1), (1, 2, 0))
    >>> nondeterminism_on(BCS(), "bcs", 2, w) is None
    True
    >>> print(nondeterminism_on(Moody(), "Moody", 2, w).reason)  # doctest: +ELLIPSIS
    must_force gave different results on the same schedule run twice (False, then True): the protocol is not deterministic...
    """
    calls = ProtocolCalls(proto, label, checking=True)
    first, err = _outcome(calls, n, word)
    for _ in range(runs - 1):
        again, err2 = _outcome(calls, n, word)
        if err is not None or err2 is not None:
            if err is not None and err2 is not None and err.method == err2.method:
                continue  # the same failure each time: not a question of determinism
            bad = err if err is not None else err2
            assert bad is not None
            return ProtocolCodeError(
                f"{bad.reason}, but not when the same schedule was run again: {NONDETERMINISTIC}",
                method=bad.method, kind="nondeterministic", source=bad.source,
                location=bad.location, word=word)
        for (ev, method, v1, img1), (_, _, v2, img2) in zip(first, again, strict=False):
            if img1 != img2 and not _equal(v1, v2):
                return ProtocolCodeError(
                    f"{method} gave different results on the same schedule run twice "
                    f"({short_repr(v1)}, then {short_repr(v2)}): {NONDETERMINISTIC}",
                    method=method, kind="nondeterministic",
                    source=method_source(label, type(proto).__name__, method),
                    location=f"events[{ev}]" if ev >= 0 else "initial state", word=word)
        if len(first) != len(again):  # cannot happen without a differing result: belt and braces
            return calls.fail("must_force", "nondeterministic",
                              f"the same schedule made a different number of calls: {NONDETERMINISTIC}")
    return None


def refute_determinism(proto: Any, label: str, call_timeout: float | None = 10.0, *,
                       processes: Iterable[int] = (2, 3, 4), samples: int = 40,
                       seed: int = 0) -> ProtocolCodeError | None:
    """Run ``samples`` random schedules per process count twice each; the first difference.

    Returns a :class:`ProtocolCodeError` (kind ``"nondeterministic"``) naming the method, with
    the schedule in ``word``; None when every sample gave the same results twice.

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import HMNR
    >>> refute_determinism(HMNR(), "hmnr", processes=[2, 5]) is None
    True
    >>> import random
    >>> class Dice(HMNR):
    ...     def must_force(self, st, src, pb):
    ...         return random.random() < 0.5
    >>> refute_determinism(Dice(), "Dice").method
    'must_force'
    """
    rng = random.Random(seed)
    with Watchdog(method_codes(proto), call_timeout):
        for n in sorted(set(processes)):
            for _ in range(samples):
                word = random_word(rng, n, rng.randint(max(4, n), max(16, 3 * n)))
                err = nondeterminism_on(proto, label, n, word)
                if err is not None:
                    return err
    return None
