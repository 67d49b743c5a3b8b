"""One verdict model for every check rollcheck runs.

A check ends ``held``, ``violated``, ``unchecked`` or ``not-applicable``; :func:`decide` makes
the verdict: violated, else inconclusive, else conformant (docs/internals/pyimpl-core.md#verdict).

Examples
--------
>>> checks = [Check.held("pattern-valid", "12 events", substantive=False),
...           Check.held("recovery-line", "P0:1, P1:2 restored", examined=1),
...           Check.not_applicable("log-replay", "nothing was in transit")]
>>> decide(checks)
<Verdict.CONFORMANT: 'conformant'>
>>> decide(checks + [Check.unchecked("tlc", "java not found")]).exit_code
3
>>> decide([Check.held("pattern-valid", "0 events", substantive=False)])   # nothing examined
<Verdict.INCONCLUSIVE: 'inconclusive'>
>>> r = Report([Check.violated("tlc", "rejected", offending_seq=15, consequence_of="recovery-line"),
...             Check.violated("recovery-line", "orphan m7", offending_seq=19)])
>>> r.verdict.value, r.first_offending_seq, r.root_cause.name
('violated', 19, 'recovery-line')

References
----------
``specs/verdicts.md`` (the rule and why each state exists).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

__all__ = ["Status", "Verdict", "Check", "Report", "decide", "exit_code", "recording_check",
           "VERDICT_WORDS", "RECORDING_ENDS"]


class Status(StrEnum):
    """The state a single check ended in."""

    HELD = "held"
    VIOLATED = "violated"
    UNCHECKED = "unchecked"
    NOT_APPLICABLE = "not-applicable"


class Verdict(StrEnum):
    """The outcome of a list of checks (see :func:`decide`)."""

    CONFORMANT = "conformant"
    VIOLATED = "violated"
    INCONCLUSIVE = "inconclusive"

    @property
    def exit_code(self) -> int:
        """0 conformant, 1 violated, 3 inconclusive (the CLI's exit codes)."""
        return {"conformant": 0, "violated": 1, "inconclusive": 3}[self.value]

    @property
    def ok(self) -> bool | None:
        """True / False / None: the ``"conformant"`` JSON value of the contract."""
        return {"conformant": True, "violated": False, "inconclusive": None}[self.value]

    def word(self, kind: str = "trace") -> str:
        """The verdict in the words of ``kind`` (``trace``, ``protocol``, ``row``, ``mutant``).

        >>> Verdict.VIOLATED.word("protocol"), Verdict.CONFORMANT.word("row")
        ('unsafe', 'pass')
        """
        try:
            return VERDICT_WORDS[kind][self.value]
        except KeyError:
            raise ValueError(f"unknown verdict vocabulary {kind!r}") from None


#: How each kind of command words the three verdicts.
VERDICT_WORDS: dict[str, dict[str, str]] = {
    "trace": {"conformant": "conformant", "violated": "not-conformant", "inconclusive": "inconclusive"},
    "protocol": {"conformant": "safe", "violated": "unsafe", "inconclusive": "inconclusive"},
    "row": {"conformant": "pass", "violated": "fail", "inconclusive": "inconclusive"},
    "mutant": {"conformant": "survived", "violated": "killed", "inconclusive": "inconclusive"},
}


@dataclass(frozen=True)
class Check:
    """The result of one check.

    Parameters
    ----------
    name : str
        The check's name as users see it (``"recovery-line"``, ``"output-exactly-once"``, ...).
    status : Status
        held / violated / unchecked / not-applicable.
    detail : str
        One line: what was examined, what is wrong, or why it could not run.
    offending_seq : int, optional
        The first offending event (``violated`` only).
    examined : int, optional
        How many things the check examined (events, schedules, states); ``0`` with ``held`` is
        refused: a check that examined nothing has not held.
    substantive : bool
        False for checks of the input's own well-formedness (``pattern-valid``): such a check
        holding does not make a verdict conformant on its own.
    consequence_of : str, optional
        The name of an earlier check whose violation this one follows from.
    data : dict
        Extra JSON-able fields (a witness, a counterexample path, ...).
    """

    name: str
    status: Status
    detail: str = ""
    offending_seq: int | None = None
    examined: int | None = None
    substantive: bool = True
    consequence_of: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a check needs a name")
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))
        if self.status is Status.HELD and self.examined == 0:
            raise ValueError(f"check {self.name!r}: held after examining nothing; use unchecked")
        if self.offending_seq is not None and self.status is not Status.VIOLATED:
            raise ValueError(f"check {self.name!r}: an offending seq belongs to a violation")

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def held(cls, name: str, detail: str = "", *, examined: int | None = None,
             substantive: bool = True, **data: Any) -> Check:
        """A check that examined something and holds (``examined=0`` becomes *unchecked*).

        Parameters
        ----------
        name : str
            The check's name.
        detail : str, optional
            What was found, for the report.
        examined : int, optional
            How many items were examined (None: not counted; 0: nothing, *unchecked*).
        substantive : bool, optional
            False for a check of the input's own well-formedness.
        **data
            Extra fields kept in ``data`` for the report.
        """
        if examined == 0:
            return cls(name, Status.UNCHECKED, detail or "nothing was examined",
                       substantive=substantive, data=data)
        return cls(name, Status.HELD, detail, examined=examined, substantive=substantive, data=data)

    @classmethod
    def violated(cls, name: str, detail: str, *, offending_seq: int | None = None,
                 consequence_of: str | None = None, examined: int | None = None,
                 **data: Any) -> Check:
        """A check that found a violation.

        Parameters
        ----------
        name : str
            The check's name.
        detail : str
            The violation, for the report.
        offending_seq : int, optional
            The ``seq`` of the first offending event.
        consequence_of : str, optional
            The check whose violation this one follows from.
        examined : int, optional
            How many items were examined.
        **data
            Extra fields kept in ``data`` for the report.
        """
        return cls(name, Status.VIOLATED, detail, offending_seq=offending_seq, examined=examined,
                   consequence_of=consequence_of, data=data)

    @classmethod
    def unchecked(cls, name: str, why: str, **data: Any) -> Check:
        """A check the input calls for that could not run (makes the verdict inconclusive).

        Parameters
        ----------
        name : str
            The check's name.
        why : str
            Why it could not run.
        **data
            Extra fields kept in ``data`` for the report.
        """
        return cls(name, Status.UNCHECKED, why, data=data)

    @classmethod
    def not_applicable(cls, name: str, why: str, **data: Any) -> Check:
        """A check the input does not call for (neither a pass nor a gap).

        Parameters
        ----------
        name : str
            The check's name.
        why : str
            Why the input does not call for it.
        **data
            Extra fields kept in ``data`` for the report.
        """
        return cls(name, Status.NOT_APPLICABLE, why, data=data)

    @classmethod
    def from_ok(cls, name: str, ok: bool | None, detail: str = "", *,
                offending_seq: int | None = None, applicable: bool = True) -> Check:
        """Build from the legacy triple ``ok`` True / False / None.

        Parameters
        ----------
        name : str
            The check's name.
        ok : bool or None
            True held, False violated, None not run.
        detail : str, optional
            What was found.
        offending_seq : int, optional
            The ``seq`` of the offending event (when ``ok`` is False).
        applicable : bool, optional
            With ``ok`` None: True gives *unchecked*, False *not applicable*.
        """
        if ok is True:
            return cls.held(name, detail)
        if ok is False:
            return cls.violated(name, detail, offending_seq=offending_seq)
        return cls.unchecked(name, detail) if applicable else cls.not_applicable(name, detail)

    # -- views -------------------------------------------------------------------------------
    @property
    def ok(self) -> bool | None:
        """True held, False violated, None otherwise (the ``"ok"`` JSON key)."""
        return {Status.HELD: True, Status.VIOLATED: False}.get(self.status)

    def as_consequence_of(self, root: str) -> Check:
        """A copy of the check, marked as following from the violation of check ``root``."""
        return replace(self, consequence_of=root)

    def to_json(self) -> dict[str, Any]:
        """The check as its JSON object (``name``, ``ok``, ``status``, ``detail`` and its data)."""
        d: dict[str, Any] = {"name": self.name, "ok": self.ok, "status": self.status.value,
                             "detail": self.detail}
        if self.offending_seq is not None:
            d["offending_seq"] = self.offending_seq
        if self.examined is not None:
            d["examined"] = self.examined
        if self.consequence_of is not None:
            d["consequence_of"] = self.consequence_of
        d.update(self.data)
        return d

    def line(self) -> str:
        """One human line: ``name: status — detail``."""
        tail = f" (seq {self.offending_seq})" if self.offending_seq is not None else ""
        cons = f" [consequence of {self.consequence_of}]" if self.consequence_of else ""
        return f"{self.name}: {self.status.value}{tail}{cons} — {self.detail}"


def decide(checks: Iterable[Check]) -> Verdict:
    """The one verdict rule.

    Violated if any check is violated; inconclusive if nothing was examined (no substantive check
    held) or any check is unchecked; otherwise conformant.

    >>> decide([])
    <Verdict.INCONCLUSIVE: 'inconclusive'>
    >>> decide([Check.not_applicable("x", "no failure")])
    <Verdict.INCONCLUSIVE: 'inconclusive'>
    >>> decide([Check.held("x", "ok", examined=3), Check.violated("y", "bad")])
    <Verdict.VIOLATED: 'violated'>
    """
    checks = list(checks)
    for c in checks:
        if not isinstance(c, Check):
            raise TypeError(f"decide() takes Check objects, not {type(c).__name__}")
    if any(c.status is Status.VIOLATED for c in checks):
        return Verdict.VIOLATED
    if any(c.status is Status.UNCHECKED for c in checks):
        return Verdict.INCONCLUSIVE
    if not any(c.status is Status.HELD and c.substantive for c in checks):
        return Verdict.INCONCLUSIVE
    return Verdict.CONFORMANT


def exit_code(checks: Iterable[Check]) -> int:
    """The CLI's exit code for ``checks``: ``decide(checks).exit_code`` (0, 1 or 3).

    Every command that judges something ends through this function (exit 2 and 4 come from the
    input's and rollcheck's own exceptions, not from a verdict).

    >>> exit_code([Check.held("x", "ok")]), exit_code([Check.unchecked("x", "no java")])
    (0, 3)
    """
    return decide(checks).exit_code


#: How a recording can end (Spark's ``status``, Flink's job state), and what each end means: ``None``
#: for an end that recorded the whole run, else why the recording decides nothing. A recording does
#: not judge the run (its replay does), so no end of a recording is a violation.
RECORDING_ENDS: dict[str, str | None] = {
    "done": None,
    "FINISHED": None,
    "failed": "the query did not run to its end in the attempts allowed",
    "recovery-failed": ("the engine could not restart the query after the failure (the trace "
                        "records it: its replay judges it)"),
    "reference-failed": "the failure-free reference run failed on this release",
    "FAILED": "the job failed and did not finish",
    "CANCELED": "the job was cancelled before it finished",
}


def recording_check(status: str, what: str = "recording") -> Check:
    """The check a recording's end stands for: held when it recorded the whole run, else unchecked.

    Parameters
    ----------
    status : str
        How the recording ended (a key of :data:`RECORDING_ENDS`; another value is read as a run
        that did not end).
    what : str
        The check's name.

    Returns
    -------
    Check

    Examples
    --------
    >>> exit_code([recording_check("done")]), exit_code([recording_check("recovery-failed")])
    (0, 3)
    """
    if status in RECORDING_ENDS and RECORDING_ENDS[status] is None:
        return Check.held(what, f"the run ended {status}")
    why = RECORDING_ENDS.get(status) or "the run did not end"
    return Check.unchecked(what, f"the recording ended {status!r}: {why}")


@dataclass
class Report:
    """A list of checks on one subject, with the verdict :func:`decide` gives them.

    ``extra`` holds command-specific JSON fields (``truncated``, ``events``, ``source``, ...),
    written next to the common ones by :meth:`to_json`.
    """

    checks: list[Check] = field(default_factory=list)
    subject: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, check: Check) -> Check:
        """Append ``check`` and return it."""
        self.checks.append(check)
        return check

    def check(self, name: str) -> Check | None:
        """The check called ``name``, if present."""
        return next((c for c in self.checks if c.name == name), None)

    @property
    def verdict(self) -> Verdict:
        """The verdict :func:`decide` gives the checks."""
        return decide(self.checks)

    @property
    def conformant(self) -> bool | None:
        """True conformant, False violated, None inconclusive."""
        return self.verdict.ok

    @property
    def exit_code(self) -> int:
        """The CLI's exit code of the verdict (0, 1 or 3)."""
        return self.verdict.exit_code

    @property
    def root_cause(self) -> Check | None:
        """The violation to fix first (None when nothing is violated).

        The earliest (by offending seq) violation that is not a consequence of another one.
        """
        bad = [c for c in self.checks if c.status is Status.VIOLATED]
        if not bad:
            return None
        names = {c.name for c in bad}
        roots = [c for c in bad if c.consequence_of is None or c.consequence_of not in names] or bad

        def key(c: Check) -> tuple[int, int]:
            return (0, c.offending_seq) if c.offending_seq is not None else (1, 0)

        return min(roots, key=key)

    @property
    def first_offending_seq(self) -> int | None:
        """The offending seq of the root cause (None when it has none)."""
        rc = self.root_cause
        if rc is None:
            return None
        if rc.offending_seq is not None:
            return rc.offending_seq
        seqs = [c.offending_seq for c in self.checks
                if c.status is Status.VIOLATED and c.offending_seq is not None]
        return min(seqs) if seqs else None

    @property
    def why_inconclusive(self) -> str | None:
        """For an inconclusive verdict, one line naming what could not be checked."""
        if self.verdict is not Verdict.INCONCLUSIVE:
            return None
        gaps = [f"{c.name}: {c.detail}" for c in self.checks if c.status is Status.UNCHECKED]
        return "; ".join(gaps) if gaps else "nothing was examined"

    def to_json(self, kind: str = "trace") -> dict[str, Any]:
        """The report as the JSON object the commands write.

        Parameters
        ----------
        kind : str
            What is judged (``"trace"``, ``"protocol"``, ...); it picks the verdict's word.

        Returns
        -------
        dict
            ``conformant``, ``verdict``, ``first_offending_seq``, ``checks``, ``root_cause`` and
            ``inconclusive_because`` when they apply, ``subject``, and the ``extra`` fields.
        """
        v = self.verdict
        d: dict[str, Any] = {"conformant": v.ok, "verdict": v.word(kind),
                             "first_offending_seq": self.first_offending_seq,
                             "checks": [c.to_json() for c in self.checks]}
        rc = self.root_cause
        if rc is not None:
            d["root_cause"] = rc.name
        why = self.why_inconclusive
        if why is not None:
            d["inconclusive_because"] = why
        if self.subject:
            d["subject"] = self.subject
        d.update(self.extra)
        return d

    def summary(self, kind: str = "trace") -> str:
        """One line: the verdict and its reason."""
        v = self.verdict
        if v is Verdict.VIOLATED:
            rc = self.root_cause
            assert rc is not None
            seq = self.first_offending_seq
            at = f" at seq {seq}" if seq is not None else ""
            return f"{v.word(kind)}: {rc.name}{at} — {rc.detail}"
        if v is Verdict.INCONCLUSIVE:
            return f"{v.word(kind)}: {self.why_inconclusive}"
        held = sum(1 for c in self.checks if c.status is Status.HELD)
        return f"{v.word(kind)}: {held} check{'s' if held != 1 else ''} held"
