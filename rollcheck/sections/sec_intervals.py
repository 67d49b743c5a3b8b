"""``rollcheck verify`` section: checkpoint-interval models (utilization, T*, TRT, CI optimiser).

Rows: the papers' numbers reproduced (pyimpl); every interval property (Hypothesis) under the
active profile; every interval mutant (must be killed); the simulation-vs-model table (250 runs of
2000/λ per configuration, 40 in ``--quick``; each mean within 3 standard errors of Eq. 10); U(T)
curves with simulated points like the utilization paper's Figs. 5 and 12 (PNG); and the Spark
sweep giving the numpy sweep's numbers exactly (full mode only). Files: ``report/intervals/``. See
``docs/intervals.md``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from rollcheck.suite import Row, VerifyContext

TITLE = "Checkpoint-interval models: utilization, T*, TRT (properties, papers' numbers, Monte Carlo)"

R_MIN, C_MIN, DELTA_MIN = 10.0, 5.0, 0.5  # the papers' Figs. 5 and 12 (minutes)
LAMBDAS = (0.1, 0.05, 0.025, 0.005)
DEPTHS = (1, 10, 50)


def _paper_numbers() -> list[tuple[str, float, float, float]]:
    """(what, paper value, ours, tolerance)."""
    from rollcheck.pyimpl.intervals import (
        daly_interval,
        failure_rate_for_optimal,
        optimal_interval,
        utilization,
        zhuang_interval,
    )

    out = []
    t = optimal_interval(0.005, 5.0)
    out.append(("Fig. 4: T* (λ=0.005/min, c=5, R=10)", 46.452, t, 5e-4))
    out.append(("Fig. 4: U(T*)", 0.7541, utilization(t, 0.005, 5.0, 10.0), 5e-5))
    out.append(("Fig. 10: U(T*) with n=50, δ=0.5", 0.667, utilization(t, 0.005, 5.0, 10.0, 50, 0.5), 5e-4))
    for per_hour, gain in [(0.8475, 18.91), (0.1701, 2.4), (0.135, 1.73), (0.1161, 1.4), (0.0606, 0.5)]:
        lam = per_hour / 3600
        kw: dict[str, Any] = {"failure_rate": lam, "checkpoint_cost": 5.0, "restart_cost": 30.0, "depth": 5,
                              "token_delay": 0.05}
        ours = 100 * (utilization(optimal_interval(lam, 5.0), **kw) / utilization(1800.0, **kw) - 1)
        out.append((f"§5: % gain over 30 min at λ={per_hour}/h", gain, ours, 0.02))
    out.append(("§5: λ (per hour) for which 30 min is optimal, c=1 s", 0.0022,
                failure_rate_for_optimal(1800.0, 1.0) * 3600, 5e-5))
    lam = 0.005 / 60
    out.append(("Fig. 14: U(T*) at n=15000 (R=30 s, c=10 s, δ=5 s)", 0.0018,
                utilization(optimal_interval(lam, 10.0), lam, 10.0, 30.0, 15000, 5.0), 5e-5))
    lam = 11 / 60
    kw = {"failure_rate": lam, "checkpoint_cost": 2.0, "restart_cost": 5.0, "depth": 25, "token_delay": 0.5}
    u = utilization(optimal_interval(lam, 2.0), **kw)
    out.append(("Fig. 16: % gain over Daly at λ=11/h", 2.3, 100 * (u / utilization(daly_interval(lam, 2.0, 5.0), **kw) - 1), 0.05))
    out.append(("Fig. 16: % gain over Zhuang at λ=11/h", 3.7, 100 * (u / utilization(zhuang_interval(lam, 2.0, 5.0), **kw) - 1), 0.05))
    table1 = [(.05, 5, 1.6, 23.1, 27.35, .4222, 1.0418), (.05, 7, 3.09, 23.81, 32.65, .4216, 1.4526),
              (.01, 5, 1.07, 23.70, 13.86, .8536, 1.8945), (.01, 7, 1.59, 24.12, 15.07, .8533, 2.3110),
              (.005, 5, 1.15, 25.37, 12.6, .9243, 2.7753), (.005, 7, 2.57, 24.07, 12.85, .9237, 4.1536)]
    for lm, n, c, r, d, u30, ts in table1:
        per_s = lm / 60
        out.append((f"Table 1 λ={lm} n={n}: T* (min)", ts, optimal_interval(per_s, c) / 60, 5e-5))
        out.append((f"Table 1 λ={lm} n={n}: U at 30 min", u30, utilization(1800.0, per_s, c, r, n, d / 1000), 5e-5))
    return out


def _table(ctx: VerifyContext, runs: int, lambdas: tuple[float, ...], depths: tuple[int, ...]) -> tuple[list[Any], list[Any]]:
    from rollcheck.pyimpl.intervals import optimal_interval
    from rollcheck.pyimpl.intervals.sim import SimConfig, sweep

    cfgs = [SimConfig(optimal_interval(lam, C_MIN), lam, C_MIN, R_MIN, n, DELTA_MIN) for lam in lambdas for n in depths]
    return cfgs, sweep(cfgs, runs=runs, horizon_failures=2000, seed=ctx.seed)


def _plot(ctx: VerifyContext, name: str, title: str, depths: tuple[int, ...], lambdas: tuple[float, ...], runs: int,
          points: int, seed_offset: int) -> tuple[str, int, float, float]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from rollcheck.pyimpl.intervals import optimal_interval, utilization
    from rollcheck.pyimpl.intervals.sim import SimConfig, simulate_runs

    # at most two panels a row, each large enough to read at the report's width
    ncol = min(2, len(lambdas))
    nrow = -(-len(lambdas) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.6 * ncol, 4.0 * nrow), squeeze=False)
    worst, n_points, t0 = 0.0, 0, time.perf_counter()
    for k, lam in enumerate(lambdas):
        ax = axes[k // ncol][k % ncol]
        t_star = optimal_interval(lam, C_MIN)
        ts = np.linspace(C_MIN * 1.05, max(4 * t_star, 60.0), 300)
        sim_ts = np.geomspace(C_MIN * 1.4, max(3.5 * t_star, 50.0), points)
        for j, n in enumerate(depths):
            delta = DELTA_MIN if n > 1 else 0.0
            line, = ax.plot(ts, utilization(ts, lam, C_MIN, R_MIN, n, delta), lw=1.4,
                            label=f"n={n}" if len(depths) > 1 else "Eq. 4")
            means, sds = [], []
            for i, t in enumerate(sim_ts):
                s = simulate_runs(SimConfig(float(t), lam, C_MIN, R_MIN, n, delta), runs=runs, horizon_failures=2000,
                                  seed=ctx.seed + seed_offset, point=1000 * k + 100 * j + i)
                means.append(s.mean)
                sds.append(s.std)
                worst = max(worst, abs(s.z))
                n_points += 1
            ax.errorbar(sim_ts, means, yerr=sds, fmt="o", ms=3, capsize=2, color=line.get_color())
        ax.axvline(t_star, color="grey", ls=":", lw=1.2, label=f"T* = {t_star:.1f}")
        ax.set_title(f"λ = {lam}/min", fontsize=11)
        ax.set_xlabel("checkpoint interval T (min)", fontsize=10)
        ax.set_ylim(bottom=0)
        if k % ncol == 0:
            ax.set_ylabel("utilization U", fontsize=10)
        ax.tick_params(labelsize=9)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    from rollcheck.pyimpl.render import save_figure

    path = ctx.path("intervals", name)
    save_figure(fig, path, dpi=100, alt=title,
                caption=f"Lines: the model's U(T); dots with bars: simulated mean ± sd ({runs} runs a point). "
                        f"Each dot should sit on its line (largest deviation {worst:.2f} standard errors over "
                        f"{n_points} points, limit 4); the dotted vertical line is the optimum T*.")
    return str(path), n_points, worst, time.perf_counter() - t0


def run(ctx: VerifyContext) -> list[Row]:
    """Run the checkpoint-interval models section: its rows."""
    import rollcheck.properties.intervals_model  # noqa: F401  (registers the properties)
    import rollcheck.properties.intervals_sim  # noqa: F401
    import rollcheck.properties.intervals_trt  # noqa: F401
    from rollcheck.properties.intervals_model import run_with
    from rollcheck.properties.registry import PROPERTIES
    from rollcheck.pyimpl.patternio import atomic_write_text

    rows: list[Row] = []
    quick = ctx.quick
    ctx.log(f"  intervals: seed={ctx.seed} profile={ctx.profile} quick={quick}")

    # 1. the papers' numbers
    t0 = time.perf_counter()
    nums = _paper_numbers()
    bad = [(w, p, o) for w, p, o, tol in nums if not abs(o - p) <= tol]
    lines = ["| quantity | paper | ours |", "|---|---|---|"] + [f"| {w} | {p} | {o:.6g} |" for w, p, o, _ in nums]
    atomic_write_text(ctx.path("intervals", "paper_numbers.md"), "\n".join(lines) + "\n")
    rows.append(Row("interval-model", "pyimpl", "papers' numbers reproduced (Figs. 4, 10, 14, 16, §5, Table 1)",
                    "fail" if bad else "pass", len(nums), "numbers", time.perf_counter() - t0,
                    "; ".join(f"{w}: paper {p}, ours {o:.6g}" for w, p, o in bad) or "see intervals/paper_numbers.md"))

    # 2. properties
    for name in sorted(n for n, p in PROPERTIES.items() if p.area == "intervals"):
        r = run_with(name, ctx.profile)
        detail = "; ".join(x for x in (r.error or r.theorem, r.coverage_text()) if x)
        rows.append(Row(r.target, "Hypothesis", name, r.status, r.examples, "examples", r.seconds, detail[:300]))

    # 3. mutants: run once, by the catalogue section (sec_mutants)

    # 4. simulation vs model table
    t0 = time.perf_counter()
    runs = 40 if quick else 250
    lambdas = (0.1, 0.005) if quick else LAMBDAS
    depths = (1, 50) if quick else DEPTHS
    cfgs, sums = _table(ctx, runs, lambdas, depths)
    dt = time.perf_counter() - t0
    head = "| λ (/min) | n | T* | model U | sim mean | sim sd | se | z |\n|---|---|---|---|---|---|---|---|"
    body = [f"| {c.failure_rate} | {c.depth} | {c.interval:.3f} | {s.model:.4f} | {s.mean:.4f} | {s.std:.4f} "
            f"| {s.se:.2g} | {s.z:+.2f} |" for c, s in zip(cfgs, sums, strict=True)]
    md = (f"Simulation vs Eq. 10 (R = {R_MIN}, c = {C_MIN}, δ = {DELTA_MIN} min; {runs} runs of 2000/λ each; "
          f"seed {ctx.seed})\n\n" + head + "\n" + "\n".join(body) + "\n")
    atomic_write_text(ctx.path("intervals", "simulation_vs_model.md"), md)
    atomic_write_text(ctx.path("intervals", "simulation_vs_model.json"),
                      json.dumps([s.to_dict() for s in sums], indent=1))
    off = [s for s in sums if abs(s.z) > 3]
    failures = sum(s.failures for s in sums)
    rows.append(Row("interval-sim", "pyimpl", f"{runs}-run simulation vs Eq. 10 ({len(sums)} configurations, 3 se)",
                    "fail" if off else "pass", runs * len(sums), "runs", dt,
                    (f"max |z| = {max(abs(s.z) for s in sums):.2f}; {failures} failures simulated, "
                     f"{failures / max(dt, 1e-9):.3g}/s; intervals/simulation_vs_model.md")
                    + ("; off: " + ", ".join(f"λ={s.config.failure_rate} n={s.config.depth} z={s.z:.2f}" for s in off)
                       if off else "")))

    # 5. pictures like Figs. 5 and 12
    prun, ppts = (25, 5) if quick else (250, 8)
    for name, title, deps, offset in [
        ("fig5_utilization_single.png", "U(T), one process (Eq. 4; R=10, c=5 min): model and simulation (mean ± sd)",
         (1,), 1),
        ("fig12_utilization_dag.png", "U(T), DAG (Eq. 10; R=10, c=5, δ=0.5 min): model and simulation (mean ± sd)",
         (1, 10, 50) if not quick else (1, 50), 2),
    ]:
        path, npts, worst, secs = _plot(ctx, name, title, deps, LAMBDAS if not quick else (0.1, 0.005), prun, ppts, offset)
        rows.append(Row("interval-sim", "pyimpl", f"U(T) curves with simulated points ({name})",
                        "pass" if worst <= 4 else "fail", npts, "points", secs,
                        f"{prun} runs per point; max |z| = {worst:.2f} (limit 4 over all points)", [path]))

    # 6. Spark (full mode; in --quick the Spark start-up would dominate the section, and
    #    tests/test_intervals_spark.py checks the same identity in make test): identical numbers
    if quick:
        return rows
    t0 = time.perf_counter()
    try:
        from rollcheck.spark_replay.jobs.interval_sweep import spark_sweep

        dist, timing = spark_sweep(cfgs, runs=runs, horizon_failures=2000, seed=ctx.seed)
        same = [a.values for a in dist] == [b.values for b in sums]
        rows.append(Row("interval-sim", "Spark", "Spark sweep gives the numpy sweep's numbers (same seeds)",
                        "pass" if same else "fail", runs * len(cfgs), "runs", time.perf_counter() - t0,
                        f"{timing.master}, {timing.partitions} tasks; start-up {timing.startup:.1f} s, "
                        f"job {timing.job:.1f} s"))
    except Exception as e:  # no Java / Spark cannot start: nothing was checked
        rows.append(Row("interval-sim", "Spark", "Spark sweep gives the numpy sweep's numbers (same seeds)",
                        "inconclusive", 0, "runs", time.perf_counter() - t0, f"{type(e).__name__}: {e}"[:300]))
    return rows
