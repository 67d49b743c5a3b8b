"""The typed result of a TLC run: its status, counts, counterexample and source errors.

Outcome rules (``specs/tla.md#runner``): ``ok`` — TLC finished with "no error" *and* found at
least one distinct state; ``violation`` — an invariant or a temporal property is violated;
``deadlock`` — a state without successors; ``error`` — TLC could not evaluate the spec;
``inconclusive`` — timeout, crash, missing jar or Java, zero distinct states, or no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["STATUSES", "SourceError", "TLCResult", "TLCUnavailable", "TraceState"]

STATUSES = ("ok", "violation", "deadlock", "error", "inconclusive")


@dataclass
class TraceState:
    """One state of a counterexample: 1-based position, the action that led to it, the values."""

    number: int
    action: str
    values: dict[str, Any]
    stuttering: bool = False
    back_to: int | None = None  # for a lasso: the state number the behaviour loops back to


@dataclass
class SourceError:
    """A parse or semantic error in a module, with a location when TLC gives one."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    kind: str = "module"  # "module" (the .tla or a module it extends) or "config" (the .cfg)

    def __str__(self) -> str:
        where = ":".join(str(x) for x in (self.file, self.line, self.column) if x is not None)
        return f"{where}: {self.message}" if where else self.message


@dataclass
class TLCResult:
    """What one TLC run established."""

    status: str
    exit_code: int | None = None
    distinct_states: int = 0
    generated_states: int = 0
    depth: int | None = None
    violated: str | None = None  # invariant / property name, when TLC names it
    message: str = ""
    trace: list[TraceState] = field(default_factory=list)
    errors: list[SourceError] = field(default_factory=list)
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        """The ``rollcheck tlc --json`` document (``cli-and-formats.md``) plus extra keys."""
        from rollcheck.tla.values import to_jsonable

        return {
            "status": self.status,
            "distinct_states": self.distinct_states,
            "generated_states": self.generated_states,
            "depth": self.depth,
            "violated": self.violated,
            "message": self.message,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "trace": [
                {"number": s.number, "action": s.action, "stuttering": s.stuttering,
                 "back_to": s.back_to, "state": to_jsonable(s.values)}
                for s in self.trace
            ],
        }


class TLCUnavailable(RuntimeError):
    """Java or the TLC jar cannot be found; the message says what to install."""
