"""``rollcheck verify`` section: every TLA+ model of the manifest with TLC.

Also the cross-checks of its counterexamples against the Python reference, and trace validation
of HMNR runs.

``--quick`` and the ``ci`` profile run the small bounds; the ``verify`` profile adds the large
ones and longer traces. Rules: ``specs/tla.md``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from rollcheck.sections._words import word
from rollcheck.suite import Row, VerifyContext

TITLE = "TLA+ models with TLC"

_FAMILY = {
    "ChandyLamport.tla": "chandy-lamport",
    "RecoveryLine.tla": "recovery-line",
    "Spans.tla": "spans",
    "UpstreamBackup.tla": "upstream-backup",
    "MessageLog.tla": "message-log",
}


def _algorithm(entry) -> str:  # type: ignore[no-untyped-def]
    if entry.module == "CIC.tla":
        proto = entry.protocol or "hmnr"
        return proto if proto in ("uc", "bcs", "hmnr") else proto.split("-")[0]
    return _FAMILY.get(entry.module, entry.module.removesuffix(".tla"))


#: Independent parts the scheduler runs side by side: the models' runs (with the cross-checks of
#: their counterexamples) and their coverage goals, each for the small and the large bounds, and
#: the trace validations. Every part runs two TLC processes at a time.
PARTS = {"quick": ("models-small", "coverage-small", "traces"),
         "full": ("models-small", "models-large", "coverage-small", "coverage-large", "traces")}


def run(ctx: VerifyContext) -> list[Row]:
    """Run the TLA+ section: its rows."""
    from rollcheck.tla.crosscheck import crosscheck_cic, crosscheck_recovery
    from rollcheck.tla.manifest import check_coverage, load_manifest, run_entry
    from rollcheck.tla.runner import TLCUnavailable, find_jar, find_java

    rows: list[Row] = []
    small_only = ctx.quick or ctx.profile == "ci"
    entries = [e for e in load_manifest() if e.bound == "small" or not small_only]
    try:
        find_jar()
        find_java()
    except TLCUnavailable as err:  # say so once (from the first part only), as an inconclusive row (never a pass)
        return [Row("TLC", "TLC", "manifest", "inconclusive", 0, "states", 0.0, str(err))] if (
            ctx.part in (None, "models-small")) else []
    if ctx.part is not None:
        bound = ctx.part.rsplit("-", 1)[-1]
        if bound in ("small", "large"):
            entries = [e for e in entries if e.bound == bound]
        if bound == "small" or small_only:  # the full run's trace validations include a 10 000-step one
            from rollcheck.sections._jvm import use_short_jvm_options

            use_short_jvm_options("JAVA_TOOL_OPTIONS")  # C1 only for these short runs
    run_models = ctx.runs("models-small") or ctx.runs("models-large")
    run_coverage = ctx.runs("coverage-small") or ctx.runs("coverage-large")

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda e: run_entry(e, workers=1, timeout=900), entries)) if run_models else []
        covered = [e for e in entries if e.cover] if run_coverage else []
        coverage = list(pool.map(lambda e: check_coverage(e, workers=1, timeout=900), covered))
    for o in outcomes:
        e, r = o.entry, o.result
        status = "pass" if o.met else ("inconclusive" if r.status == "inconclusive" else "fail")
        rows.append(Row(
            _algorithm(e), "TLC", f"{e.name}: expected {e.expected}", status, r.distinct_states,
            "states", r.seconds,
            f"{e.description}; TLC: {r.status} ({r.message}); depth {word(r.depth, 'not reported')}",
        ))
        ctx.log(f"tlc: {e.name}: {r.status} ({r.distinct_states} states, {r.seconds:.1f} s)")
        if e.crosscheck and r.status == "violation" and r.trace:
            t0 = time.monotonic()
            out = ctx.path("tla", "counterexamples", "x").parent
            if e.crosscheck == "cic":
                c = crosscheck_cic(r.trace, e.protocol or "", out, e.name)
            else:
                c = crosscheck_recovery(r.trace, out, e.name, virtual=e.constant("Virtual") != "FALSE",
                                        variant=e.constant("Variant"))
            rows.append(Row(
                _algorithm(e), "TLC", f"{e.name}: counterexample confirmed by the Python reference",
                "pass" if c.agrees else "fail", 1, "counterexamples", time.monotonic() - t0,
                f"{c.detail}; pattern {c.pattern_path}", [c.picture_path] if c.picture_path else [],
            ))
    for outs in coverage:
        for cov in outs:
            e = cov.entry
            status = {"reached": "pass", "unreached": "fail"}.get(cov.status, "inconclusive")
            rows.append(Row(
                _algorithm(e), "TLC", f"{e.name}: coverage goal {cov.goal.removeprefix('Unreached_')} reached",
                status, cov.result.distinct_states, "states", cov.result.seconds,
                f"TLC: {cov.result.status} ({cov.result.message}); a goal left unreached means the "
                "entry's invariants hold vacuously for that situation at this bound",
            ))
    if ctx.runs("traces"):
        rows.extend(_trace_rows(ctx, small_only))
    return rows


def _trace_rows(ctx: VerifyContext, small: bool) -> list[Row]:
    from rollcheck.pyimpl.generate import random_pattern
    from rollcheck.pyimpl.pattern import CHECKPOINT, Pattern
    from rollcheck.pyimpl.protocols import run_protocol
    from rollcheck.tla.trace import validate_trace

    rows: list[Row] = []
    plan = {
        # protocol -> [(processes, basic steps, Z-cycle check)]
        "hmnr": [(3, 300, False), (3, 60, True)] if small else [(3, 300, True), (4, 10_000, False)],
        "bcs": [(3, 300, False)] if ctx.quick else [(3, 300, False), (3, 60, True)],
    }
    for proto, sizes in plan.items():
        for n, steps, zcheck in sizes:
            seed = ctx.seed
            base = random_pattern(n, steps, seed)
            runp = run_protocol(proto, base).pattern
            t0 = time.monotonic()
            v = validate_trace(proto, runp, zcheck=zcheck, timeout=900)
            ok = v.status == "accepted"
            rows.append(Row(
                proto, "TLC", f"trace validation accepts a Python {proto} run ({len(runp.events)} events"
                f"{', Z-cycle check' if zcheck else ''})",
                "pass" if ok else ("inconclusive" if v.status == "inconclusive" else "fail"),
                len(runp.events) if ok else 0, "events", time.monotonic() - t0,
                f"seed {seed}; {v.status}: {v.reason}",
            ))
            forced = [k for k, ev in enumerate(runp.events) if ev.kind == CHECKPOINT and ev.forced]
            if not forced:
                rows.append(Row(proto, "TLC", "trace validation rejects a tampered run", "inconclusive",
                                0, "traces", 0.0, f"seed {seed}: the run has no forced checkpoint"))
                continue
            k = forced[len(forced) // 2]
            evs = list(runp.events)
            tampered = Pattern(runp.processes, tuple(evs[:k] + evs[k + 1 :]))
            t0 = time.monotonic()
            w = validate_trace(proto, tampered, timeout=900)
            good = w.status == "rejected" and w.first_rejected_event == k
            rows.append(Row(
                proto, "TLC", f"trace validation rejects a tampered {proto} run at the right event",
                "pass" if good else ("inconclusive" if w.status == "inconclusive" else "fail"),
                1, "traces", time.monotonic() - t0,
                f"seed {seed}: forced checkpoint events[{k}] removed; TLC: {w.status} at "
                f"events[{word(w.first_rejected_event)}]: {w.reason}",
            ))
    return rows
