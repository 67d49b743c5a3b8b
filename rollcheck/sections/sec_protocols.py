"""``rollcheck verify`` section: checkpointing protocols (UC, BCS, HMNR) on random basic schedules.

Rows: the Hypothesis properties of ``specs/protocols.md`` (no useless checkpoint under BCS and
HMNR, BCS index lines consistent, forced list, basic schedule kept, fast kernels agree, timer), and
a seeded pyimpl sweep that runs every protocol on random schedules and checks the output with the
foundation's SCC test (UC is expected to leave useless checkpoints: the row reports how often), and
the bounded-exhaustive explorer on BCS, HMNR and HMNR without C2 (``specs/protocols.md#exhaustive``).
"""

from __future__ import annotations

import time

from rollcheck.suite import Row, VerifyContext

TITLE = "Checkpointing protocols (UC, BCS, HMNR): properties on random schedules"


def _property_rows() -> list[Row]:
    import rollcheck.properties.protocols_cic  # noqa: F401
    import rollcheck.properties.protocols_forced  # noqa: F401
    from rollcheck.properties.registry import PROPERTIES, run_property

    rows = []
    for name, p in PROPERTIES.items():
        if p.area != "protocols":
            continue
        res = run_property(name)
        detail = "; ".join(x for x in (res.error or "", res.coverage_text()) if x)
        rows.append(Row(p.target, "Hypothesis", f"{name} ({res.theorem})", res.status, res.examples,
                        "examples", res.seconds, detail))
    return rows


def _sweep_row(ctx: VerifyContext, name: str, count: int) -> Row:
    from rollcheck.properties.mutants_protocols import random_schedules
    from rollcheck.pyimpl.protocols import get_protocol, run_protocol
    from rollcheck.pyimpl.zpaths import useless_checkpoints

    t0 = time.perf_counter()
    proto = get_protocol(name)
    bad = forced = deliveries = 0
    for s in random_schedules(count, ctx.seed):
        r = run_protocol(proto, s)
        forced += r.forced_checkpoints
        deliveries += sum(1 for e in s.events if e.kind == "deliver")
        if useless_checkpoints(r.pattern):
            bad += 1
    rate = forced / deliveries if deliveries else 0.0
    if proto.zcycle_free:
        status = "fail" if bad else "pass"
        detail = f"{bad} runs with a useless checkpoint; {rate:.3f} forced checkpoints per delivery"
        check = f"no useless checkpoint on {count} seeded schedules (seed {ctx.seed}, n=2..5, non-FIFO)"
    else:
        status = "pass" if bad else "fail"
        detail = f"{bad}/{count} runs leave useless checkpoints (expected for UC), no forced checkpoint"
        check = f"UC leaves useless checkpoints on cyclic traffic ({count} seeded schedules, seed {ctx.seed})"
    ctx.log(f"  protocols: {name}: {detail}")
    return Row(name, "pyimpl", check, status, count, "schedules", time.perf_counter() - t0, detail)


def _exhaustive_rows(ctx: VerifyContext) -> list[Row]:
    """Check every schedule up to a bound: no useless checkpoint under BCS or HMNR.

    HMNR without C2 must be caught with its smallest witness (``rollcheck.properties.explore``).
    """
    from rollcheck.properties.explore import explore, parse_bounds
    from rollcheck.pyimpl.protocols import get_protocol

    bounds = parse_bounds("2x8,3x6" if ctx.quick else "2x10,3x8,4x6")
    rows = []
    for name, expect in (("bcs", None), ("hmnr", None), ("hmnr-no-c2", 5)):
        t0 = time.perf_counter()
        e = explore(get_protocol(name), name, bounds)
        total = sum(b.schedules for b in e.bounds)
        cover = ", ".join(f"{b.bound} ({b.schedules}{'' if b.complete else ', incomplete'})"
                          for b in e.bounds)
        if expect is None:
            ok = e.best is None and all(b.complete for b in e.bounds)
            check = f"no useless checkpoint on every schedule up to {', '.join(map(str, bounds))}"
            detail = f"exhaustive {cover}" + ("" if e.best is None else f"; violation {e.best.word}")
        else:
            ok = e.best is not None and e.best.events == expect
            check = f"{name} caught on the same bounds, with its smallest witness ({expect} events)"
            detail = (f"smallest counterexample {e.best.events} events on {e.best_processes} processes"
                      if e.best else "no counterexample") + f"; exhaustive {cover}"
        ctx.log(f"  protocols: exhaustive {name}: {detail}")
        rows.append(Row(name.split("-")[0], "exhaustive", check, "pass" if ok else "fail", total, "schedules",
                        time.perf_counter() - t0, detail))
    return rows


def run(ctx: VerifyContext) -> list[Row]:
    """Run the checkpointing protocols section: its rows."""
    count = 200 if ctx.quick else 3000
    rows = [_sweep_row(ctx, name, count) for name in ("uc", "bcs", "hmnr")]
    return rows + _exhaustive_rows(ctx) + _property_rows()
