"""The verdict on a trace: named checks, each ok / violated / not checked, with the offending seq.

References
----------
``specs/formats.md#trace-checks`` (what each check means).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckResult", "TraceReport"]

#: Checks of the recording's own consistency: passing only these does not make a trace conformant.
_FORMAT_ONLY = frozenset({"pattern-valid", "checkpoint-indices"})


@dataclass
class CheckResult:
    """One check: ``ok`` is True (holds), False (violated) or None (nothing was checked).

    Examples
    --------
    >>> CheckResult("log-replay", False, "m3 replayed twice", 17).to_json()["offending_seq"]
    17
    """

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
class TraceReport:
    """All checks of one trace (the ``rollcheck check trace --json`` document).

    ``conformant`` is False when some check is violated, True when none is and at least one check
    other than ``pattern-valid`` held, and None (inconclusive) otherwise: a trace that is merely
    well-formed (``pattern-valid``, ``checkpoint-indices``) has not been checked against anything.
    """

    checks: list[CheckResult] = field(default_factory=list)
    truncated: bool = False
    truncated_after_seq: int | None = None
    events: int = 0
    ended: bool = False
    source: str = ""

    @property
    def conformant(self) -> bool | None:
        if any(c.ok is False for c in self.checks):
            return False
        if any(c.ok is True and c.name not in _FORMAT_ONLY for c in self.checks):
            return True
        return None

    @property
    def first_offending_seq(self) -> int | None:
        bad = [c.offending_seq for c in self.checks if c.ok is False and c.offending_seq is not None]
        return min(bad) if bad else None

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"conformant": self.conformant, "truncated": self.truncated,
                "first_offending_seq": self.first_offending_seq,
                "checks": [c.to_json() for c in self.checks],
                "events": self.events, "truncated_after_seq": self.truncated_after_seq,
                "source": self.source}
