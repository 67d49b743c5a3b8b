"""From a candidate to a finding: minimise, deduplicate, confirm, reproduce, triage, draft a report.

:func:`process_group` decides a candidate group once: minimise and sign it, confirm it through
the ordinary matrix, then number it, write and run its reproducer and draft its report.
See docs/internals/infra.md#hunt-findings.

Examples
--------
>>> status_of([("1.0", "reproduced"), ("1.1", "reproduced"), ("2.0", "not reproduced")])
'fixed in 2.0'
>>> status_of([("1.0", "reproduced"), ("2.0", "could not run: offline")])
'open'
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import CellOutcome, HuntAdapter
from rollcheck.infra.hunt.minimise import minimise
from rollcheck.infra.hunt.report import report_draft
from rollcheck.infra.hunt.signature import signature, violated_checks
from rollcheck.infra.hunt.store import HuntStore
from rollcheck.pyimpl.errors import InternalError
from rollcheck.pyimpl.patternio import atomic_write_text

__all__ = ["FindingContext", "doubt_of", "hunted_release", "process_group", "status_of"]

#: Decisions on signatures are taken one at a time (minimising runs in parallel).
_DECIDE = threading.Lock()


def hunted_release(adapter: HuntAdapter) -> str:
    """The name of the hunted release in ``reproducer_run`` (:meth:`HuntAdapter.release`)."""
    return adapter.release()


def status_of(runs: list[tuple[str, str]]) -> str:
    """``open`` or ``fixed in X`` from the reproducer's results, oldest release first.

    Open when the newest release with a result reproduces it (or none gave one, or the hunted
    release itself did not); otherwise fixed in the earliest newer release where it did not.
    """
    decided = [(r, v) for r, v in runs if v in ("reproduced", "not reproduced")]
    if not decided or decided[-1][1] == "reproduced" or runs[0][1] != "reproduced":
        return "open"
    first_quiet = next(r for r, v in decided if v == "not reproduced")
    return f"fixed in {first_quiet}"


def doubt_of(runs: list[tuple[str, str]]) -> str | None:
    """Why a finding is doubtful, or None.

    Its standalone reproducer must show it on the hunted release (the first of ``runs``); one
    that is quiet there shows something else, or nothing.

    >>> doubt_of([("3.5.3", "reproduced"), ("4.3.0", "not reproduced")]) is None
    True
    >>> doubt_of([("3.5.3", "not reproduced"), ("4.3.0", "reproduced")])
    'the standalone reproducer does not show it on the hunted release 3.5.3 (not reproduced)'
    """
    release, verdict = runs[0]
    return None if verdict == "reproduced" else (
        f"the standalone reproducer does not show it on the hunted release {release} ({verdict})")


@dataclass
class FindingContext:
    """What processing a group needs: the adapter, the store, the hunt's folder and limits."""

    adapter: HuntAdapter
    store: HuntStore
    out: Path
    seed: int
    shrink_runs: int
    shrink_stop: Callable[[], bool]
    interrupted: Callable[[], bool]


def process_group(ctx: FindingContext, presig: str, program_id: str, cell_key: str) -> str | None:
    """Decide the group ``presig``; its new state (None when interrupted: it stays pending).

    Parameters
    ----------
    ctx : FindingContext
        The hunt's adapter, store, folder and limits.
    presig : str
        The group's key.
    program_id : str
        The program of the group's first candidate.
    cell_key : str
        That candidate's cell.

    Returns
    -------
    str or None
        ``finding``, ``duplicate`` or ``unconfirmed``.
    """
    stored = next(sp for sp in ctx.store.programs() if sp.program.id == program_id)
    cell, outcome = ctx.store.cell(program_id, cell_key)
    if outcome is None:  # pragma: no cover - a group is opened with its cell's outcome
        raise InternalError(f"candidate {program_id}/{cell_key} has no outcome")
    work = ctx.out / "work" / "findings" / f"{program_id}-{_safe(cell_key)}"
    small = minimise(ctx.adapter, stored.program, cell, outcome, work / "shrink",
                     ctx.shrink_runs, lambda: ctx.shrink_stop() or ctx.interrupted())
    if ctx.interrupted():
        return None
    sig = signature(small.outcome, small.program.operators)
    with _DECIDE:
        state, fid = _decided(ctx, sig)
        if state in ("duplicate", "unconfirmed"):
            ctx.store.close_group(presig, state, sig, fid, small.runs, small.seconds)
            return state
        module = work / "minimal" / f"{small.program.id}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(module, small.program.text)
        if fid is None:
            confirmed = ctx.adapter.confirm(module, cell, work / "confirm")
            if ctx.interrupted():
                return None
            if not isinstance(confirmed, CellOutcome):
                raise InternalError(f"the {ctx.adapter.engine} hunt adapter's confirm returned "
                                    f"{type(confirmed).__name__}, not a CellOutcome")
            if signature(confirmed, small.program.operators) != sig:
                ctx.store.close_group(presig, "unconfirmed", sig, None, small.runs, small.seconds)
                return "unconfirmed"
            doc = _document(ctx, sig, small.program.operators, stored.program.operators, program_id,
                            cell_key, confirmed, small.runs)
            fid = ctx.store.add_finding(sig, doc)
        _complete(ctx, fid, small.program, cell, module)
        ctx.store.close_group(presig, "finding", sig, fid, small.runs, small.seconds)
    return "finding"


def _safe(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.@=" else "_" for ch in key)[:80]


def _decided(ctx: FindingContext, sig: str) -> tuple[str, str | None]:
    """What is known of the signature ``sig``.

    ``("duplicate", id)`` of a complete finding, ``("unconfirmed", None)``, ``("resume", id)``
    of a finding stored but not completed (a kill in between), or ``("new", None)``.
    """
    for f in ctx.store.findings():
        if f["signature"] == sig:
            return ("duplicate" if f.get("status") else "resume"), str(f["id"])
    prior = ctx.store.group_of_signature(sig)
    if prior is not None and prior[0] == "unconfirmed":
        return "unconfirmed", None
    return "new", None


def _document(ctx: FindingContext, sig: str, operators: tuple[str, ...], found_ops: tuple[str, ...],
              program_id: str, cell_key: str, outcome: CellOutcome, runs: int) -> dict[str, Any]:
    return {"signature": sig, "checks": list(violated_checks(outcome)), "exception": outcome.exception,
            "attributed_to": outcome.attributed_to, "trace": outcome.trace, "detail": outcome.detail,
            "operators": list(operators), "operators_found": list(found_ops), "program": program_id,
            "cell": cell_key, "shrink_runs": runs, "programs_generated": ctx.store.next_index()}


def _complete(ctx: FindingContext, fid: str, program: Any, cell: Any, module: Path) -> None:
    """Write ``findings/<fid>.py``, the reproducer, its runs, the status and the report draft."""
    doc = next(f for f in ctx.store.findings() if f["id"] == fid)
    folder = ctx.out / "findings"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / f"{fid}.py", module.read_text(encoding="utf-8"))
    outcome = CellOutcome("violated", {c: "violated" for c in doc["checks"]}, exception=doc["exception"],
                          attributed_to=doc["attributed_to"], trace=doc["trace"], detail=doc["detail"])
    script = Path(ctx.adapter.reproducer(program, cell, outcome, folder / f"{fid}.reproducer.py"))
    runs: list[tuple[str, str]] = [(hunted_release(ctx.adapter),
                                    ctx.adapter.run_reproducer(script, ctx.adapter.engine_version))]
    for release in ctx.adapter.newer_releases():
        if release not in {r for r, _ in runs}:
            runs.append((release, ctx.adapter.run_reproducer(script, release)))
    doc.update(module=f"findings/{fid}.py", reproducer=_relative(script, ctx.out),
               reproducer_run=dict(runs), status=status_of(runs), doubtful=doubt_of(runs), report=None)
    if doc["status"] == "open":
        name = f"findings/{fid}.md"
        atomic_write_text(ctx.out / name, report_draft(
            doc, engine=ctx.adapter.engine, release=hunted_release(ctx.adapter), seed=ctx.seed,
            programs=int(doc.get("programs_generated") or 0),
            module_text=program.text, reproducer_text=_read(script), reproducer_name=script.name))
        doc["report"] = name
    doc.pop("id", None)
    doc.pop("programs", None)
    ctx.store.update_finding(fid, doc)


def _relative(path: Path, out: Path) -> str:
    try:
        return str(path.resolve().relative_to(out.resolve()))
    except ValueError:
        return str(path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return f"# (the reproducer could not be read: {e})"
