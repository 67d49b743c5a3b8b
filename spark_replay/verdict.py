"""The verdict of a replay: named checks, each holding, violated or inconclusive.

A :class:`Check` holds (``ok`` true), is violated (``ok`` false, naming the first offending event
by its ``seq`` when there is one) or is *inconclusive* (``ok`` None: the thing to check did not
happen, e.g. a requested failure that never fired). A :class:`ReplayResult` is conformant iff
every check holds, not conformant as soon as one is violated, and inconclusive (``conformant``
None, exit code 3) when none is violated but one is inconclusive: an inconclusive replay is never
reported as a pass.

Examples
--------
>>> r = ReplayResult("x", [Check("a", True, "fine"), Check("b", None, "did not happen")], False, None, 2)
>>> r.conformant, r.exit_code
(None, 3)
>>> ReplayResult("x", [Check("a", False, "bad", 7), Check("b", None, "-")], False, None, 9).exit_code
1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Check", "ReplayResult"]


@dataclass
class Check:
    """One conformance check: its name, verdict (None = inconclusive), explanation and first
    offending event."""

    name: str
    ok: bool | None
    detail: str
    offending_seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "ok": self.ok, "detail": self.detail}
        if self.offending_seq is not None:
            d["offending_seq"] = self.offending_seq
        return d


@dataclass
class ReplayResult:
    """The verdict on a trace (the JSON document of ``rollcheck spark replay --json``)."""

    source: str
    checks: list[Check]
    truncated: bool
    truncated_after_seq: int | None
    events: int

    @property
    def conformant(self) -> bool | None:
        """True iff every check holds; False if one is violated; None (inconclusive) otherwise."""
        if any(c.ok is False for c in self.checks):
            return False
        if not self.checks or any(c.ok is None for c in self.checks):
            return None
        return True

    @property
    def inconclusive(self) -> bool:
        return self.conformant is None

    @property
    def exit_code(self) -> int:
        """0 conformant, 1 a violation, 3 inconclusive (nothing violated, something unchecked)."""
        c = self.conformant
        return 0 if c is True else 1 if c is False else 3

    @property
    def first_offending_seq(self) -> int | None:
        bad = [c.offending_seq for c in self.checks if c.ok is False and c.offending_seq is not None]
        return min(bad) if bad else None

    def to_json(self) -> dict[str, Any]:
        return {"conformant": self.conformant, "truncated": self.truncated,
                "inconclusive": self.inconclusive,
                "checks": [c.to_json() for c in self.checks],
                "first_offending_seq": self.first_offending_seq,
                "source": self.source, "events": self.events,
                "truncated_after_seq": self.truncated_after_seq}
