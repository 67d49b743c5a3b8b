"""Every picture shows the bug it was drawn for: one test per picture kind.

Each picture is drawn as SVG, where every artist rollcheck names (``gid``) keeps its id, and the
test asserts that the offending element is drawn — the orphan message and the snapshot cut, the
failure, the recovery line and the wrongly restored checkpoint, the second arrow of a message on
two Z-cycles, the duplicate at the sink and the failure before it — and that the caption names it.
The mutants are run under the derandomised ``ci`` profile (a few seconds each).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rollcheck.pyimpl.pattern import PatternBuilder
from rollcheck.pyimpl.render import render_pattern


def _ids(svg: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', svg.read_text(encoding="utf-8")))


def _caption(path: Path) -> str:
    from rollcheck.report import picture_text

    return picture_text(path)[1]


def _killed(name: str, out: Path) -> tuple[object, Path]:
    from rollcheck.properties.mutation import MUTANTS, load_all, run_mutant
    from rollcheck.properties.pictures import draw_mutant

    load_all()
    spec = MUTANTS[name]
    outcome = run_mutant(spec, "ci")
    assert outcome.verdict == "killed", outcome.detail
    svg = draw_mutant(spec, outcome, out / f"{name}.svg")
    png = draw_mutant(spec, outcome, out / f"{name}.png")
    return outcome, svg if png.is_file() else png


def _orphan_pattern():  # P0 checkpoints, then sends m1; P1 delivers m1, then checkpoints
    b = PatternBuilder(["P0", "P1"])
    b.send(0, 1, "m0")
    b.deliver(1, "m0")
    b.checkpoint(0)
    m = b.send(0, 1, "m1")
    b.deliver(1, m)
    b.checkpoint(1)
    return b.build()


def test_space_time_snapshot_orphan_is_highlighted_and_named(tmp_path: Path) -> None:
    p = _orphan_pattern()
    out = render_pattern(p, tmp_path / "orphan.svg", highlight=["m1"], other_lines={"snapshot 1": (1, 1)},
                         why="orphan m1 in snapshot 1")
    ids = _ids(out)
    assert "offending-message:m1" in ids and "message:m0" in ids and "cut:snapshot 1" in ids
    png = render_pattern(p, tmp_path / "orphan.png", highlight=["m1"], other_lines={"snapshot 1": (1, 1)},
                         why="orphan m1 in snapshot 1")
    cap = _caption(png)
    assert cap.startswith("orphan m1 in snapshot 1.") and "m1" in cap and "snapshot 1" in cap


def test_legend_does_not_count_zero_useless_checkpoints(tmp_path: Path) -> None:
    out = render_pattern(_orphan_pattern(), tmp_path / "clean.svg", zcycles=True)
    text = out.read_text(encoding="utf-8")
    assert "useless checkpoint (0)" not in text
    assert "No checkpoint is useless" in _caption(render_pattern(_orphan_pattern(), tmp_path / "c.png", zcycles=True))


def test_cl_no_block_mutant_shows_its_orphan_in_its_snapshot(tmp_path: Path) -> None:
    outcome, svg = _killed("sim-cl-aligned-no-block", tmp_path)
    orphans = re.findall(r"m\d+", outcome.detail.split("orphans", 1)[1].split("]", 1)[0])
    snap = re.search(r"snapshot (\d+)", outcome.detail).group(1)
    ids = _ids(tmp_path / "sim-cl-aligned-no-block.svg")
    assert f"offending-message:{orphans[0]}" in ids and f"cut:snapshot {snap}" in ids
    cap = _caption(tmp_path / "sim-cl-aligned-no-block.png")
    assert f"orphan {orphans[0]}" in cap and f"snapshot {snap}" in cap


def test_domino_mutant_shows_failure_line_restored_checkpoint_and_both_cycles(tmp_path: Path) -> None:
    outcome, _ = _killed("sim-uc-domino", tmp_path)
    m = re.search(r"fail=([^@]+)@.*restores C\[\d+,(\d+)\]", outcome.detail)
    failed, restored = m.group(1), m.group(2)
    ids = _ids(tmp_path / "sim-uc-domino.svg")
    assert f"failure:{failed}" in ids and "recovery-line" in ids
    assert f"offending-checkpoint:{failed}:{restored}" in ids
    useless = [i for i in ids if i.startswith("useless:")]
    assert len(useless) >= 2
    # the counterexample's two Z-cycles share a message: it is drawn once more for the second cycle
    assert any(i.startswith("zcycle-1:") for i in ids), sorted(ids)
    cap = _caption(tmp_path / "sim-uc-domino.png")
    assert f"{failed} fails" in cap and f"C{restored}" in cap and "more than one Z-cycle" in cap


def test_elastic_timeline_puts_the_failure_where_it_happened(tmp_path: Path) -> None:
    outcome, _ = _killed("elastic-no-dedup", tmp_path)
    ids = _ids(tmp_path / "elastic-no-dedup.svg")
    dup = [i for i in ids if i.startswith("duplicate:")]
    assert dup and any(i.startswith("failure:") for i in ids)
    cap = _caption(tmp_path / "elastic-no-dedup.png")
    at = int(re.search(r"at sink arrival (\d+)", cap).group(1))
    after = int(re.search(r"after sink arrival (\d+)", cap).group(1))
    assert after < at  # the failure comes before the duplicate it causes, not after every event


def test_queue_bound_band_and_measured_line_both_drawn(tmp_path: Path) -> None:
    from rollcheck.sections.sec_elastic import _bound_picture
    from rollcheck.suite import VerifyContext

    ctx = VerifyContext(profile="ci", quick=True, out_dir=tmp_path, seed=0, log=lambda s: None)
    row = _bound_picture(ctx)
    png = Path(row.pictures[0])
    assert "band" in _caption(png) and row.status == "pass"


@pytest.mark.parametrize("lambdas,shape", [((0.1, 0.05, 0.025, 0.005), (2, 2)), ((0.1, 0.005), (1, 2))])
def test_interval_figure_has_at_most_two_panels_a_row(tmp_path: Path, lambdas: tuple, shape: tuple) -> None:
    from PIL import Image

    from rollcheck.sections.sec_intervals import _plot
    from rollcheck.suite import VerifyContext

    ctx = VerifyContext(profile="ci", quick=True, out_dir=tmp_path, seed=0, log=lambda s: None)
    path, npts, worst, _ = _plot(ctx, "f.png", "t", (1,), lambdas, 3, 2, 1)
    w, h = Image.open(path).size
    rows, cols = shape
    assert w / cols >= 500 and h / rows >= 350  # each panel at least 5 x 3.5 inches at 100 dpi
    assert "standard errors" in _caption(Path(path))
