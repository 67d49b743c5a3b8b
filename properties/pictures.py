"""Pictures of killed mutants, one kind per area (matplotlib, Agg backend, a legend on every plot).

* patterns, protocols, simulator: the space-time diagram of the counterexample
  (:func:`rollcheck.pyimpl.render.render_pattern`); for recovery-line and checkpoint-graph mutants
  it also draws the failed process, the reference recovery line and the mutant's line;
* spans: the span diagram — one column of levels per processor, the reference's greatest
  assignment and the mutant's, every edge, the offending edge in red;
* elastic: a timeline of the sink's output (failure-free reference against the mutant's run with
  the failure) with the failure step, or, for the slice split, the slice against the mutant's parts;
* intervals: the utilization / TRT curve of the reference and of the mutant with both optima (or the
  mutant's and the reference's choice of the CI optimiser).

Every function writes the file atomically and returns its path.

Examples
--------
>>> from rollcheck.properties.pictures import picture_kinds
>>> picture_kinds()["spans"]
'span diagram'

References
----------
FERDiS paper §5 (space-time diagrams); Falkirk Wheel paper §3.3 (spans); SPATE paper §4 (slices
and ACKs); Chiron paper §III (TRT); ``specs/``.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from rollcheck.properties.picture_evidence import crop_to_evidence, pattern_evidence
from rollcheck.properties.picture_evidence import why as _why

__all__ = ["draw_mutant", "picture_kinds"]


def picture_kinds() -> dict[str, str]:
    """The picture drawn for each area's killed mutants."""
    return {"foundation": "space-time diagram", "protocols": "space-time diagram",
            "simulate": "space-time diagram", "spans": "span diagram",
            "elastic": "sink timeline / slice split", "intervals": "utilization or TRT curve"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: Path, caption: str = "", alt: str = "") -> Path:
    from rollcheck.pyimpl.render import save_figure

    out.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, out, alt=alt, caption=caption)



# --------------------------------------------------------------------------- patterns
def _pattern_picture(spec: Any, cex: Any, drawn: dict[str, Any] | None, out: Path, detail: str = "") -> Path:
    from rollcheck.pyimpl.recovery import recovery_line
    from rollcheck.pyimpl.render import render_pattern

    title = f"{spec.name}: {spec.description}"[:110]
    slot = next(iter(spec.slots), "")
    broken = spec.slots.get(slot)
    if slot in ("line_fn", "propagate") and callable(broken):
        # find the failure the mutant gets wrong and draw both lines
        for r in range(1, cex.n + 1):
            import itertools

            for failed in itertools.combinations(range(cex.n), r):
                for virtual in (True, False):
                    ref = tuple(recovery_line(cex, failed, virtual=virtual).line)
                    try:
                        mut = tuple(broken(cex, failed, virtual=virtual).line)
                    except Exception:
                        continue
                    if mut != ref:
                        why = (f"{spec.name} is killed: after {', '.join(cex.processes[i] for i in failed)} "
                               f"fail{'s' if len(failed) == 1 else ''}, the mutant's line (dashed) differs from the "
                               "recovery line (red dash-dot)")
                        return render_pattern(cex, out, failed=failed, line=ref, virtual=virtual, zcycles=True,
                                              title=title, other_lines={"mutant's line": mut}, why=why)
    found = pattern_evidence(spec, cex, detail)
    cex, title = crop_to_evidence(cex, found, title)
    return render_pattern(cex, out, zcycles=True, title=title, **found)



# --------------------------------------------------------------------------- spans
def _span_picture(spec: Any, doc: dict[str, Any], detail: str, out: Path) -> Path:
    from rollcheck.properties.spans_props import definition_violations, reference_solver
    from rollcheck.pyimpl.spans.system import system_from_dict

    plt = _plt()
    from matplotlib.lines import Line2D

    s = system_from_dict(doc)
    ref = reference_solver(s)
    mut = None
    solver = spec.slots.get("solver")
    if callable(solver):
        try:
            mut = dict(solver(s))
        except Exception:
            mut = None
    names = s.names
    x = {n: k for k, n in enumerate(names)}
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(names) + 2), 4.5))
    for p in s.processors:
        top = p.top_level
        ax.plot([x[p.name]] * (top + 1), range(top + 1), color="#999999", marker="s", ms=7, ls="-", zorder=1)
        if p.top is not None:
            ax.text(x[p.name] + 0.08, top, "⊤", fontsize=10, va="center")
        ax.text(x[p.name], -0.7, p.name + ("" if p.top is not None else " (failed)"), ha="center", fontsize=9)
    offending = set(re.findall(r"edge (\S+) \(", detail))
    if mut is not None:
        offending |= {v.split("edge ", 1)[1].split(" ")[0] for v in definition_violations(s, mut)}
    for e in s.edges:
        a, b = x[e.src], x[e.dst]
        bad = e.name in offending
        arr = ax.annotate("", xy=(b, -0.35), xytext=(a, -0.35),
                          arrowprops={"arrowstyle": "->", "color": "#d62728" if bad else "#1f77b4",
                                      "lw": 2.2 if bad else 1,
                                      "connectionstyle": "arc3,rad=-0.35" if a != b else "arc3,rad=-2.5"})
        arr.arrow_patch.set_gid(("offending-edge:" if bad else "edge:") + e.name)
    ax.plot([x[n] for n in names], [ref[n] for n in names], "o", ms=13, mfc="none", mec="#2ca02c", mew=2.5, zorder=3)
    if mut is not None:
        ax.plot([x[n] for n in names], [mut[n] for n in names], "x", ms=12, color="#d62728", mew=2.5, zorder=4)
    handles = [Line2D([], [], marker="s", color="#999999", label="levels (chain, ⊤ on top)"),
               Line2D([], [], marker="o", ls="", mfc="none", mec="#2ca02c", mew=2, label="reference: greatest spans"),
               Line2D([], [], color="#1f77b4", label="edge"),
               Line2D([], [], color="#d62728", lw=2.2, label="offending edge")]
    if mut is not None:
        handles.insert(2, Line2D([], [], marker="x", ls="", color="#d62728", mew=2, label="mutant's spans"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_xlim(-0.8, len(names) - 0.2)
    ax.set_ylim(-1.0, max(p.top_level for p in s.processors) + 0.6)
    ax.set_ylabel("level")
    ax.set_xticks([])
    from rollcheck.pyimpl.render import integer_axis

    integer_axis(ax, "y")
    ax.set_title(f"{spec.name}: span system", fontsize=10)
    from rollcheck.pyimpl.render import save_figure

    wrong = [n for n in names if mut is not None and mut[n] != ref[n]]
    caption = (f"{spec.name} is killed: "
               + (f"offending edge{'s' if len(offending) > 1 else ''} {', '.join(sorted(offending))} (red)"
                  if offending else "the mutant's spans differ from the reference")
               + (f"; the mutant restores {', '.join(f'{n} at level {mut[n]}' for n in wrong)} where the greatest "
                  f"consistent spans are {', '.join(f'{n} at {ref[n]}' for n in wrong)}" if wrong and mut else "")
               + ". Green rings: the reference's spans; red crosses: the mutant's.")
    return save_figure(fig, out, alt=f"{spec.name}: span diagram", caption=caption)


# --------------------------------------------------------------------------- elastic
def _elastic_picture(spec: Any, doc: dict[str, Any], out: Path) -> Path:
    from rollcheck.pyimpl.elastic import simulate
    from rollcheck.pyimpl.elastic.configio import config_from_dict
    from rollcheck.pyimpl.render import integer_axis, save_figure

    plt = _plt()
    cfg, failure = config_from_dict(doc)
    ref = simulate(cfg)
    rules = spec.slots.get("rules")
    mut = simulate(cfg, failure=failure, rules=rules) if rules is not None else simulate(cfg, failure=failure)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.6), gridspec_kw={"width_ratios": [3, 1]})
    for res, label, marker, colour, size in ((ref, "reference, failure-free", "o", "#2ca02c", 8),
                                             (mut, "mutant, with the failure", "x", "#d62728", 7)):
        (pts,) = ax.plot(range(len(res.sink)), [e.key * 1000 + e.seq for e in res.sink], marker, ms=size,
                         color=colour, label=f"{label} ({len(res.sink)} sink events)", ls="",
                         mfc="none" if marker == "o" else colour, mew=1.8)
        pts.set_gid("reference-output" if res is ref else "mutant-output")
    # the failure where it happened: between the sink arrivals before it and those after it
    said = []
    for rec in mut.recoveries:
        at = rec.get("sink_events")
        if isinstance(at, int):
            fl = ax.axvline(at - 0.5, color="#d62728", ls=":", lw=1.5,
                            label=f"failure of {rec.get('task')} (after {at} sink arrival{'s' if at != 1 else ''})")
            fl.set_gid(f"failure:{rec.get('task')}")
            said.append(f"the failure of {rec.get('task')} after sink arrival {at - 1}" if at
                        else f"the failure of {rec.get('task')} before the first sink arrival")
    # the first wrong arrival: a duplicate, or an arrival the reference does not have
    seen: set[tuple[int, int]] = set()
    want = {(e.key, e.seq) for e in ref.sink}
    bad = None
    for k, e in enumerate(mut.sink):
        if (e.key, e.seq) in seen:
            bad = (k, e, "duplicate")
            break
        if (e.key, e.seq) not in want:
            bad = (k, e, "not in the reference")
            break
        seen.add((e.key, e.seq))
    if bad is None:
        missing = sorted(want - {(e.key, e.seq) for e in mut.sink})
        if missing:
            key, seq = missing[0]
            idx = next(k for k, e in enumerate(ref.sink) if (e.key, e.seq) == (key, seq))
            (ring,) = ax.plot([idx], [key * 1000 + seq], "o", ms=18, mfc="none", mec="#ff7f0e", mew=2.5,
                              label=f"lost: key {key}, seq {seq} (reference arrival {idx})")
            ring.set_gid(f"lost:{key}:{seq}")
            what = f"key {key}, seq {seq} never arrives (it is arrival {idx} of the reference)"
        else:
            what = "the output differs"
    else:
        k, e, kind = bad
        (ring,) = ax.plot([k], [e.key * 1000 + e.seq], "o", ms=18, mfc="none", mec="#ff7f0e", mew=2.5,
                          label=f"{kind}: key {e.key}, seq {e.seq} at arrival {k}")
        ring.set_gid(f"{'duplicate' if kind == 'duplicate' else 'unexpected'}:{e.key}:{e.seq}")
        what = f"{kind} key {e.key}, seq {e.seq} at sink arrival {k}"
    ax.set_xlabel("sink arrival (0 = first)")
    ax.set_ylabel("key·1000 + sequence number")
    integer_axis(ax)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    levels = sorted(set(ref.max_queue) | set(mut.max_queue))
    w = 0.38
    ax2.bar([lv - w / 2 for lv in levels], [ref.max_queue.get(lv, 0) for lv in levels], w, color="#2ca02c",
            label="reference")
    ax2.bar([lv + w / 2 for lv in levels], [mut.max_queue.get(lv, 0) for lv in levels], w, color="#d62728",
            label="mutant")
    ax2.set_xticks(levels)
    integer_axis(ax2, "y")
    ax2.set_xlabel("level (0 = source)")
    ax2.set_ylabel("max queue (events not yet L1-acknowledged)")
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.suptitle(f"{spec.name}: {spec.description}"[:110], fontsize=10)
    caption = (f"{spec.name} is killed: {what} (orange ring). The red dotted line is "
               + (", ".join(said) if said else "the failure") + "; green circles are the failure-free output, "
               "red crosses the mutant's.")
    return save_figure(fig, out, alt=f"{spec.name}: sink output of the reference and of the mutant", caption=caption)


def _slice_picture(spec: Any, drawn: dict[str, Any], out: Path) -> Path:
    plt = _plt()
    s, owner = drawn["case"]
    split = spec.slots.get("split")
    merge = spec.slots.get("merge")
    from rollcheck.pyimpl.elastic import merge_slices, split_slice

    parts = (split or split_slice)(s, owner)
    merged = (merge or merge_slices)(list(parts.values()))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([e.key for e in s.events], [e.seq for e in s.events], "o", ms=11, mfc="none", mec="#555555",
            label=f"slice k={s.k} ({len(s.events)} events)")
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")
    for k, (t, part) in enumerate(sorted(parts.items())):
        ax.plot([e.key for e in part.events], [e.seq for e in part.events], "x", ms=8, color=colours[k % 5],
                label=f"mutant's part for {t}")
    ev = [e for m in merged for e in m.events]
    ax.plot([e.key + 0.15 for e in ev], [e.seq for e in ev], "^", ms=6, color="#d62728",
            label=f"merge of the parts ({len(ev)} events)")
    ax.set_xlabel("key")
    ax.set_ylabel("sequence number")
    ax.legend(fontsize=7)
    ax.set_title(f"{spec.name}: slice split (Eq. 1) and merge (Eq. 2)", fontsize=10)
    return _save(fig, out, f"{spec.name} is killed: the merge of the mutant's parts (red triangles, "
                           f"{len(ev)} events) should give back the slice (grey circles, {len(s.events)} events); "
                           "a circle without a triangle is an event lost by the split.",
                 f"{spec.name}: a slice, the mutant's split parts and their merge")


# --------------------------------------------------------------------------- intervals
def _interval_picture(spec: Any, cex: Any, drawn: dict[str, Any] | None, detail: str, out: Path) -> Path:
    import numpy as np

    from rollcheck.pyimpl.intervals import optimal_interval, total_recovery_time, utilization

    plt = _plt()
    slot = next(iter(spec.slots))
    broken = spec.slots[slot]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    p = dict(drawn.get("p", {})) if drawn and isinstance(drawn.get("p"), dict) else {}
    if slot in ("optimal", "util", "simulate", "simulate_dag") and "failure_rate" in p:
        lam, c = p["failure_rate"], p["checkpoint_cost"]
        r, n, d = p.get("restart_cost", 0.0), p.get("depth", 1), p.get("token_delay", 0.0)
        t_ref = optimal_interval(lam, c)
        ts = np.geomspace(c * 1.001, max(50 * t_ref, c * 10), 400)
        ax.plot(ts, [utilization(t, lam, c, r if slot != "optimal" else 0.0, n if slot != "optimal" else 1,
                                 d if slot != "optimal" else 0.0) for t in ts],
                color="#2ca02c", label="reference utilization U(T)")
        ax.axvline(t_ref, color="#2ca02c", ls="--", label=f"reference optimum T* = {t_ref:.4g}")
        if slot == "optimal":
            try:
                t_mut = float(broken(lam, c))
                ax.axvline(t_mut, color="#d62728", ls=":", lw=2, label=f"mutant's T* = {t_mut:.4g}")
            except Exception:
                pass
        elif slot == "util":
            um = [broken(t, lam, c, r, n, d) for t in ts]
            ax.plot(ts, um, color="#d62728", ls=":", lw=2, label="mutant's U(T)")
            k = int(np.nanargmax(um))
            ax.axvline(ts[k], color="#d62728", ls="-.", label=f"mutant's optimum {ts[k]:.4g}")
        else:
            m = re.search(r"simulated mean ([0-9.eE+-]+)", detail)
            t_x = p.get("interval", t_ref)
            if m:
                ax.plot([t_x], [float(m.group(1))], "x", ms=12, mew=3, color="#d62728",
                        label="mutant's simulated mean")
            ax.axvline(t_x, color="#7f7f7f", ls=":", label=f"counterexample T = {t_x:.4g}")
        ax.set_xscale("log")
        ax.set_xlabel("checkpoint interval T")
        ax.set_ylabel("utilization")
    elif slot == "trt" and p:
        args = {k: v for k, v in p.items() if k in ("timeout", "recovery", "warmup", "ratio", "case", "reading",
                                                     "threshold")}
        ci0 = float(p.get("ci", 10.0))
        cis = np.linspace(0.0, max(2 * ci0, 10.0), 200)
        ax.plot(cis, [total_recovery_time(float(ci), **args) for ci in cis], color="#2ca02c", label="reference TRT(CI)")
        mut = []
        for ci in cis:
            try:
                mut.append(broken(float(ci), **args))
            except Exception:
                mut.append(math.nan)
        ax.plot(cis, mut, color="#d62728", ls=":", lw=2, label="mutant's TRT(CI)")
        ax.axvline(ci0, color="#7f7f7f", ls="--", label=f"counterexample CI = {ci0:.4g}")
        ax.set_xlabel("checkpoint interval CI")
        ax.set_ylabel("total recovery time")
    elif slot == "optimise" and isinstance(cex, dict) and "points" in cex:
        from rollcheck.pyimpl.intervals import ProfilingPoint, optimise_ci

        pts = [ProfilingPoint(*q) for q in cex["points"]]
        bound = cex["bound"]
        xs = np.linspace(min(q.ci for q in pts), max(q.ci for q in pts), 200)
        ax.plot([q.ci for q in pts], [q.trt for q in pts], "o", color="#1f77b4", label="profiled TRT")
        ax.plot([q.ci for q in pts], [q.latency for q in pts], "s", color="#9467bd", label="profiled latency")
        ax.axhline(bound, color="#7f7f7f", ls="--", label=f"TRT bound {bound:.4g}")
        for fn, colour, label in ((optimise_ci, "#2ca02c", "reference"), (broken, "#d62728", "mutant")):
            try:
                ch = fn(pts, bound)
                if label == "reference":
                    ax.plot(xs, ch.trt_fit(xs), color="#1f77b4", lw=1, label="TRT fit A(CI)")
                    ax.plot(xs, ch.latency_fit(xs), color="#9467bd", lw=1, label="latency fit P(CI)")
                ax.axvline(ch.ci, color=colour, ls=":", lw=2, label=f"{label}'s CI = {ch.ci:.4g}")
            except Exception as e:
                ax.plot([], [], color=colour, label=f"{label}: {type(e).__name__}")
        ax.set_xlabel("checkpoint interval CI")
    else:
        return _parameters_picture(spec, drawn, detail, out)
    ax.legend(fontsize=7)
    if ax.get_yscale() == "linear":
        ax.ticklabel_format(axis="y", useOffset=False)
    ax.set_title(f"{spec.name}: {spec.description}"[:100], fontsize=10)
    return _save(fig, out, _why(spec, detail) + ". Green: the reference; red dotted: the mutant; the vertical "
                 "lines mark the optima or the counterexample's interval.", f"{spec.name}: reference and mutant curves")


# --------------------------------------------------------------------------- timer and fallback
def _timer_picture(spec: Any, drawn: dict[str, Any], out: Path) -> Path:
    from rollcheck.pyimpl.protocols import count_schedule

    plt = _plt()
    length, every, forced = drawn["length"], drawn["every"], drawn["forced"]
    forced_at = sorted(f for f in forced if f < length)
    fig, ax = plt.subplots(figsize=(9, 2.6))
    for y, fn, label in ((1, count_schedule, "reference timer"), (0, spec.slots["schedule"], "mutant's timer")):
        basic = fn(["send"] * length, every, forced_at)
        ax.plot(basic, [y] * len(basic), "D", mfc="white", mec="black", ms=8,
                label="basic checkpoint" if y == 1 else None)
        ax.plot(forced_at, [y] * len(forced_at), "D", color="#222222", ms=8,
                label="forced checkpoint" if y == 1 else None)
        ax.text(-1, y, label, ha="right", va="center", fontsize=9)
    ax.set_xlim(-12, length + 1)
    ax.set_ylim(-0.6, 1.6)
    ax.set_yticks([])
    ax.set_xlabel(f"event (period every = {every})")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(f"{spec.name}: {spec.description}"[:100], fontsize=10)
    return _save(fig, out, f"{spec.name} is killed: its basic checkpoints (white diamonds, lower row) are not the "
                 f"reference timer's (upper row) around the forced ones (black) at {forced_at[:6]}.",
                 f"{spec.name}: checkpoint timer of the reference and of the mutant")


def _parameters_picture(spec: Any, drawn: dict[str, Any] | None, detail: str, out: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 2.5))
    ax.axis("off")
    text = "\n".join(f"{k} = {v!r}"[:110] for k, v in (drawn or {}).items()) or "(no drawn values)"
    ax.text(0.0, 1.0, text, va="top", family="monospace", fontsize=8, transform=ax.transAxes)
    ax.plot([], [], " ", label=f"violation: {detail[:90]}")
    ax.legend(loc="lower left", fontsize=7, frameon=False)
    ax.set_title(f"{spec.name}: the violating example", fontsize=10)
    return _save(fig, out, _why(spec, detail) + " (the values the property was called with are listed).",
                 f"{spec.name}: the violating example's values")


def draw_mutant(spec: Any, outcome: Any, out: str | os.PathLike[str]) -> Path:
    """Draw the picture of a killed mutant (``outcome`` from :func:`rollcheck.properties.mutation.run_mutant`)."""
    from rollcheck.pyimpl.pattern import Pattern

    out = Path(out)
    cex, drawn, detail = outcome.counterexample, outcome.drawn or {}, outcome.detail
    if isinstance(cex, Pattern):
        return _pattern_picture(spec, cex, drawn, out, detail)
    if isinstance(cex, dict) and cex.get("format") == "rollcheck.spans/1":
        return _span_picture(spec, cex, detail, out)
    if isinstance(cex, dict) and cex.get("format") == "rollcheck.elastic/1":
        return _elastic_picture(spec, cex, out)
    if spec.area == "elastic" and "case" in drawn:
        return _slice_picture(spec, drawn, out)
    if spec.area == "intervals":
        return _interval_picture(spec, cex, drawn, detail, out)
    if "schedule" in spec.slots and {"length", "every", "forced"} <= set(drawn):
        return _timer_picture(spec, drawn, out)
    return _parameters_picture(spec, drawn, detail, out)
