"""Every Python snippet in the docs runs as written, and the drawn diagrams have no overlapping labels.

A fenced ``python`` block of README.md or of a page under docs/ is run as a script with the
venv's interpreter, in a scratch copy of ``examples/`` (so ``open("examples/...")`` resolves and
``from my_index_fixed import ...`` imports the shipped file); a block that defines ``test_*``
functions has them called afterwards, as pytest would (Hypothesis tests under the ``ci`` profile).
A snippet's stated results are written as ``assert`` statements, so a stale number fails here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
# runs the snippet, then its test functions; Hypothesis gets rollcheck's ci profile (60 examples)
DRIVER = """
import sys
sys.path.insert(0, "examples")
from rollcheck.properties import profiles
profiles.load_profile()  # ROLLCHECK_PROFILE (ci unless told): 60 examples, derandomised
source = open(sys.argv[1], encoding="utf-8").read()
ns = {"__name__": "__docs__"}
exec(compile(source, sys.argv[2], "exec"), ns)
for name, fn in list(ns.items()):
    if name.startswith("test_") and callable(fn):
        fn()
"""

# for snippets that run in the PyFlink environment, where rollcheck is not installed
PLAIN_DRIVER = """
import sys
sys.path.insert(0, "examples")
source = open(sys.argv[1], encoding="utf-8").read()
exec(compile(source, sys.argv[2], "exec"), {"__name__": "__docs__"})
"""


def _python_blocks() -> list[tuple[str, int, str]]:
    found = []
    for path in DOCS:
        rel = str(path.relative_to(ROOT))
        lang = None
        start = 0
        body: list[str] = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = FENCE.match(line)
            if lang is None and m:
                lang, start, body = m.group(1), n, []
            elif lang is not None and line.strip() == "```":
                if lang in ("python", "py"):
                    found.append((rel, start, "\n".join(body) + "\n"))
                lang = None
            elif lang is not None:
                body.append(line)
    return found


BLOCKS = _python_blocks()


def test_python_blocks_found() -> None:
    assert len(BLOCKS) >= 6, [f"{d}:{n}" for d, n, _ in BLOCKS]


@pytest.mark.parametrize("doc,line,code", BLOCKS, ids=[f"{d}:{n}" for d, n, _ in BLOCKS])
def test_python_block_runs(doc: str, line: int, code: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "snippet.py").write_text(code, encoding="utf-8")
    env = dict(os.environ)
    env.setdefault("ROLLCHECK_PROFILE", "ci")
    python, driver = sys.executable, DRIVER
    if re.search(r"^\s*(from|import) pyflink\b", code, re.M):
        # a PyFlink job runs in the separate PyFlink environment (stdlib + apache-flink only)
        from rollcheck.flink_replay.environment import find_flink

        python, driver = str(find_flink().python), PLAIN_DRIVER
    proc = subprocess.run([python, "-P", "-c", driver, "snippet.py", f"{doc}:{line}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{doc}:{line}: the snippet failed\n{proc.stderr[-3000:]}"


def test_diagram_labels_do_not_overlap() -> None:
    """The README's diagram: no label overlaps another label, a checkpoint marker or a process line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rollcheck.pyimpl import render
    from rollcheck.pyimpl.patternio import load_pattern

    p = load_pattern(ROOT / "examples" / "useless.json")
    fig = render._detailed(p, plt, (1,), True, None, None, set())
    try:
        ax = fig.axes[0]
        r = fig.canvas.get_renderer()
        texts = [t for t in ax.texts if t.get_text().strip()]
        boxes = {id(t): t.get_window_extent(renderer=r) for t in texts}
        labels = [t for t in texts if re.fullmatch(r"C\d+|m\d+( \(in transit\))?", t.get_text())]
        assert len(labels) >= 15, [t.get_text() for t in labels]  # every checkpoint and message
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                assert not boxes[id(a)].overlaps(boxes[id(b)]), (a.get_text(), b.get_text())
        px = fig.dpi / 72  # pixels per point
        for ln in ax.lines:
            xy = ax.transData.transform(ln.get_xydata())
            if ln.get_marker() in ("D", "o") and len(xy) == 1:  # a checkpoint, ring or volatile state
                (mx, my), half = xy[0], ln.get_markersize() * px / 2
                for t in labels:
                    bb = boxes[id(t)]
                    assert not (bb.x0 < mx + half and mx - half < bb.x1 and bb.y0 < my + half
                                and my - half < bb.y1), (t.get_text(), "covers a marker")
            elif len(xy) == 2 and xy[0][1] == xy[1][1] and ln.get_marker() in ("None", None, ""):
                y0, half = xy[0][1], ln.get_linewidth() * px / 2  # a process line
                for t in labels:
                    bb = boxes[id(t)]
                    assert not (bb.y0 < y0 + half and y0 - half < bb.y1 and bb.x0 < xy[1][0]
                                and xy[0][0] < bb.x1), (t.get_text(), "lies on a process line")
    finally:
        plt.close(fig)
