"""``rollcheck verify`` section: the commands for the user's own system, run on shipped examples.

Each row runs the public face exactly as a user would and checks that its verdict is *earned*:

- ``check protocol`` on a user-written protocol with an off-by-one index rule (shipped as package
  data, ``rollcheck/data/my_index.py``) must come out unsafe, with a saved counterexample whose
  useless checkpoints are confirmed by an independent method — a brute-force Z-cycle search from
  the definitions (:func:`confirm_counterexample`), not the SCC pass that found them — which must
  also reject a doctored copy of the counterexample; the corrected protocol (``my_index_fixed.py``) must come out safe, with its
  forced-checkpoint rate next to HMNR's and BCS's.
- ``check trace`` on a 3-process HMNR run of an engine that is not Spark must be conformant, and each
  broken variant (a missing forced checkpoint, too little rollback, a message not replayed, a
  duplicated output) non-conformant through the check that names that fault.

References
----------
``specs/protocols.md#your-protocol``, ``specs/formats.md#trace``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from rollcheck.sections._words import and_join, word
from rollcheck.suite import Row, VerifyContext

TITLE = "Your own system: check protocol and check trace on shipped examples"
METHOD = "your system"

#: broken trace -> the check that must name its fault
_BROKEN = {
    "trace-hmnr-3p-no-forced.jsonl": "forced-checkpoints",
    "trace-hmnr-3p-orphan.jsonl": "recovery-line",
    "trace-hmnr-3p-not-replayed.jsonl": "log-replay",
    "trace-hmnr-3p-duplicate-output.jsonl": "outputs-exactly-once",
}
#: the check -> the algorithm of the report's grid it exercises
_ALGORITHM = {None: "recovery-line", "forced-checkpoints": "hmnr", "recovery-line": "recovery-line",
              "log-replay": "message-log", "outputs-exactly-once": "message-log"}


#: Above this many delivered messages the Z-cycle closure (cubic) is not attempted.
MAX_ORACLE_MESSAGES = 400


def _zcycle_useless(p: Any, names: Sequence[str]) -> dict[str, bool]:
    """For each named checkpoint ``P:x``: is it on a Z-cycle, searched from the definitions.

    Independent of :func:`~rollcheck.pyimpl.zpaths.useless_checkpoints` (which produced the
    counterexample: an SCC pass over the R-graph): the brute-force oracle of
    :mod:`rollcheck.properties.oracle` reads the checkpoint intervals of every message off the raw
    event list and closes the one-step Z relation transitively; C[i,x] is useless iff a Z-path
    leaves it (a message sent at or after C[i,x]) and returns to it (a message delivered to P_i
    before C[i,x]) — Netzer and Xu's theorem, ``specs/theorems.md#t2-netzer-xu``.
    """
    from rollcheck.properties.oracle import brute_zpath_exists, zpath_closure

    closure = zpath_closure(p)
    out = {}
    for name in names:
        proc, _, idx = name.rpartition(":")
        c = (p.processes.index(proc), int(idx))
        out[name] = brute_zpath_exists(p, c, c, closure)
    return out


def _doctored(p: Any, name: str) -> Any:
    """``p`` with every delivery to the named checkpoint's process before that checkpoint removed.

    The messages stay in transit: no Z-path can return to the checkpoint, so it is not useless.
    """
    from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, Pattern

    proc, _, idx = name.rpartition(":")
    i, x = p.processes.index(proc), int(idx)
    seen, events = 0, []
    for ev in p.events:
        if ev.process == i and ev.kind == CHECKPOINT:
            seen += 1
        if ev.process == i and ev.kind == DELIVER and seen < x:
            continue
        events.append(ev)
    return Pattern(p.processes, tuple(events))


def confirm_counterexample(p: Any, useless: Sequence[str]) -> tuple[bool, str]:
    """Confirm independently that every checkpoint ``useless`` names is useless in ``p``.

    The method is :func:`_zcycle_useless`; the same confirmation must reject a doctored copy of
    the counterexample (the first named checkpoint's incoming deliveries removed).

    Returns ``(confirmed, what was done)``; not confirmed when the list is empty, the pattern is too
    large for the oracle, a named checkpoint has no Z-cycle, or the doctored copy is "confirmed" too
    (a confirmation that cannot fail is no confirmation).
    """
    if not useless:
        return False, "the report names no useless checkpoint"
    delivered = sum(1 for m in p.messages if m.deliver_interval is not None)
    if delivered > MAX_ORACLE_MESSAGES:
        return False, f"not confirmed: {delivered} delivered messages exceed the oracle's {MAX_ORACLE_MESSAGES}"
    verdicts = _zcycle_useless(p, useless)
    missing = [n for n, on_cycle in verdicts.items() if not on_cycle]
    if missing:
        return False, f"no Z-cycle through {and_join(missing)} (brute-force Z-path closure)"
    doctored = _doctored(p, useless[0])
    if _zcycle_useless(doctored, useless[:1])[useless[0]]:
        return False, f"the doctored counterexample (deliveries before {useless[0]} removed) was confirmed too"
    return True, (f"a Z-cycle through each of {and_join(useless)} found by the brute-force Z-path closure; "
                  f"a doctored copy (deliveries to {useless[0].rpartition(':')[0]} before it removed) rejected")


def _protocol_rows(ctx: VerifyContext) -> list[Row]:
    from rollcheck.pyimpl.patternio import load_pattern
    from rollcheck.pyimpl.zpaths import useless_checkpoints
    from rollcheck.testing import check_protocol

    rows = []
    for fname, expect in (("my_index.py", "unsafe"), ("my_index_fixed.py", "safe")):
        t0 = time.perf_counter()
        with as_file(files("rollcheck.data") / fname) as path:
            out = ctx.path("yours", Path(fname).stem)
            rep = check_protocol(f"{path}:MyIndexProtocol", profile=ctx.profile, out=out,
                                 seed=ctx.seed or None)
        ok = rep.verdict == expect
        def r3(v: object) -> object:
            return round(v, 3) if isinstance(v, float) else v

        detail = (f"verdict {rep.verdict} on {rep.examples} schedules; forced per delivery "
                  f"{word(r3(rep.forced_per_delivery), 'not measured')} (hmnr "
                  f"{word(r3(rep.compared.get('hmnr')), 'not measured')}, bcs "
                  f"{word(r3(rep.compared.get('bcs')), 'not measured')})")
        pictures: list[str] = []
        if expect == "unsafe":
            if rep.counterexample is None:
                ok = False
                detail += "; no counterexample saved"
            else:
                p = load_pattern(rep.counterexample)
                found = sorted(p.checkpoint_name(c) for c in useless_checkpoints(p))
                confirmed, note = confirm_counterexample(p, rep.useless)
                ok = ok and bool(found) and set(rep.useless) <= set(found) and confirmed
                detail += (f"; the counterexample holds useless {and_join(found)} (the report names "
                           f"{and_join(rep.useless)}); independent check: {note}")
                if rep.picture:
                    pictures.append(rep.picture)
        # a search the budget cut decides nothing (SAFE means complete): inconclusive, not a fail
        status = "inconclusive" if rep.verdict == "inconclusive" else "pass" if ok else "fail"
        if status == "inconclusive":
            detail += f"; {rep.detail}"
        rows.append(Row("useless (a user's protocol)", METHOD, f"check protocol {fname}: expected {expect}",
                        status, rep.examples, "schedules", time.perf_counter() - t0,
                        detail, pictures))
    return rows


def _trace_rows() -> list[Row]:
    import json

    from rollcheck.pyimpl.traces.api import check_trace_file

    rows = []
    data = files("rollcheck.data")
    with as_file(data / "trace-hmnr-3p.reference.json") as ref_path:
        reference = json.loads(Path(ref_path).read_text(encoding="utf-8"))
    cases = [("trace-hmnr-3p.jsonl", None), *_BROKEN.items()]
    for fname, failing in cases:
        t0 = time.perf_counter()
        with as_file(data / fname) as path:
            report, _ = check_trace_file(path, reference=reference)
        bad = sorted(c.name for c in report.checks if c.ok is False)
        n_checks = sum(c.ok is not None for c in report.checks)
        if failing is None:
            ok = report.conformant is True
            what = "conformant"
        else:
            ok = report.conformant is False and failing in bad
            what = f"non-conformant through {failing}"
        rows.append(Row(_ALGORITHM[failing], METHOD, f"check trace {fname}: {what}", "pass" if ok else "fail", n_checks,
                        "checks", time.perf_counter() - t0,
                        _trace_detail(report, bad)))
    return rows


def _trace_detail(report: Any, bad: list[str]) -> str:
    """The trace row's detail in words: the verdict, the checks that failed, where."""
    verdict = {True: "conformant", False: "not conformant"}.get(report.conformant, "inconclusive")
    failed = f"the failed checks are {and_join(bad)}" if bad else "no check failed"
    seq = report.first_offending_seq
    where = f"; the first offending event is seq {seq}" if seq is not None else ""
    return f"{verdict}; {failed}{where}"


def run(ctx: VerifyContext) -> list[Row]:
    """Run the section of the commands for the user's own system: its rows."""
    return [*_protocol_rows(ctx), *_trace_rows()]
