"""``rollcheck verify`` as a person sees it: one section run end to end through the CLI.

The section ``yours`` runs ``check protocol`` and ``check trace`` on shipped examples (package data),
so it also shows that verify needs nothing from the checkout.
"""

from __future__ import annotations

import json
import re
import stat

from rollcheck.cli.main import main
from rollcheck.suite import Row, canonical_algorithm, summary_line


def test_verify_section_report_verdict_and_versions(tmp_path, capsys) -> None:
    out = tmp_path / "report"
    rc = main(["verify", "--quick", "--only", "yours", "--out", str(out), "--seed", "3"])
    stdout = capsys.readouterr().out
    assert rc == 0, stdout
    last = stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"7 checks: 7 passed, 0 failed, 0 inconclusive in (\d+h)?(\d+m)?[\d.]+s", last), last
    md = (out / "report.md").read_text(encoding="utf-8").splitlines()
    assert md[0] == "# rollcheck verification report"
    assert md[2] == f"**{last}**"  # the report opens with the same verdict
    text = "\n".join(md)
    for needle in ("- seed: 3 (given with --seed)", "- profile: ci", "- run: quick run", "hypothesis", "z3-solver",
                   "commit", "| your system |", "## <a id=\"sec-yours\"></a>", "logs/yours.log"):
        assert needle in text, needle
    for python_ism in ("quick: True", "quick: False", "seed: 3\n", "seed from"):
        assert python_ism not in text, python_ism
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert doc["verdict"] == last and doc["seed"] == 3 and len(doc["rows"]) == 7
    assert all(r["section"] == "yours" and r["checks"] for r in doc["rows"])
    assert (out / "logs" / "yours.log").is_file() and doc["section_seconds"]["yours"] > 0
    assert doc["versions"]["python"] and doc["versions"]["hypothesis"]
    pictures = [p for r in doc["rows"] for p in r["pictures"]]
    assert pictures and all(not p.startswith("/") and (out / p).is_file() for p in pictures)
    for f in ("report.md", "index.html", "results.json"):
        assert stat.S_IMODE((out / f).stat().st_mode) & 0o044 == 0o044  # readable by group/others


def test_summary_line_and_grid_names() -> None:
    rows = [Row("zpath", "Hypothesis", "a", "pass", 3), Row("zpaths", "Z3", "b", "fail", 1),
            Row("x", "TLC", "c", "inconclusive", 0)]
    assert summary_line(rows, 75) == "3 checks: 1 passed, 1 failed, 1 inconclusive in 1m15s"
    assert summary_line(rows[:1], 5) == "1 check: 1 passed, 0 failed, 0 inconclusive in 5.0s"
    assert canonical_algorithm("zpath") == canonical_algorithm("zpaths")  # near-duplicates merged
    assert canonical_algorithm("recovery")[0] == canonical_algorithm("recovery-line")[0]


def test_shipped_data_is_the_examples_one_copy() -> None:
    """verify reads package data (``rollcheck/data``); the docs show ``examples/``: one copy, the
    example a symlink to the package data, never a second file that could drift."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shown = {p: list(root.joinpath("examples").rglob(p.name))
             for p in (root / "rollcheck" / "data").iterdir()
             if p.is_file() and p.name != "__init__.py"}
    assert sum(1 for ex in shown.values() if ex) >= 10
    for p, ex in shown.items():
        for e in ex:
            assert e.is_symlink() and e.resolve() == p.resolve(), f"{e}: a second copy of {p.name}"


def test_bad_jobs_is_bad_input(tmp_path, capsys) -> None:
    for flag in ("--jobs", "--engine-jobs"):
        rc = main(["verify", "--quick", "--only", "yours", "--out", str(tmp_path / "r"), flag, "0"])
        err = capsys.readouterr().err
        assert rc == 2 and flag in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()  # nothing written
