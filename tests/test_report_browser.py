"""verify's report as a reader meets it: rendered by headless Chromium.

A report is written from rows of three sections (a failure, an inconclusive check, a killed
mutant with its picture, a picture drawn outside the report folder, a detail naming an absolute
path inside the report) and opened in Chromium (``make chromium`` installs it). The page's own
script counts, after the load event, the images that did not load and the in-page links that lead
nowhere; the test reads those counts from ``--dump-dom``, checks every local link and picture
against the files, that a failure is one click from the top, and takes a screenshot that must not
be blank. Without Chromium the test skips — and fails under ``CI=true``. Cost: about 5-10 s.
"""

from __future__ import annotations

import html.parser
from pathlib import Path

from rollcheck.pyimpl.pattern import PatternBuilder
from rollcheck.pyimpl.render import render_pattern
from rollcheck.report import write_report
from rollcheck.suite import Row


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.ids: set[str] = set()
        self.alts: list[str | None] = []
        self.body: dict[str, str | None] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "a" and a.get("href"):
            self.hrefs.append(str(a["href"]))
        if tag == "img":
            self.srcs.append(str(a.get("src")))
            self.alts.append(a.get("alt"))
        if tag == "body":
            self.body = a


def _report(tmp: Path) -> Path:
    out = tmp / "report"
    b = PatternBuilder(["P0", "P1"])
    b.checkpoint(0)
    m = b.send(0, 1)
    b.deliver(1, m)
    b.checkpoint(1)
    outside = render_pattern(b.build(), tmp / "drawn-elsewhere.png", highlight=[m], why=f"orphan {m}")
    inside = render_pattern(b.build(), out / "mutants" / "mutant.png", failed=[1])
    (out / "mutants" / "mutant.replay.py").write_text("print('replay')\n", encoding="utf-8")
    (out / "logs").mkdir(parents=True)
    for s in ("foundation", "mutants", "tlc"):
        (out / "logs" / f"{s}.log").write_text("log\n", encoding="utf-8")
    rows = [
        Row("zpath", "Hypothesis", "no Z-cycle property", "pass", 100, section="foundation"),
        Row("recovery", "pyimpl", "example drawn", "fail", 1, "patterns", detail=f"orphan {m}",
            pictures=[str(outside)], section="foundation"),
        Row("hmnr", "mutants", "hmnr-no-c2 killed by zcycle-free: HMNR without C2", "pass", 3, "examples",
            detail=f"killed; reproducer {out.resolve() / 'mutants' / 'mutant.replay.py'}",
            pictures=[str(inside)], section="mutants"),
        Row("bcs", "mutants", "bcs-safe-variant safe (stays correct)", "pass", 1, section="mutants"),
        Row("hmnr", "TLC", "HMNR invariant", "inconclusive", 0, "states", detail="java not found", section="tlc"),
    ]
    meta = {"verdict": "5 checks: 3 passed, 1 failed, 1 inconclusive in 1.0s",
            "words": {"run": "quick run (small bounds)", "profile": "ci", "seed": "0 (the default)"},
            "versions": {"python": "3.11"}, "quick": True, "seed": 0, "profile": "ci",
            "section_titles": {"foundation": "Foundation", "mutants": "Mutation catalogue", "tlc": "TLA+"},
            "section_seconds": {"foundation": 1.0, "mutants": 2.0, "tlc": 0.5}}
    write_report(rows, out, meta)
    return out


def test_report_renders_in_chromium_with_every_picture_and_link(tmp_path: Path, chromium) -> None:
    out = _report(tmp_path)
    page = out / "index.html"
    text = page.read_text(encoding="utf-8")
    assert str(tmp_path) not in text and "/tmp/" not in text  # every path relative to the report
    assert "quick: True" not in text and "seed: 0<" not in text

    dom = chromium("--virtual-time-budget=5000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Links()
    parsed.feed(dom.stdout)
    body = parsed.body
    assert body.get("data-rendered") == "yes", dom.stdout[:500]
    assert body.get("data-images") == "2" and body.get("data-images-broken") == "0", body
    assert body.get("data-links-dead") == "0", body

    # every local link and picture resolves to a file of the report; every anchor to an element
    for ref in parsed.hrefs + parsed.srcs:
        if ref.startswith("#"):
            assert ref[1:] in parsed.ids, ref
        else:
            assert not ref.startswith(("/", "file:")) and (out / ref.split("#")[0]).is_file(), ref
    assert all(alt for alt in parsed.alts)
    # a failure is one click from the top: the first list after the contents links to its row
    first_fail = dom.stdout.index("id=\"failed\"")
    assert "href=\"#row-2\"" in dom.stdout[first_fail:first_fail + 400]
    assert "mutants/mutant.replay.py" in parsed.hrefs  # the reproducer, linked relative to the report
    assert dom.stdout.index("id=\"contents\"") < first_fail

    shot = tmp_path / "shot.png"
    res = chromium("--window-size=1200,1600", f"--screenshot={shot}", page.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        lo, hi = im.convert("L").getextrema()
    assert hi - lo > 100  # text and colours drawn, not a blank page


def test_sections_put_failures_then_inconclusive_then_killed_mutants_first(tmp_path: Path) -> None:
    out = _report(tmp_path)
    text = (out / "index.html").read_text(encoding="utf-8")
    mut = text[text.index("id='sec-mutants'"):]
    assert mut.index("hmnr-no-c2 killed") < mut.index("bcs-safe-variant")
    assert "<details class='section' id='sec-foundation' open>" in text  # a failing section opens
    assert "<details class='section' id='sec-mutants'>" in text
    assert "<figcaption><b>example drawn</b>: orphan m" in text  # the caption stored in the PNG
    assert "The evidence of this check" not in text  # both pictures carry their own caption
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "[Failed checks (1)](#failed)" in md and "examined 1 pattern" in md
