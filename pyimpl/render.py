"""Space-time diagrams of patterns (matplotlib, PNG or SVG).

Processes are horizontal lines (P0 on top), time runs left to right in the pattern's global event
order, messages are arrows from send to delivery (dashed and open-ended while in transit),
checkpoints are diamonds (basic: white, forced: filled), the volatile state is a small circle at
the end. Optionally the recovery line for a failed set is drawn as a polyline, and useless
checkpoints are ringed with one Z-cycle each drawn in colour. Patterns with more than
``MAX_DETAILED_PROCESSES`` processes or ``MAX_DETAILED_MESSAGES`` messages get a summary view.

Labels never overlap each other, a checkpoint marker or a process line: a message's label sits on
its arrow, at the first free place found by sliding it from the middle towards either end; a
checkpoint's label goes above its marker, else below, else beside it. When some message label finds
no free place (a dense diagram), the arrows are left unlabelled and a table under the diagram lists
every message with its sender, receiver and the event positions of its send and delivery (the
positions are marked along the bottom of the diagram).

References
----------
.. [1] FERDiS paper (``ferdis-…``), Figs. 5–8 (space-time diagrams of checkpoint patterns).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.patternio import atomic_output
from rollcheck.pyimpl.render_labels import Label as _Label
from rollcheck.pyimpl.render_labels import clean as _clean
from rollcheck.pyimpl.render_labels import place_labels as _place_labels
from rollcheck.pyimpl.render_labels import tag as _tag

__all__ = ["render_pattern", "save_figure", "integer_axis", "MAX_DETAILED_PROCESSES", "MAX_DETAILED_MESSAGES"]

MAX_DETAILED_PROCESSES = 12
MAX_DETAILED_MESSAGES = 150
_CYCLE_COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]
_COLOUR_NAMES = ["red", "blue", "green", "purple", "orange", "brown", "pink"]
_CYCLE_STYLES = ["-", "--", ":", "-."]


def render_pattern(
    p: Pattern,
    out: str | os.PathLike[str],
    failed: Iterable[int] = (),
    zcycles: bool = False,
    line: tuple[int, ...] | None = None,
    virtual: bool = True,
    title: str | None = None,
    highlight: Iterable[str] = (),
    other_lines: Mapping[str, tuple[int, ...]] | None = None,
    highlight_checkpoints: Iterable[tuple[int, int]] = (),
    caption: str | None = None,
    why: str = "",
) -> Path:
    """Draw ``p`` to ``out`` (``.png`` or ``.svg``), atomically, and return the path.

    Parameters
    ----------
    failed : iterable of int
        Failed processes: their recovery line is computed and drawn (unless ``line`` is given).
    zcycles : bool
        Ring every useless checkpoint and draw one Z-cycle through each.
    line : tuple of int, optional
        A cut to draw as the recovery line (index last+1 = volatile).
    highlight : iterable of str
        Message ids to draw thick (e.g. an orphan or a witness Z-path).
    other_lines : mapping of str to tuple of int, optional
        Further cuts to draw, each with its label in the legend (e.g. a wrong line next to the
        reference recovery line, or a snapshot with orphans).
    highlight_checkpoints : iterable of (process, index)
        Checkpoints to ring in red (e.g. the one a failed process wrongly restores).
    caption : str, optional
        What to look at; by default one is written from what is drawn (the failure, the line,
        the useless checkpoints and their Z-cycles, the highlighted messages). Stored in the PNG
        (see :func:`save_figure`).
    why : str
        A sentence put in front of the default caption (what the picture is evidence of).

    Every element a reader must find carries a matplotlib ``gid``: ``message:m3``,
    ``offending-message:m36``, ``checkpoint:P0:2``, ``offending-checkpoint:P1:2``,
    ``useless:P0:2``, ``zcycle-1:m11`` (the second Z-cycle's arrow for m11), ``recovery-line``,
    ``cut:<label>``, ``failure:P1``.
    """
    out = Path(out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise InvalidInputError(f"output must end in .png or .svg, got {out.name!r}", location="-o")
    failed = tuple(failed)
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if line is None and failed:
        from rollcheck.pyimpl.recovery import recovery_line

        line = recovery_line(p, failed, virtual=virtual).line
    highlight = [h for h in highlight if isinstance(h, str)]
    marks = [tuple(c) for c in highlight_checkpoints]
    drawn: dict[str, Any] = {}
    if p.n > MAX_DETAILED_PROCESSES or p.num_messages > MAX_DETAILED_MESSAGES:
        fig = _summary(p, plt, zcycles, title, set(highlight), drawn)
    else:
        fig = _detailed(p, plt, failed, zcycles, line, title, set(highlight), dict(other_lines or {}),
                        marks, drawn)  # type: ignore[arg-type]
    text = caption if caption is not None else _caption(p, failed, line, highlight, marks,
                                                          dict(other_lines or {}), drawn, why)
    alt = (title or f"space-time diagram of {p.n} processes") + ": " + text
    _plain_texts(fig)
    return save_figure(fig, out, alt=alt[:300], caption=text)


def _names(items: list[str], most: int = 4) -> str:
    """``m3, m5 and m7``; ``m3, m5, m7, m9 and 4 more``."""
    if len(items) <= most:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return ", ".join(items[:most]) + f" and {len(items) - most} more"


def _caption(p: Pattern, failed: tuple[int, ...], line: tuple[int, ...] | None, highlight: list[str],
             marks: list[tuple[int, ...]], other_lines: dict[str, tuple[int, ...]], drawn: dict[str, Any],
             why: str) -> str:
    """The default caption: what to look at, naming every highlighted element."""
    parts = [why.rstrip(". ") + "." if why else ""]
    if failed:
        parts.append(f"{_names([p.processes[i] for i in failed])} fail{'s' if len(failed) == 1 else ''} "
                     "(red cross at the end of the line).")
    if line is not None:
        restored = [f"{p.processes[i]}:{'V' if line[i] == p.volatile_index(i) else f'C{line[i]}'}"
                    for i in range(p.n)]
        parts.append(f"The recovery line (red dash-dot) restores {', '.join(restored)}.")
    for label, cut in other_lines.items():
        parts.append(f"The {label} (dashed) is the cut {', '.join(f'{p.processes[i]}:C{cut[i]}' for i in range(p.n))}.")
    if highlight and drawn.get("summary"):
        parts.append(f"Look at {_names(highlight)} (the channels that carry them are boxed in red).")
    elif highlight:
        parts.append(f"Look at {_names(highlight)} (thick red arrow{'s' if len(highlight) > 1 else ''}, "
                     "labelled).")
    if marks:
        parts.append(f"Ringed in red: {_names([f'{p.processes[i]}:C{x}' for i, x in marks])}.")
    cycles = drawn.get("cycles") or {}
    if cycles:
        desc = [f"{p.processes[c[0]]}:C{c[1]} (Z-cycle {' → '.join(w)}, {_COLOUR_NAMES[k % len(_COLOUR_NAMES)]})"
                for k, (c, w) in enumerate(cycles.items())]
        parts.append(f"Useless checkpoint{'s' if len(desc) > 1 else ''} (orange ring): {'; '.join(desc)}.")
        shared = drawn.get("shared") or []
        if shared:
            parts.append(f"{_names(shared)} belong{'s' if len(shared) == 1 else ''} to more than one Z-cycle: "
                         "drawn once per cycle, side by side.")
    elif drawn.get("zcycles"):
        parts.append("No checkpoint is useless.")
    if drawn.get("summary"):
        parts.append("Too large to draw event by event: messages per channel (highlighted channels carry the "
                     "named messages) and checkpoints per process.")
    return " ".join(x for x in parts if x).strip() or f"{p.n} processes, {p.num_messages} messages."


def save_figure(fig: Any, out: str | os.PathLike[str], *, alt: str = "", caption: str = "",
                dpi: int = 110, tight: bool = True) -> Path:
    """Write ``fig`` to ``out`` atomically with its alt text and caption, and close it.

    A PNG keeps ``alt`` as its ``Title`` text and ``caption`` (what to look at in the picture) as
    its ``Description`` text; an SVG keeps them as its title and description. The report of
    ``rollcheck verify`` shows them under the picture.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure (closed afterwards).
    out : str or path-like
        The file; its suffix picks the format.
    alt : str, optional
        The alt text.
    caption : str, optional
        What to look at in the picture.
    dpi : int, optional
        The resolution of a raster image.
    tight : bool, optional
        Crop the figure to its content.

    Returns
    -------
    Path
        The file written.

    Examples
    --------
    >>> import tempfile, matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from PIL import Image
    >>> fig, ax = plt.subplots()
    >>> with tempfile.TemporaryDirectory() as d:
    ...     out = save_figure(fig, Path(d) / "x.png", alt="a line", caption="look at the line")
    ...     Image.open(out).text["Description"]
    'look at the line'
    """
    import matplotlib.pyplot as plt

    out = Path(out)
    fmt = out.suffix.lower().lstrip(".") or "png"
    meta: dict[str, str] = {}

    if fmt in ("png", "svg"):
        if alt:
            meta["Title"] = _clean(alt)
        if caption:
            meta["Description"] = _clean(caption)
    try:
        with atomic_output(out) as tmp:
            fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight" if tight else None,
                        metadata=meta or None)
    finally:
        plt.close(fig)
    return out


def integer_axis(ax: Any, which: str = "both") -> None:
    """Integer ticks on an axis that counts things (events, levels, arrivals).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes.
    which : str, optional
        ``"x"``, ``"y"`` or ``"both"``.
    """
    from matplotlib.ticker import MaxNLocator

    if which in ("x", "both"):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if which in ("y", "both"):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _plain_texts(fig: Any) -> None:
    r"""Every text of ``fig`` drawn literally.

    No mathtext (a name like ``$\frac$`` is not TeX); lone surrogates (not encodable) are written as
    backslash escapes such as ``\ud800``.
    """
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        t.set_parse_math(False)
        s = t.get_text()
        if s and not s.isascii():
            t.set_text(s.encode("utf-8", "backslashreplace").decode("utf-8"))


def _detailed(p: Pattern, plt: Any, failed: tuple[int, ...], zcycles: bool,
              line: tuple[int, ...] | None, title: str | None, highlight: set[str],
              other_lines: dict[str, tuple[int, ...]] | None = None,
              marks: list[tuple[int, int]] | None = None, drawn: dict[str, Any] | None = None) -> Any:
    from matplotlib.lines import Line2D

    n, T = p.n, len(p.events)
    width = min(18.0, max(6.0, 0.28 * T + 2.5))
    fig, ax = plt.subplots(figsize=(width, 0.9 * n + 1.6))
    y = {i: n - 1 - i for i in range(n)}
    x_end = T + 0.6
    for i in range(n):
        ax.plot([-1.5, x_end], [y[i], y[i]], color="black", lw=1.2, zorder=1)
        ax.text(-2.0, y[i], p.processes[i], ha="right", va="center", fontsize=10, fontweight="bold")

    def cx(i: int, x: int) -> float:
        if x == p.volatile_index(i):
            return float(x_end)
        ev = p.checkpoint_event(i, x)
        return -1.0 if ev < 0 else float(ev)

    useless, cycles, cyc_colour, in_cycles, shared = _cycles(p, zcycles)
    if drawn is not None:
        drawn.update(cycles=cycles, shared=shared, zcycles=zcycles)
    labels = _messages(p, ax, y, highlight, cyc_colour, in_cycles)

    ck_labels: list[tuple[str, float, float]] = []
    for i in range(n):
        for x in range(p.last_index(i) + 1):
            forced = p.is_forced(i, x)
            (mk,) = ax.plot(cx(i, x), y[i], marker="D", ms=9, mec="black",
                            mfc="#222222" if forced else "white", zorder=4)
            mk.set_gid(_clean(f"checkpoint:{p.processes[i]}:{x}"))
            ck_labels.append((f"C{x}", cx(i, x), y[i]))
        ax.plot(x_end, y[i], marker="o", ms=6, mec="black", mfc="#bbbbbb", zorder=4)
        ax.annotate("V", (x_end, y[i]), xytext=(9, 0), textcoords="offset points", fontsize=8,
                    va="center")  # clear of the failure cross
        if i in failed:
            (fx,) = ax.plot(x_end, y[i], marker="x", ms=13, mew=3, color="#d62728", zorder=6)
            fx.set_gid(_clean(f"failure:{p.processes[i]}"))
            fx.set_label(_clean(f"failure of {p.processes[i]}"))
    for i, x in useless:
        (rg,) = ax.plot(cx(i, x), y[i], marker="o", ms=19, mfc="none", mec="#ff7f0e", mew=2.2, zorder=3)
        rg.set_gid(_clean(f"useless:{p.processes[i]}:{x}"))
    for i, x in marks or []:
        (rg,) = ax.plot(cx(i, x), y[i], marker="o", ms=23, mfc="none", mec="#d62728", mew=2.6, zorder=3)
        rg.set_gid(_clean(f"offending-checkpoint:{p.processes[i]}:{x}"))
        rg.set_label(_clean(f"{p.processes[i]}:C{x}"))
    if line is not None:
        xs = [cx(i, line[i]) for i in range(n)]
        ys = [y[i] for i in range(n)]
        (rl,) = ax.plot(xs, ys, color="#d62728", lw=2, ls="-.", zorder=3, alpha=0.8)
        rl.set_gid(_clean("recovery-line"))
    handles = _handles(useless, shared, highlight, marks, line)
    for k, (label, cut) in enumerate((other_lines or {}).items()):
        colour = ("#1f77b4", "#9467bd", "#17becf")[k % 3]
        (cl,) = ax.plot([cx(i, cut[i]) for i in range(n)], [y[i] - 0.06 * (k + 1) for i in range(n)], color=colour,
                        lw=2, ls="--", zorder=3, alpha=0.85)
        cl.set_gid(_clean(f"cut:{label}"))
        handles.append(Line2D([], [], color=colour, ls="--", label=label))
    if failed:
        handles.append(Line2D([], [], marker="x", ls="", color="#d62728", label="failed process"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=min(6, len(handles)),
              fontsize=8, frameon=False)
    ax.set_xlim(-3.2, x_end + 1.2)
    ax.set_ylim(-0.7, n - 0.3)
    ax.axis("off")
    _place_labels(p, fig, ax, y, x_end, ck_labels, labels, useless, cx)
    ax.set_title(title or f"{n} processes, {p.num_messages} messages", fontsize=11)
    return fig


def _cycles(p: Pattern, zcycles: bool) -> tuple[list[tuple[int, int]], dict[tuple[int, int], list[str]],
                                                dict[str, str], dict[str, list[int]], list[str]]:
    """The useless checkpoints and their Z-cycles, as the drawing colours them.

    One Z-cycle of each useless checkpoint, the colour of every message on one, the cycles each
    message is on, and the messages on several.
    """
    useless: list[tuple[int, int]] = []
    cycles: dict[tuple[int, int], list[str]] = {}
    if zcycles:
        from rollcheck.pyimpl.zpaths import useless_checkpoints, zcycle

        useless = [tuple(c) for c in useless_checkpoints(p)]  # type: ignore[misc]
        for c in useless:
            w = zcycle(p, c)
            if w:
                cycles[c] = w
    cyc_colour: dict[str, str] = {}
    in_cycles: dict[str, list[int]] = {}
    for k, (_c, w) in enumerate(cycles.items()):
        for mid in w:
            cyc_colour.setdefault(mid, _CYCLE_COLOURS[k % len(_CYCLE_COLOURS)])
            in_cycles.setdefault(mid, []).append(k)
    shared = sorted((m for m, ks in in_cycles.items() if len(ks) > 1), key=lambda m: (len(m), m))
    return useless, cycles, cyc_colour, in_cycles, shared


def _messages(p: Pattern, ax: Any, y: dict[int, int], highlight: set[str], cyc_colour: dict[str, str],
              in_cycles: dict[str, list[int]]) -> list[_Label]:
    """Draw every message's arrow (one more per further Z-cycle it is on); their labels to place."""
    labels: list[_Label] = []
    for m in p.messages:
        x0, y0 = m.send_event, y[m.sender]
        colour = cyc_colour.get(m.id, "#555555")
        lw = 2.4 if (m.id in cyc_colour or m.id in highlight) else 1.0
        if m.id in highlight and m.id not in cyc_colour:
            colour = "#d62728"
        if m.deliver_event is None:
            x1, y1 = x0 + 1.5, y0 + (y[m.receiver] - y0) * 0.45
            a = ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                            arrowprops=dict(arrowstyle="-|>", color=colour, lw=lw, ls="--"), zorder=2)
            _tag(a, ("offending-message:" if m.id in highlight else "message:") + m.id, m.id)
            labels.append(_Label(m.id, f"{m.id} (in transit)", colour, ((x1, y1), (x1, y1)),
                                 end_label=True))
        else:
            x1, y1 = m.deliver_event, y[m.receiver]
            a = ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                            arrowprops=dict(arrowstyle="-|>", color=colour, lw=lw,
                                            shrinkA=2, shrinkB=2), zorder=2)
            _tag(a, ("offending-message:" if m.id in highlight else "message:") + m.id, m.id)
            labels.append(_Label(m.id, m.id, colour, ((x0, y0), (x1, y1))))
            # a message on several Z-cycles: one more arrow per further cycle, beside the first,
            # in that cycle's colour and line style
            for j, k in enumerate(in_cycles.get(m.id, [])[1:], start=1):
                off = 0.4 * j
                c2 = _CYCLE_COLOURS[k % len(_CYCLE_COLOURS)]
                a2 = ax.annotate("", xy=(x1 + off, y1), xytext=(x0 + off, y0),
                                 arrowprops=dict(arrowstyle="-|>", color=c2, lw=2.4,
                                                 ls=_CYCLE_STYLES[k % len(_CYCLE_STYLES)],
                                                 shrinkA=2, shrinkB=2), zorder=2)
                _tag(a2, f"zcycle-{k}:{m.id}", f"{m.id} (Z-cycle {k + 1})")
    return labels


def _handles(useless: list[tuple[int, int]], shared: list[str], highlight: set[str],
             marks: list[tuple[int, int]] | None, line: tuple[int, ...] | None) -> list[Any]:
    """The legend's entries for the markers and the marked evidence (the cuts and failures follow)."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="D", ls="", mfc="white", mec="black", label="basic checkpoint"),
        Line2D([], [], marker="D", ls="", mfc="#222222", mec="black", label="forced checkpoint"),
        Line2D([], [], marker="o", ls="", mfc="#bbbbbb", mec="black", label="volatile state V"),
    ]
    if useless:
        handles.append(Line2D([], [], marker="o", ls="", mfc="none", mec="#ff7f0e", mew=2,
                              label=f"useless checkpoint ({len(useless)}), its Z-cycle in colour"))
    if shared:
        handles.append(Line2D([], [], color="#1f77b4", ls="--", lw=2,
                              label=f"{_names(shared, 2)}: on several Z-cycles, one arrow per cycle"))
    if highlight:
        handles.append(Line2D([], [], color="#d62728", lw=2.4, label="offending message"))
    if marks:
        handles.append(Line2D([], [], marker="o", ls="", mfc="none", mec="#d62728", mew=2.4,
                              label="offending checkpoint"))
    if line is not None:
        handles.append(Line2D([], [], color="#d62728", ls="-.", label="recovery line"))
    return handles


def _summary(p: Pattern, plt: Any, zcycles: bool, title: str | None, highlight: set[str] | None = None,
             drawn: dict[str, Any] | None = None) -> Any:
    import numpy as np

    n = p.n
    counts = np.zeros((n, n), dtype=np.int64)
    a = p.arrays
    np.add.at(counts, (a.sender, a.receiver), 1)
    forced = np.array([sum(p.is_forced(i, x) for x in range(1, p.last_index(i) + 1)) for i in range(n)])
    basic = np.asarray(p.last_indices) - forced
    useless = np.zeros(n, dtype=np.int64)
    if zcycles:
        from rollcheck.pyimpl.zpaths import useless_checkpoints

        for c in useless_checkpoints(p):
            useless[c.process] += 1
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.5))
    im = ax1.imshow(counts, cmap="viridis")
    if drawn is not None:
        drawn["summary"] = True
    from matplotlib.patches import Rectangle

    for m in p.messages:
        if highlight and m.id in highlight:
            r = Rectangle((m.receiver - 0.5, m.sender - 0.5), 1, 1, fill=False, ec="#d62728", lw=2.5, zorder=5)
            r.set_gid(_clean(f"offending-message:{m.id}"))
            ax1.add_patch(r)
    if highlight:
        ax1.plot([], [], "s", mfc="none", mec="#d62728", mew=2, label=f"channel of {_names(sorted(highlight), 3)}")
        ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, frameon=False)
    ax1.set_title("messages per channel (sender row → receiver column)")
    ax1.set_xlabel("receiver")
    ax1.set_ylabel("sender")
    fig.colorbar(im, ax=ax1, shrink=0.8)
    idx = np.arange(n)
    ax2.bar(idx, basic, label="basic", color="#bbbbbb", edgecolor="black")
    ax2.bar(idx, forced, bottom=basic, label="forced", color="#222222")
    if zcycles and useless.any():
        ax2.plot(idx, useless, "o", color="#ff7f0e", label=f"useless ({int(useless.sum())})")
    from matplotlib.ticker import MaxNLocator

    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.set_xlabel("process")
    ax2.set_ylabel("checkpoints")
    ax2.set_title("checkpoints per process")
    ax2.legend(loc="lower right")
    in_transit = int((a.deliver_interval < 0).sum())
    fig.suptitle(title or f"summary: {n} processes, {p.num_messages} messages "
                 f"({in_transit} in transit), {len(p.events)} events")
    return fig


