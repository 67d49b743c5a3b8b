"""``rollcheck verify`` section: the commands for the user's own system, run on shipped examples.

Each row runs the public face exactly as a user would and checks that its verdict is *earned*:

- ``check protocol`` on a user-written protocol with an off-by-one index rule (shipped as package
  data, ``rollcheck/data/my_index.py``) must come out unsafe, with a saved counterexample in which
  an independent computation (the SCC characterisation of useless checkpoints) finds the useless
  checkpoint it names; the corrected protocol (``my_index_fixed.py``) must come out safe, with its
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
from importlib.resources import as_file, files
from pathlib import Path

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
                  f"{r3(rep.forced_per_delivery)} (hmnr {r3(rep.compared.get('hmnr'))}, "
                  f"bcs {r3(rep.compared.get('bcs'))})")
        pictures: list[str] = []
        if expect == "unsafe":
            if rep.counterexample is None:
                ok = False
                detail += "; no counterexample saved"
            else:
                p = load_pattern(rep.counterexample)
                found = sorted(p.checkpoint_name(c) for c in useless_checkpoints(p))
                ok = ok and bool(found) and set(rep.useless) <= set(found)
                detail += f"; counterexample holds useless {found} (report names {rep.useless})"
                if rep.picture:
                    pictures.append(rep.picture)
        rows.append(Row("useless (a user's protocol)", METHOD, f"check protocol {fname}: expected {expect}",
                        "pass" if ok else "fail", rep.examples, "schedules", time.perf_counter() - t0,
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
                        f"conformant={report.conformant}; failed checks {bad}; first offending seq "
                        f"{report.first_offending_seq}"))
    return rows


def run(ctx: VerifyContext) -> list[Row]:
    return [*_protocol_rows(ctx), *_trace_rows()]
