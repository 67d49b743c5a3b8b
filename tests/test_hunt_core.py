"""The hunt's engine-neutral core on the toy engine (``tests/hunt_toy.py``): determinism, findings,
minimisation, deduplication, triage, rejected programs, the store's invariants, the document."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hunt_toy  # noqa: E402

from rollcheck.infra.hunt import (  # noqa: E402
    Budget,
    CellOutcome,
    Hunt,
    HuntCell,
    HuntOptions,
    HuntStore,
    build_document,
    exit_code,
)
from rollcheck.infra.hunt.minimise import minimise  # noqa: E402


def hunt(out: Path, adapter: Any, *, seed: int = 1, programs: int = 5, jobs: int = 1,
         shrink_runs: int = 20) -> dict[str, Any]:
    store = HuntStore.open(out / "hunt.sqlite")
    if not store.meta():
        store.set_meta(seed=seed, engine="toy", format="rollcheck.hunt/1")
    budget = Budget(programs=programs)
    try:
        Hunt(adapter, store, HuntOptions(out=out, seed=seed, budget=budget, jobs=jobs,
                                         shrink_runs=shrink_runs)).run()
        return build_document(adapter, store, out, budget)
    finally:
        store.close()


def modules(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "programs").glob("*.py"))}


def test_the_same_seed_writes_the_same_programs_whatever_the_jobs(tmp_path: Path) -> None:
    a = hunt(tmp_path / "a", hunt_toy.ToyHuntAdapter(), seed=11, programs=12)
    b = hunt(tmp_path / "b", hunt_toy.ToyHuntAdapter(), seed=11, programs=12, jobs=3)
    c = hunt(tmp_path / "c", hunt_toy.ToyHuntAdapter(), seed=12, programs=12)
    assert len(modules(tmp_path / "a")) == 12
    assert modules(tmp_path / "a") == modules(tmp_path / "b")
    assert modules(tmp_path / "a") != modules(tmp_path / "c")
    assert a["coverage"]["operators"] == b["coverage"]["operators"]
    assert (a["cells"], a["programs"]) == (b["cells"], b["programs"])
    assert a["coverage"]["checks"] == b["coverage"]["checks"]
    assert c["seed"] == 12


def test_coverage_steers_the_grammar_towards_what_it_has_used_least(tmp_path: Path) -> None:
    doc = hunt(tmp_path, hunt_toy.ToyHuntAdapter(), seed=5, programs=12)
    assert all(n >= 3 for n in doc["coverage"]["operators"].values()), doc["coverage"]["operators"]
    assert doc["coverage"]["pairs"] and all(">" in k for k in doc["coverage"]["pairs"])


def test_a_random_hunt_finds_a_planted_bug_and_minimises_it(tmp_path: Path) -> None:
    adapter = hunt_toy.ToyHuntAdapter()
    for seed in range(1, 7):  # the first seed whose 20 programs hit a planted bug
        doc = hunt(tmp_path / str(seed), adapter, seed=seed, programs=20)
        if doc["findings"]:
            break
    assert exit_code(doc) == 1 and doc["findings"]
    assert any(len(f["operators"]) < len(f["operators_found"]) for f in doc["findings"])
    for f in doc["findings"]:
        assert f["checks"] == ["batch-equivalent", "exactly-once"]
        assert set(f["signature"].split("|")[2].split("+")) == set(f["operators"])
        bug_a = "dedup" in f["operators"] and "filter" in f["operators"]
        assert f["status"] == ("fixed in 2.0" if bug_a else "open")
        assert (f["report"] is None) == bug_a
        # the minimised module shows the same symptom when judged again
        cell = HuntCell(f["cell"], {"fail_at": int(f["cell"].split("@b")[1])})
        again = adapter.confirm(Path(f["module"]), cell, tmp_path)
        assert again.verdict == "violated"
        assert sorted(k for k, v in again.checks.items() if v == "violated") == f["checks"]
        assert Path(f["reproducer"]).is_file()
        if f["report"]:
            assert Path(f["report"]).read_text().startswith("# toy 1.0:")


def test_findings_are_deduplicated_triaged_and_reported(tmp_path: Path) -> None:
    doc = hunt(tmp_path, hunt_toy.ToyBugs(), programs=5)
    f1, f2 = doc["findings"]
    # bug A: twice with one pre-signature, once behind a union (another pre-signature, the same
    # signature once minimised): one finding of three programs
    assert f1["signature"] == "batch-equivalent+exactly-once|-|dedup+filter+source"
    assert f1["programs"] == 3 and f1["program"] == "P0000"
    assert f1["reproducer_run"] == {"1.0": "reproduced", "1.1": "reproduced", "2.0": "not reproduced"}
    assert f1["status"] == "fixed in 2.0" and f1["report"] is None
    assert not (tmp_path / "findings" / "F1.md").exists()
    assert (tmp_path / "findings" / "F1.py").read_text() == Path(f1["module"]).read_text()
    assert f2["signature"] == "batch-equivalent+exactly-once|-|count+source+union"
    assert f2["status"] == "open" and f2["programs"] == 1
    report = (tmp_path / "findings" / "F2.md").read_text()
    assert "## Steps to reproduce" in report and "exactly-once" in report and "seed 1" in report
    # the rejected program is counted, never a finding
    assert doc["coverage"]["programs"]["rejected"] == 1 and doc["coverage"]["outcomes"]["rejected"] == 3
    assert all(f["program"] != "P0002" for f in doc["findings"])
    assert doc["interesting"] == {"programs": 4, "of": 5, "share": 0.8}
    assert doc["unconfirmed"] == 0 and doc["candidates"] >= 6
    # minimised three times: bug A's first pre-signature, its union variant (a duplicate), bug B
    assert doc["triage"] == {"finding": 2, "duplicate": 1}


def test_the_minimisation_keeps_to_its_run_budget(tmp_path: Path) -> None:
    adapter = hunt_toy.ToyBugs()
    p = adapter.generate(1, 0, {})
    cell = HuntCell("fail@b1", {"fail_at": 1})
    seen = next(o for c, o in adapter.run(p, _write(tmp_path, p), [cell], tmp_path))
    none = minimise(adapter, p, cell, seen, tmp_path / "m0", 0, lambda: False)
    assert none.program == p and none.runs == 0
    some = minimise(adapter, p, cell, seen, tmp_path / "m1", 20, lambda: False)
    assert some.runs <= 20 and len(set(some.program.operators)) < len(set(p.operators))
    stopped = minimise(adapter, p, cell, seen, tmp_path / "m2", 20, lambda: True)
    assert stopped.runs == 0


def _write(d: Path, p: Any) -> Path:
    m = d / f"{p.id}.py"
    m.write_text(p.text)
    return m


class _NeverConfirms(hunt_toy.ToyFixedAdapter):
    SPECS = [hunt_toy.SPEC_BUG_A]

    def confirm(self, module: Path, cell: HuntCell, workdir: Path) -> CellOutcome:
        return CellOutcome("conformant", {"exactly-once": "held"})


def test_a_finding_the_matrix_does_not_confirm_is_dropped_and_counted(tmp_path: Path) -> None:
    doc = hunt(tmp_path, _NeverConfirms(), programs=1)
    assert doc["findings"] == [] and doc["unconfirmed"] == 1
    assert exit_code(doc) == 0  # the failure-free cell was conformant
    assert not (tmp_path / "findings").exists()


@pytest.mark.parametrize(("adapter", "code"), [(hunt_toy.ToyClean, 0), (hunt_toy.ToyRejected, 3),
                                               (hunt_toy.ToyBugs, 1)])
def test_exit_codes(tmp_path: Path, adapter: type, code: int) -> None:
    doc = hunt(tmp_path, adapter(), programs=3)
    assert exit_code(doc) == code
    if code == 3:
        assert doc["coverage"]["programs"]["rejected"] == 3 and doc["findings"] == []


def test_cells_left_running_by_a_kill_run_again_and_done_ones_never(tmp_path: Path) -> None:
    adapter = hunt_toy.ToyClean()
    store = HuntStore.open(tmp_path / "hunt.sqlite")
    store.set_meta(seed=1, engine="toy")
    p = adapter.generate(1, 0, {})
    cells = adapter.cells(p, 1)
    (tmp_path / "programs").mkdir()
    (tmp_path / "programs" / "P0000.py").write_text(p.text)
    store.add_program(0, p, "programs/P0000.py", cells)
    store.mark_running("P0000", [c.key for c in cells])
    assert store.record_outcome("P0000", "none", CellOutcome("conformant", {"x": "held"}))
    store.close()  # as a kill leaves it: one cell done, the others running
    doc = hunt(tmp_path, adapter, programs=1)
    assert doc["cells"] == len(cells) and doc["programs"] == 1
    assert adapter.runs == len(cells) - 1  # the done cell was not run again
    store = HuntStore.open(tmp_path / "hunt.sqlite")
    try:
        assert not store.record_outcome("P0000", "none", CellOutcome("violated", {"x": "violated"}))
        assert store.open_cells("P0000") == []
    finally:
        store.close()


def test_the_document_has_the_contract_fields(tmp_path: Path) -> None:
    doc = hunt(tmp_path, hunt_toy.ToyBugs(), programs=2)
    for key in ("engine", "engine_version", "reference_version", "seed", "programs", "cells", "seconds",
                "budget_left", "coverage", "findings"):
        assert key in doc
    assert set(doc["coverage"]) >= {"operators", "checks", "pairs", "outcomes"}
    assert set(doc["coverage"]["operators"]) == set(hunt_toy.VOCABULARY)
    for counts in doc["coverage"]["checks"].values():
        assert set(counts) == {"held", "violated", "not_applicable", "unchecked"}
    f = doc["findings"][0]
    assert set(f) >= {"id", "signature", "checks", "exception", "programs", "module", "trace", "reproducer",
                      "reproducer_run", "status", "attributed_to"}
    assert f["id"] == "F1" and f["attributed_to"] == "engine" and f["exception"] is None
    assert f["module"] == str(tmp_path / "findings" / "F1.py")
    assert f["reproducer"] == str(tmp_path / "findings" / "F1.reproducer.py")
    assert doc["budget_left"] is None and doc["cost"]["shrink_runs"] > 0
