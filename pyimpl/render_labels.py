r"""Labels of a detailed space-time diagram, placed clear of each other.

Labels never overlap each other, a checkpoint marker or a process line: a message's label sits on
its arrow, at the first free place found by sliding it from the middle towards either end; a
checkpoint's label goes above its marker, else below, else beside it. When some message label finds
no free place (a dense diagram), the arrows are left unlabelled and a table under the diagram lists
every message with its sender, receiver and the event positions of its send and delivery.

Examples
--------
>>> clean("P" + chr(0xD800))  # a lone surrogate, as a name from the input may hold
'P\\ud800'
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.pattern import Pattern

__all__ = ["clean", "tag", "Label", "place_labels"]


def clean(text: str) -> str:
    """``text`` with lone surrogates (names from the input) as backslash escapes: encodable."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def tag(artist: Any, gid: str, label: str) -> None:
    """Name an artist (and, for an arrow, its patch, which is what a PNG or SVG shows).

    Parameters
    ----------
    artist : matplotlib.artist.Artist
        The artist to name.
    gid : str
        Its id in an SVG.
    label : str
        Its label.
    """
    gid, label = clean(gid), clean(label)
    artist.set_gid(clean(gid))
    artist.set_label(label)
    patch = getattr(artist, "arrow_patch", None)
    if patch is not None:
        patch.set_gid(clean(gid))
        patch.set_label(label)


class Label:
    """A message label to place: its text, colour and the arrow (or end point) it belongs to.

    Parameters
    ----------
    mid : str
        The message id.
    text : str
        The label's text.
    colour : str
        The arrow's colour.
    seg : tuple of tuple of float
        The arrow's start and end points (data coordinates).
    end_label : bool, optional
        Label the end point, not the arrow (an in-transit message).
    """

    __slots__ = ("mid", "text", "colour", "seg", "end_label")

    def __init__(self, mid: str, text: str, colour: str,
                 seg: tuple[tuple[float, float], tuple[float, float]], end_label: bool = False):
        self.mid, self.text, self.colour, self.seg, self.end_label = mid, text, colour, seg, end_label


_RING = 2.4  # a useless checkpoint's ring (19 pt, 2.2 pt edge) relative to the diamond's 11 pt box
# fractions of the arrow tried for a message label, from the middle outwards
_ALONG = (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78, 0.15, 0.85, 0.35, 0.65, 0.45, 0.55, 0.27, 0.73)


def _crosses(seg: tuple[tuple[float, float], tuple[float, float]],
             b: tuple[float, float, float, float]) -> bool:
    """Whether the segment ``seg`` meets the box ``b`` (Liang–Barsky clipping)."""
    (x0, y0), (x1, y1) = seg
    dx, dy = x1 - x0, y1 - y0
    lo, hi = 0.0, 1.0
    for pk, qk in ((-dx, x0 - b[0]), (dx, b[2] - x0), (-dy, y0 - b[1]), (dy, b[3] - y0)):
        if pk == 0:
            if qk < 0:
                return False
        else:
            r = qk / pk
            if pk < 0:
                lo = max(lo, r)
            else:
                hi = min(hi, r)
            if lo > hi:
                return False
    return True


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(p: Pattern, fig: Any, ax: Any, y: dict[int, int], x_end: float,
                  ck_labels: list[tuple[str, float, float]], labels: list[Label],
                  useless: list[tuple[int, int]], cx: Any) -> None:
    """Place checkpoint and message labels without overlaps (see the module docstring).

    Parameters
    ----------
    p : Pattern
        The drawn pattern.
    fig, ax : matplotlib Figure and Axes
        Where it is drawn.
    y : dict of int to int
        Per process, its line's y.
    x_end : float
        The x of the volatile states.
    ck_labels : list of tuple
        ``(text, x, y)`` of every checkpoint label.
    labels : list of Label
        The message labels.
    useless : list of tuple of int
        The useless checkpoints ``(process, index)`` (drawn with a ring).
    cx : callable
        ``cx(i, x)``: the x of checkpoint C[i,x].
    """
    renderer = fig.canvas.get_renderer()
    origin = ax.transData.transform((0.0, 0.0))
    px_x, px_y = ax.transData.transform((1.0, 1.0)) - origin  # pixels per data unit

    def size(text: str, fontsize: float) -> tuple[float, float]:
        t = ax.text(0, 0, text, fontsize=fontsize)
        bb = t.get_window_extent(renderer=renderer)
        t.remove()
        return (bb.width + 4) / px_x, (bb.height + 2) / px_y  # a little padding

    def box(xc: float, yc: float, w: float, h: float) -> tuple[float, float, float, float]:
        return (xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2)

    # obstacles: checkpoint markers (rings are larger), volatile states with their "V", process lines
    mw, mh = 11 / px_x * fig.dpi / 72, 11 / px_y * fig.dpi / 72  # a 9 pt diamond plus margin
    ring = {(i, x) for i, x in useless}
    taken: list[tuple[float, float, float, float]] = []
    for i in range(p.n):
        for x in range(p.last_index(i) + 1):
            k = _RING if (i, x) in ring else 1.0
            taken.append(box(cx(i, x), y[i], mw * k, mh * k))
        taken.append((x_end - mw, y[i] - mh, x_end + 9 / px_x * fig.dpi / 72 + size("V", 8)[0],
                      y[i] + mh))
    gap_x, gap_y = 2 / px_x * fig.dpi / 72, 2 / px_y * fig.dpi / 72  # 2 pt between label and marker
    line_half = 1.5 / px_y  # half the width of a process line
    lines = [(-1.5, y[i] - line_half, x_end, y[i] + line_half) for i in range(p.n)]

    arrows = [lab.seg for lab in labels if not lab.end_label]

    def free(b: tuple[float, float, float, float], own: Any = None, strict: bool = True) -> bool:
        """No label, marker or process line under ``b``; ``strict``: no other arrow either."""
        if any(_overlaps(b, o) for o in taken) or any(_overlaps(b, ln) for ln in lines):
            return False
        return not strict or not any(seg is not own and _crosses(seg, b) for seg in arrows)

    for text, xc, yc in ck_labels:
        w, h = size(text, 7)
        k = _RING if any(cx(i, x) == xc and y[i] == yc for i, x in ring) else 1.0
        dy = mh * k / 2 + h / 2 + gap_y
        dx = mw * k / 2 + w / 2 + gap_x
        offsets = ((0, dy), (0, -dy), (-dx, dy), (dx, dy), (-dx, -dy), (dx, -dy))
        options = [box(xc + ox, yc + oy, w, h) for ox, oy in offsets]
        # clear of arrows if possible, else clear of labels and markers, else above
        b = next((o for o in options if free(o)), None) or next(
            (o for o in options if free(o, strict=False)), options[0])
        taken.append(b)
        ax.text((b[0] + b[2]) / 2, (b[1] + b[3]) / 2, text, fontsize=7, ha="center", va="center",
                zorder=5, bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))

    placed: list[tuple[Label, tuple[float, float, float, float]]] = []
    for lab in labels:
        w, h = size(lab.text, 7)
        (x0, y0), (x1, y1) = lab.seg
        if lab.end_label:
            cands = [(x1 + w / 2 + 0.1, y1), (x1, y1 + h), (x1, y1 - h), (x1 - w / 2 - 0.1, y1)]
        else:
            cands = [(x0 + t * (x1 - x0), y0 + t * (y1 - y0)) for t in _ALONG]
        boxes = [box(xc, yc, w, h) for xc, yc in cands]
        own = None if lab.end_label else lab.seg
        spot = next((o for o in boxes if free(o, own)), None) or next(
            (o for o in boxes if free(o, own, strict=False)), None)
        if spot is None:
            placed = []
            break
        taken.append(spot)
        placed.append((lab, spot))
    if labels and len(placed) == len(labels):
        for lab, bx in placed:
            ax.text((bx[0] + bx[2]) / 2, (bx[1] + bx[3]) / 2, lab.text, fontsize=7, color=lab.colour,
                    ha="center", va="center", zorder=5,
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
    elif labels:
        _message_table(p, fig, ax, x_end)


def _message_table(p: Pattern, fig: Any, ax: Any, x_end: float) -> None:
    """The dense fallback: event positions along the bottom and a table of the messages."""
    step = max(1, len(p.events) // 40)
    for e in range(0, len(p.events), step):
        ax.text(e, -0.55, str(e), fontsize=6, ha="center", va="center", color="#555555")
    rows = []
    for m in p.messages:
        dst = "in transit" if m.deliver_event is None else f"{p.processes[m.receiver]} @{m.deliver_event}"
        rows.append(f"{m.id}: {p.processes[m.sender]} @{m.send_event} → {dst}")
    ncol = max(1, min(4, (len(rows) + 11) // 12))
    per = -(-len(rows) // ncol)
    cols = ["\n".join(rows[k * per:(k + 1) * per]) for k in range(ncol)]
    # below the legend (which hangs about 20 pt under the axes), whatever the figure's height
    for k, col in enumerate(cols):
        ax.annotate(col, (k / ncol, 0.0), xycoords="axes fraction", xytext=(0, -44),
                    textcoords="offset points", fontsize=7, va="top", ha="left", family="monospace")
    ax.annotate("messages (sender @send position → receiver @delivery position):", (0.0, 0.0),
                xycoords="axes fraction", xytext=(0, -30), textcoords="offset points", fontsize=8,
                va="top", ha="left")

