"""The Flink matrix's HTML table as a reader meets it: rendered by headless Chromium.

A table of four cells (conformant, expected by the engine, a finding with its witness and
reproducer, an inconclusive one) is written by ``write_html`` next to the files it links, opened in
Chromium (``make chromium`` installs it): the rendered DOM has one row per configuration and one
column per failure, every link resolves to a file beside the page, and a screenshot is not blank.
Without Chromium the test skips (fails under ``CI=true``). Cost: about 5-15 s.
"""

from __future__ import annotations

import html.parser
from pathlib import Path

from rollcheck.flink_replay.matrix import summarise, write_html


class _Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows = 0
        self.cells = 0
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.rows += tag == "tr"
        self.cells += tag == "td"
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


def _cell(out: Path, job: str, failure: str, verdict: str, *, expected: bool = False,
          finding: bool = False) -> dict:
    ident = f"{job}-hashmap-aligned-{failure}-rescale2-1"
    files = {"trace": out / f"{ident}.jsonl"}
    if finding or expected:
        files["witness"] = out / f"{ident}.witness.json"
    if finding:
        files["reproducer"] = out / f"{ident}.repro.py"
    for f in files.values():
        f.write_text("{}\n")
    return {"engine": "flink", "module": f"examples/flink_jobs/{job}.py", "failure": {"kind": failure},
            "config": {"backend": "hashmap", "checkpoints": "aligned", "rescale": [2, 1]}, "verdict": verdict,
            "expected_by_engine": expected, "reason": f"{verdict} <because> & so on",
            "witness": None, "reproducer": None, **{k: str(v) for k, v in files.items()}}


def test_matrix_table_renders_in_chromium(tmp_path: Path, chromium) -> None:
    cells = [_cell(tmp_path, "keyed_totals", "task", "conformant"),
             _cell(tmp_path, "keyed_totals", "taskmanager", "inconclusive"),
             _cell(tmp_path, "totals_side_effect_sink", "task", "not-conformant", expected=True),
             _cell(tmp_path, "volatile_totals", "task", "not-conformant", finding=True)]
    page = write_html({"cells": cells, "summary": summarise(cells)}, tmp_path / "index.html")
    text = page.read_text()
    assert "&lt;because&gt; &amp; so on" in text and str(tmp_path) not in text  # escaped, links relative
    dom = chromium("--virtual-time-budget=3000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Page()
    parsed.feed(dom.stdout)
    assert parsed.rows == 1 + 3 and parsed.cells == 3 * 3  # header + 3 configurations; label + 2 failures
    assert ("1 conformant, 2 not conformant (1 expected by the engine, 1 finding(s)), 1 inconclusive"
            in dom.stdout)
    assert "(expected by the engine)" in dom.stdout
    assert len(parsed.hrefs) == 4 + 2 + 1 and all((tmp_path / h).is_file() for h in parsed.hrefs), parsed.hrefs
    shot = tmp_path / "shot.png"
    res = chromium("--window-size=1000,600", f"--screenshot={shot}", page.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        lo, hi = im.convert("L").getextrema()
        colours = len(im.convert("RGB").getcolors(maxcolors=1 << 20) or [])
    assert hi - lo > 100 and colours > 20  # text and the verdict colours drawn, not a blank page
