"""The minimiser's searches: the smallest input that still shows a finding.

:func:`bisect_fewest` finds the fewest first records (Flink), :func:`shrink_batches` the fewest
batches and rows per batch (Spark); both re-run the cell a bounded number of times.
See docs/internals/infra.md#matrix-shrink.

References
----------
Zeller & Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", IEEE TSE 28(2), 2002.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["bisect_fewest", "shrink_batches"]

T = TypeVar("T")


def bisect_fewest(full: int, shows: Callable[[int], tuple[bool, T]], runs: int) -> tuple[int, list[T]]:
    """The fewest first records with which ``shows(n)`` still holds.

    At most ``runs`` calls; ``full`` (which showed it) when no smaller size did.

    Parameters
    ----------
    full : int
        The size that showed it.
    shows : callable
        ``shows(n) -> (held, what)``: one run with the first ``n`` records.
    runs : int
        The most calls.

    Returns
    -------
    (int, list)
        The smallest size that showed it, and what each call returned besides its answer.

    Examples
    --------
    >>> best, sizes = bisect_fewest(100, lambda n: (n >= 7, n), 6)
    >>> best, sizes
    (7, [50, 25, 12, 6, 9, 7])
    >>> bisect_fewest(100, lambda n: (False, n), 3)
    (100, [50, 75, 87])
    """
    best, lo = full, 0
    tries: list[T] = []
    cand = full // 2
    while len(tries) < runs and lo < cand < best and cand >= 1:
        ok, info = shows(cand)
        tries.append(info)
        if ok:
            best = cand
            cand = max(lo + 1, cand // 2) if lo == 0 else (lo + cand) // 2
        else:
            lo = cand
            cand = (lo + best) // 2
    return best, tries


def shrink_batches(rows: Sequence[Sequence[Any]], fail_at: int,
                   still_fails: Callable[[list[list[Any]], int], bool], max_runs: int) -> tuple[list[list[Any]], int, int]:
    """The fewest batches and rows per batch with which ``still_fails(batches, fail_at)`` holds.

    Parameters
    ----------
    rows : sequence of sequence
        The batches of rows that fail.
    fail_at : int
        The batch the failure strikes in.
    still_fails : callable
        ``still_fails(batches, fail_at) -> bool``: one run.
    max_runs : int
        The most runs.

    Returns
    -------
    (list, int, int)
        The smallest input found, the failing batch in it, and how many re-runs were spent.

    Examples
    --------
    >>> data = [[4 * b + i for i in range(4)] for b in range(5)]
    >>> best, k, runs = shrink_batches(data, 2, lambda bs, k: 9 in bs[k], 6)
    >>> best, k, runs
    ([[9]], 0, 5)
    """
    runs = 0

    def fails(cand: list[list[Any]], k: int) -> bool:
        nonlocal runs
        runs += 1
        return still_fails(cand, k)

    full = [list(b) for b in rows]
    best, k = full, fail_at
    for n in range(k + 1, len(full)):  # the batches after the failing one first
        if runs >= max_runs:
            break
        if fails(full[:n], k):
            best = full[:n]
            break
    if k > 0 and runs < max_runs and fails(best[k:], 0):  # then those before it
        best, k = best[k:], 0
    for b in range(len(best)):  # then fewer rows per batch: a half while it fails
        while len(best[b]) > 1 and runs < max_runs:
            half = len(best[b]) // 2
            for part in (best[b][:half], best[b][half:]):
                cand = [list(x) for x in best]
                cand[b] = list(part)
                if runs < max_runs and fails(cand, k):
                    best = cand
                    break
            else:
                break
    return best, k, runs
