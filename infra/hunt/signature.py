"""What makes a cell outcome a candidate finding, and the signature findings are deduplicated by.

A candidate is an outcome with verdict ``violated`` attributed to the engine. Its signature is
``violated checks | exception class or "-" | operator kinds``, each part sorted and joined by
``+``; the pre-signature is the same over the program as generated, the signature over the
minimised program.

Examples
--------
>>> o = CellOutcome("violated", {"exactly-once": "violated", "batch-equivalent": "violated",
...                              "recovery-succeeded": "held"}, attributed_to="engine")
>>> is_candidate(o)
True
>>> signature(o, ("source", "filter", "dedup", "source", "union"))
'batch-equivalent+exactly-once|-|dedup+filter+source+union'
>>> is_candidate(CellOutcome("violated", {"x": "violated"}, attributed_to="user"))
False
"""

from __future__ import annotations

from collections.abc import Iterable

from rollcheck.infra.hunt.adapter import CellOutcome

__all__ = ["is_candidate", "signature", "violated_checks"]


def violated_checks(outcome: CellOutcome) -> tuple[str, ...]:
    """The names of the checks ``outcome`` found violated, sorted."""
    return tuple(sorted(name for name, state in outcome.checks.items() if state == "violated"))


def is_candidate(outcome: CellOutcome) -> bool:
    """Whether ``outcome`` is a candidate finding (violated, attributed to the engine)."""
    return outcome.verdict == "violated" and outcome.attributed_to == "engine"


def signature(outcome: CellOutcome, operators: Iterable[str]) -> str:
    """``checks|exception|operators`` of ``outcome`` seen on a program of ``operators``.

    Parameters
    ----------
    outcome : CellOutcome
        The cell's outcome.
    operators : iterable of str
        The program's operator kinds.

    Returns
    -------
    str
        The signature.
    """
    return "|".join(("+".join(violated_checks(outcome)), outcome.exception or "-",
                     "+".join(sorted(set(operators)))))
