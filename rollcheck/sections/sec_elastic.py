"""``rollcheck verify`` section: SPATE elastic upstream backup (``docs/elastic.md``).

Rows: an exhaustive single-failure sweep of seeded random pipelines with scaling (every operator
task failed at every step, pyimpl), the five Hypothesis properties of ``specs/elastic.md``, every
elastic mutant (each must be killed), and a picture of the queue bound against measured maxima.
Quick: 3 pipelines with stride 2 and mutants without shrinking; full: 12 pipelines, every step,
plus 4 pipelines with parallel recovery (each failed task recovered by 2 tasks).
"""

from __future__ import annotations

import time

from rollcheck.suite import Row, VerifyContext

TITLE = "Elastic upstream backup (SPATE): scaling, two-level ACK trimming, recovery"
ALGO = "elastic upstream backup"


def _sweep_row(ctx: VerifyContext, parallel: int = 1) -> Row:
    from rollcheck.pyimpl.elastic import failure_sweep, random_config

    n, stride = (3, 2) if ctx.quick else (12 if parallel == 1 else 4, 1)
    t0 = time.perf_counter()
    runs, bad, detail = 0, 0, []
    for i in range(n):
        cfg = random_config(ctx.seed * 1_000_003 + i)
        res = failure_sweep(cfg, stride=stride, parallel=parallel)
        runs += res.runs
        if res.mismatches:
            bad += 1
            detail.append(res.first_difference or "")
    ctx.log(f"  elastic: failure sweep seed={ctx.seed} parallel={parallel}: {runs} single-failure runs "
            f"on {n} pipelines")
    how = "restarted" if parallel == 1 else f"recovered by {parallel} tasks (parallel recovery)"
    return Row(ALGO, "pyimpl", f"every task failed at every {'' if stride == 1 else f'{stride}nd '}step of "
               f"{n} random scaled pipelines (seed {ctx.seed}), {how}: output exactly once",
               "fail" if bad else "pass", runs, "failure runs", time.perf_counter() - t0,
               "; ".join(detail) if bad else "sink output equals the failure-free reference in every run")


def _property_rows(ctx: VerifyContext) -> list[Row]:
    from rollcheck.properties.mutants_elastic import run_under_profile
    from rollcheck.properties.registry import PROPERTIES

    rows = []
    for name in sorted(n for n, p in PROPERTIES.items() if p.area == "elastic"):
        res = run_under_profile(name, ctx.profile)
        detail = "; ".join(x for x in (res.error or "", res.coverage_text()) if x)
        rows.append(Row(ALGO, "Hypothesis", f"{name} ({res.theorem})", res.status, res.examples, "examples",
                        res.seconds, detail))
    return rows


def _bound_picture(ctx: VerifyContext) -> Row:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rollcheck.pyimpl.elastic import Config, queue_bound, simulate
    from rollcheck.pyimpl.render import integer_axis, save_figure

    t0 = time.perf_counter()
    seeds = range(2 if ctx.quick else 6)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharey=True)
    checked, over, tight = 0, 0, 0
    for ax, c in zip(axes, (1, 3, 5), strict=True):
        xs = [1, 2, 3, 4]
        bound, seen = [], []
        for a in xs:
            cfg0 = Config(keys=2, ops=("sum",), rounds=40, max_rate=1, ack_interval=a, checkpoint_interval=c,
                          workload="constant")
            bound.append(queue_bound(cfg0, 0))
            best = 0
            for s in seeds:
                q = simulate(Config(**{**cfg0.__dict__, "seed": ctx.seed + s})).max_queue[0]
                checked += 1
                over += q > bound[-1]
                best = max(best, q)
            seen.append(best)
            tight += best == bound[-1]
        # the bound as a broad pale band under the measured maxima: where they meet, both show
        (b,) = ax.plot(xs, bound, "-", color="#1f77b4", lw=7, alpha=0.35, solid_capstyle="round",
                       label="bound R·W", zorder=2)
        b.set_gid(f"bound:C={c}")
        (m,) = ax.plot(xs, seen, "s--", color="#d62728", ms=6, lw=1.2, label="max measured", zorder=3)
        m.set_gid(f"measured:C={c}")
        ax.set_title(f"source queue, stateful successor, C={c}", fontsize=10)
        ax.set_xlabel("ACK interval A (rounds)")
        integer_axis(ax)
    axes[0].set_ylabel("events (R = 1 per round)")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = ctx.path("elastic", "queue-bound.png")
    save_figure(fig, path, dpi=100, alt="Queue bound R·W against the measured maximum source queue",
                caption=f"Blue band: the bound R·W; red squares: the largest source queue measured over "
                        f"{len(seeds)} seeds per setting. A square above the band breaks the bound "
                        f"({over} did); a square on the band reaches it ({tight} of 12 settings did).")
    return Row(ALGO, "pyimpl", "queue length within R·W, reached at constant rate (measured maxima vs bound)",
               "fail" if over or tight < 12 else "pass", checked, "runs", time.perf_counter() - t0,
               f"{over} runs over the bound; bound reached in {tight} of 12 (A, C) settings", [str(path)])


def run(ctx: VerifyContext) -> list[Row]:
    """Run the elastic upstream backup section: its rows."""
    rows = [_sweep_row(ctx)]
    if not ctx.quick:
        rows.append(_sweep_row(ctx, parallel=2))
    rows += _property_rows(ctx)
    try:
        rows.append(_bound_picture(ctx))
    except Exception as e:  # a picture that cannot be drawn is a failed row, not a crashed section
        rows.append(Row(ALGO, "pyimpl", "queue bound picture", "fail", 0, "runs", 0.0, f"{type(e).__name__}: {e}"))
    return rows
