"""Comparison tables like FERDiS Tables 4–6: protocol × workload × basic-checkpoint interval.

For every combination the sweep runs, for each seed, the failure-free job and the same job with
one fail-stop failure of a fixed operator instance half-way through the failure-free run, and
averages the FERDiS metrics over the seeds. Aligned Chandy–Lamport on the cyclic query is
reported as ``deadlock`` (FERDiS could not run coordinated checkpointing on it either).

References
----------
.. [1] FERDiS paper, §9.2 Table 4 (regular/forced checkpoints), §9.3 Table 5 (rollback distance),
   Table 6 (lost messages under volatile logs).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.simulate.config import PROTOCOL_NAMES, SimConfig
from rollcheck.pyimpl.simulate.engine import run_engine, simulate
from rollcheck.pyimpl.simulate.metrics import compute_metrics
from rollcheck.pyimpl.simulate.topology import WORKLOADS

__all__ = ["FAIL_AT", "SweepRow", "sweep", "to_markdown", "to_csv", "plot"]

#: The failing operator instance of each workload (a stateful middle operator, like FERDiS).
FAIL_AT = {"nexmark": "filter.0", "wordcount": "count.0", "nhop": "map0.0"}

COLUMNS = ("workload", "protocol", "interval", "regular", "forced", "useless", "rollback_distance",
           "max_rollback_distance", "rollback_time", "lost_messages", "verdict", "domino_runs", "seeds")


@dataclass(frozen=True)
class SweepRow:
    """One table row: means over the seeds (``verdict``: the worst verdict seen)."""

    workload: str
    protocol: str
    interval: float
    regular: float
    forced: float
    useless: float
    rollback_distance: float
    max_rollback_distance: float
    rollback_time: float
    lost_messages: float
    verdict: str
    domino_runs: int
    seeds: int

    def as_dict(self) -> dict[str, Any]:
        """The row as a dict of the :data:`COLUMNS`."""
        return {c: getattr(self, c) for c in COLUMNS}


_RANK = {"exactly-once": 0, "at-least-once": 1, "at-most-once": 2, "none": 3, "deadlock": 4}


def _mean(xs: Sequence[float]) -> float:
    return round(sum(xs) / len(xs), 3) if xs else 0.0


def sweep(workloads: Sequence[str] = tuple(WORKLOADS), protocols: Sequence[str] = PROTOCOL_NAMES,
          intervals: Sequence[float] = (5.0, 10.0), seeds: Sequence[int] = (0, 1, 2), records: int = 120,
          parallelism: int = 2, virtual: bool = True, persistent_logs: bool = False,
          fraction: float = 0.5) -> list[SweepRow]:
    """Run the sweep; one :class:`SweepRow` per (workload, protocol, interval).

    Parameters
    ----------
    workloads : sequence of str, optional
        The workloads.
    protocols : sequence of str, optional
        The protocols.
    intervals : sequence of float, optional
        The checkpoint intervals.
    seeds : sequence of int, optional
        The seeds averaged over (at least one).
    records : int, optional
        The records per source instance.
    parallelism : int, optional
        The instances per operator.
    virtual : bool, optional
        Virtual checkpoints in the recovery line.
    persistent_logs : bool, optional
        Message logs survive the failure of their process.
    fraction : float, optional
        When the failure strikes, as a fraction of the failure-free run's end (in (0, 1)).

    Examples
    --------
    >>> rows = sweep(["nhop"], ["cl-aligned", "hmnr"], [5.0], seeds=[0], records=20, persistent_logs=True)
    >>> [(r.protocol, r.verdict, r.forced > 0) for r in rows]
    [('cl-aligned', 'deadlock', False), ('hmnr', 'exactly-once', True)]
    """
    if not seeds:
        raise InvalidInputError("a sweep needs at least one seed", location="--seeds")
    if not 0 < fraction < 1:
        raise InvalidInputError(f"failure fraction must be in (0, 1), got {fraction!r}", location="--fail-fraction")
    rows = []
    for wl in workloads:
        for proto in protocols:
            for iv in intervals:
                base = SimConfig(wl, proto, interval=iv, parallelism=parallelism, records=records,
                                 virtual=virtual, persistent_logs=persistent_logs)
                base.validate()
                acc: dict[str, list[float]] = {k: [] for k in COLUMNS[3:10]}
                verdict, domino = "exactly-once", 0
                for s in seeds:
                    cfg = replace(base, seed=s)
                    ref = run_engine(cfg)
                    if ref.deadlock is not None:
                        verdict = "deadlock"
                        acc["regular"].append(ref.checkpoints["regular"])
                        acc["forced"].append(0)
                        continue
                    res = simulate(replace(cfg, fail=FAIL_AT[wl], fail_at=round(fraction * ref.end_time, 6)),
                                   reference=ref)
                    m = res.metrics
                    free = compute_metrics(ref)
                    acc["regular"].append(ref.checkpoints["regular"])
                    acc["forced"].append(ref.checkpoints["forced"])
                    acc["useless"].append(free["useless_checkpoints"])
                    acc["rollback_distance"].append(m.get("rollback_distance", 0))
                    acc["max_rollback_distance"].append(m.get("max_rollback_distance", 0))
                    acc["rollback_time"].append(m.get("rollback_time", 0.0))
                    acc["lost_messages"].append(m.get("lost_messages", 0))
                    domino += int(bool(m.get("domino")))
                    if _RANK[m["verdict"]] > _RANK[verdict]:
                        verdict = m["verdict"]
                means = {k: _mean(acc[k]) for k in COLUMNS[3:10]}
                rows.append(SweepRow(workload=wl, protocol=proto, interval=float(iv), verdict=verdict,
                                     domino_runs=domino, seeds=len(seeds), **means))
    return rows


def to_markdown(rows: Sequence[SweepRow]) -> str:
    """The table as GitHub markdown."""
    head = ("| workload | protocol | interval | regular | forced | useless | rollback distance (sum) "
            "| max distance | rollback time | lost msgs | verdict | domino runs |")
    out = [head, "|" + "---|" * 12]
    for r in rows:
        if r.verdict == "deadlock":
            out.append(f"| {r.workload} | {r.protocol} | {r.interval:g} | – | – | – | – | – | – | – "
                       "| **deadlock** | – |")
            continue
        out.append(f"| {r.workload} | {r.protocol} | {r.interval:g} | {r.regular:g} | {r.forced:g} | "
                   f"{r.useless:g} | {r.rollback_distance:g} | {r.max_rollback_distance:g} | "
                   f"{r.rollback_time:g} | {r.lost_messages:g} | {r.verdict} | {r.domino_runs}/{r.seeds} |")
    return "\n".join(out) + "\n"


def to_csv(rows: Sequence[SweepRow]) -> str:
    """The rows as CSV text, a header line of :data:`COLUMNS` first."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r.as_dict())
    return buf.getvalue()


_DEADLOCK = "#bbbbbb"
_KNOWN_COLOURS = {"uc": "#d95f02", "bcs": "#7570b3", "hmnr": "#1b9e77", "cl-aligned": "#e7298a",
                  "cl-unaligned": "#66a61e"}
_OTHER_COLOURS = ("#e6ab02", "#a6761d", "#1f78b4", "#666666", "#fb9a99", "#b15928")


def _protocol_colours(protocols: Sequence[str]) -> dict[str, str]:
    """A distinct colour per protocol, in order of first appearance (known ones keep theirs).

    Examples
    --------
    >>> _protocol_colours(["uc", "my.py:Eager", "uc", "hmnr"])
    {'uc': '#d95f02', 'my.py:Eager': '#e6ab02', 'hmnr': '#1b9e77'}
    """
    out: dict[str, str] = {}
    spare = iter(_OTHER_COLOURS)
    for name in protocols:
        if name not in out:
            out[name] = _KNOWN_COLOURS.get(name) or next(spare, "#999999")
    return out


def plot(rows: Sequence[SweepRow], out: str | Path) -> Path:
    """Bar charts (forced checkpoints, rollback distance, lost messages) written atomically.

    One colour per protocol, named in a legend above the charts (grey: the run deadlocked).

    Parameters
    ----------
    rows : sequence of SweepRow
        The sweep's rows.
    out : str or Path
        The image file.

    Returns
    -------
    Path
        The file written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rollcheck.pyimpl.render import integer_axis, save_figure

    out = Path(out)
    keys = [r for r in rows]
    from matplotlib.patches import Patch

    colour_of = _protocol_colours([r.protocol for r in keys])
    fig, axes = plt.subplots(3, 1, figsize=(max(8, 0.55 * len(keys)), 9), sharex=True)
    for ax, field_, title in zip(axes, ("forced", "rollback_distance", "lost_messages"),
                                 ("forced checkpoints (failure-free)", "rollback distance (intervals, sum)",
                                  "lost messages (one failure)"), strict=True):
        vals = [0 if r.verdict == "deadlock" else getattr(r, field_) for r in keys]
        colours = [_DEADLOCK if r.verdict == "deadlock" else colour_of[r.protocol] for r in keys]
        ax.bar(range(len(keys)), vals, color=colours)
        ax.set_title(title, fontsize=9)
        integer_axis(ax, "y")  # counts
        for k, r in enumerate(keys):
            if r.verdict == "deadlock":
                ax.text(k, 0, "deadlock", rotation=90, ha="center", va="bottom", fontsize=7)
    # under each bar its interval (the colour names the protocol), under each run of bars of one
    # workload the workload's name, with a thin line between workloads: no label overlaps another
    axes[-1].set_xticks(range(len(keys)))
    axes[-1].set_xticklabels([f"{r.interval:g}" for r in keys], fontsize=7)
    groups: list[tuple[str, int, int]] = []
    for k, r in enumerate(keys):
        if groups and groups[-1][0] == r.workload:
            groups[-1] = (r.workload, groups[-1][1], k)
        else:
            groups.append((r.workload, k, k))
    for name, first, last in groups:
        axes[-1].annotate(name, xy=((first + last) / 2, 0), xycoords=("data", "axes fraction"),
                          xytext=(0, -24), textcoords="offset points", ha="center", va="top",
                          fontsize=8, fontweight="bold")
        if first:
            for ax in axes:
                ax.axvline(first - 0.5, color="#999999", lw=0.6)
    axes[-1].set_xlabel("checkpoint interval, by workload", fontsize=8, labelpad=26)
    handles = [Patch(color=c, label=name) for name, c in colour_of.items()]
    if any(r.verdict == "deadlock" for r in keys):
        handles.append(Patch(color=_DEADLOCK, label="deadlock (no value)"))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.legend(handles=handles, loc="upper center", ncol=min(len(handles), 7), fontsize=8,
               title="protocol", title_fontsize=8, frameon=False)
    dead = sorted({f"{r.protocol} on {r.workload}" for r in keys if r.verdict == "deadlock"})
    useless = sorted({f"{r.protocol} on {r.workload}" for r in keys if getattr(r, "useless", 0)})
    caption = ("One bar per protocol, workload and interval. Compare the protocols' bars within a workload: "
               "forced checkpoints (top) are what CIC pays, rollback distance (middle) and lost messages "
               "(bottom) what a failure costs."
               + (f" Runs with useless checkpoints: {', '.join(useless)}." if useless else "")
               + (f" Deadlocked (grey, no value): {', '.join(dead)}." if dead else ""))
    out.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, out, alt="Protocol comparison: forced checkpoints, rollback distance and lost "
                       "messages per workload and interval", caption=caption, tight=False)
