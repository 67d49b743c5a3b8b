"""The scheduler of ``rollcheck verify``: sections side by side in processes of their own.

Small fake sections (modules written into a temporary folder on ``sys.path``, which spawned
processes inherit) sleep, print, crash, die or hit a full disk; the tests check that CPU sections
overlap, that engine sections respect their slot limit, that each section's output lands in its
own log, and that a crash, a dead process and a full disk become rows with the right verdict.
Cost: about 10 s (process start-up under load).
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from rollcheck.scheduler import SectionJob, plan_jobs, run_sections
from rollcheck.suite import Row

BODY = {
    "sleepy_a": "time.sleep(1.5); print('hello from a'); return [Row('x', 'pyimpl', 'a', 'pass', 1, "
                "detail=f'{t0:.3f} {time.time():.3f}')]",
    "sleepy_b": "time.sleep(1.5); print('hello from b'); return [Row('x', 'pyimpl', 'b', 'pass', 1, "
                "detail=f'{t0:.3f} {time.time():.3f}')]",
    "crash": "raise RuntimeError('boom')",
    "dies": "import os; os._exit(3)",
    "diskfull": "raise OSError(28, 'No space left on device', 'report/x.png')",
    "notarow": "return ['not a row']",
    "leaker": "import subprocess; p = subprocess.Popen(['sleep', '300'], start_new_session=True); "
              "time.sleep(2.5); return [Row('x', 'pyimpl', 'leak', 'pass', 1, detail=str(p.pid))]",
    # a child that burns 2 s of CPU and is never waited for (as PySpark's JVM): only the
    # scheduler's sampling of the section's process tree sees its CPU
    "burner": "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time\\nt = "
              "time.process_time()\\nwhile time.process_time() - t < 2.0: pass']); "
              "exec('while open(f\"/proc/{p.pid}/stat\").read().rsplit(\")\", 1)[1].split()[0] != \"Z\": "
              "time.sleep(0.05)'); return [Row('x', 'pyimpl', 'burn', 'pass', 1)]",
}


@pytest.fixture()
def fake_sections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    pkg = tmp_path / "fakesecs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    for name, body in BODY.items():
        (pkg / f"{name}.py").write_text(textwrap.dedent(f"""
            import time
            from rollcheck.suite import Row
            TITLE = {name!r}

            def run(ctx):
                t0 = time.time()
                ctx.log('working')
                {body}
            """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fakesecs"


def _run(jobs: list[SectionJob], tmp: Path, slots: int, engine_slots: int = 1,
         timed_slots: int = 1) -> tuple[dict, list]:
    events: list[tuple[str, str]] = []
    out = run_sections(jobs, {"profile": "ci", "quick": True, "out_dir": str(tmp / "report"), "seed": 0},
                       tmp / "report" / "logs", slots, lambda k, n, p: events.append((k, n)),
                       engine_slots=engine_slots, timed_slots=timed_slots)
    return out, events


def _span(row: Row) -> tuple[float, float]:
    a, b = row.detail.split()
    return float(a), float(b)


def test_cpu_sections_overlap_and_keep_separate_logs(fake_sections: str, tmp_path: Path) -> None:
    jobs = [SectionJob(n, n, "cpu", 1.0, f"{fake_sections}.{n}") for n in ("sleepy_a", "sleepy_b")]
    out, events = _run(jobs, tmp_path, slots=2)
    # the two ran at the same time: both were started before either was done (their own clocks
    # need not overlap: under load one interpreter may take seconds longer to start)
    assert max(events.index(("start", n)) for n in ("sleepy_a", "sleepy_b")) < min(
        events.index(("done", n)) for n in ("sleepy_a", "sleepy_b"))
    assert [r.status for o in out.values() for r in o.rows] == ["pass", "pass"]
    assert all(r.section in ("sleepy_a", "sleepy_b") for o in out.values() for r in o.rows)
    logs = tmp_path / "report" / "logs"
    assert "hello from a" in (logs / "sleepy_a.log").read_text() and "hello from b" not in (logs / "sleepy_a.log").read_text()
    assert "working" in (logs / "sleepy_b.log").read_text()
    assert ("log", "sleepy_a") in events and events.count(("done", "sleepy_b")) == 1


def test_engine_sections_respect_their_slot(fake_sections: str, tmp_path: Path) -> None:
    jobs = [SectionJob(n, n, "engine", 1.0, f"{fake_sections}.{n}") for n in ("sleepy_a", "sleepy_b")]
    out, _ = _run(jobs, tmp_path, slots=3, engine_slots=1)
    (a0, a1), (b0, b1) = _span(out["sleepy_a"].rows[0]), _span(out["sleepy_b"].rows[0])
    assert a1 <= b0 or b1 <= a0  # one after the other


def test_a_timed_section_runs_beside_the_others_at_the_higher_priority(fake_sections: str, tmp_path: Path) -> None:
    jobs = [SectionJob("sleepy_a", "sleepy_a", "cpu", 1.0, f"{fake_sections}.sleepy_a"),
            SectionJob("sleepy_b", "sleepy_b", "timed", 1.0, f"{fake_sections}.sleepy_b")]
    out, events = _run(jobs, tmp_path, slots=1, timed_slots=1)
    starts = [n for k, n in events if k == "start"]
    # timed jobs start first; one cpu slot, yet both were started before either was done
    assert starts == ["sleepy_b", "sleepy_a"]
    assert events.index(("start", "sleepy_a")) < min(events.index(("done", n)) for n in starts)
    jobs = [SectionJob(n, n, "timed", 1.0, f"{fake_sections}.{n}") for n in ("sleepy_a", "sleepy_b")]
    out, _ = _run(jobs, tmp_path, slots=3, timed_slots=1)
    (a0, a1), (b0, b1) = _span(out["sleepy_a"].rows[0]), _span(out["sleepy_b"].rows[0])
    assert a1 <= b0 or b1 <= a0  # their own slot limit holds


def test_cpu_seconds_include_children_never_waited_for(fake_sections: str, tmp_path: Path) -> None:
    out, _ = _run([SectionJob("burner", "burner", "cpu", 1.0, f"{fake_sections}.burner")], tmp_path, slots=1)
    assert out["burner"].rows[0].status == "pass"
    # 2 s burnt by the child; the process tree is sampled once a second, so at least 1 s is seen
    assert out["burner"].cpu_seconds is not None and out["burner"].cpu_seconds >= 0.9


def test_parts_may_differ_between_quick_and_full_and_have_their_own_entry() -> None:
    import types

    from rollcheck.scheduler import section_parts

    mod = types.SimpleNamespace(TITLE="S", PARTS={"quick": ("a",), "full": ("a", "b")})
    assert section_parts(mod, quick=True) == ["a"] and section_parts(mod, quick=False) == ["a", "b"]
    jobs = plan_jobs([("flink", types.SimpleNamespace(TITLE="F", PARTS=("recordings", "utilization")))], quick=False)
    kinds = {j.name: (j.kind, j.estimate) for j in jobs}
    from rollcheck.sections import SCHEDULE

    assert kinds["flink.utilization"] == ("timed", float(SCHEDULE["flink.utilization"]["full"]))  # type: ignore[arg-type]
    assert kinds["flink.recordings"][0] == "engine"
    from rollcheck.suite import discover_sections

    for name, module in discover_sections():
        for quick in (True, False):  # every part of a shipped section has a schedule entry
            for part in section_parts(module, quick):
                assert f"{name}.{part}" in SCHEDULE, f"{name}.{part}"


def test_crash_death_and_full_disk_become_rows(fake_sections: str, tmp_path: Path) -> None:
    jobs = [SectionJob(n, n, "cpu", 1.0, f"{fake_sections}.{n}") for n in ("crash", "dies", "diskfull", "notarow")]
    t0 = time.monotonic()
    out, _ = _run(jobs, tmp_path, slots=4)
    assert time.monotonic() - t0 < 120
    crash = out["crash"].rows[0]
    assert crash.status == "fail" and "RuntimeError: boom" in crash.detail
    assert "RuntimeError: boom" in (tmp_path / "report" / "logs" / "crash.log").read_text()  # the traceback
    dies = out["dies"].rows[0]
    assert dies.status == "fail" and "exited with code 3" in dies.detail
    disk = out["diskfull"].rows[0]
    assert disk.status == "inconclusive" and disk.environment_failure == "disk full"  # not a finding
    assert out["notarow"].rows[0].status == "fail" and "not a Row" in out["notarow"].rows[0].detail


def test_plan_uses_measured_times_and_schedule_hints() -> None:
    import types

    secs = [("spark", types.SimpleNamespace(TITLE="Spark")), ("yours", types.SimpleNamespace(TITLE="Yours"))]
    plan = {j.name: j for j in plan_jobs(secs, quick=True, measured={"yours": 3.5})}
    assert plan["spark"].kind == "engine" and plan["yours"].kind == "cpu" and plan["yours"].estimate == 3.5
    with pytest.raises(ValueError):
        SectionJob("x", "x", "gpu")
    parted = types.SimpleNamespace(TITLE="M", PARTS=("a", "b"), SCHEDULE={"kind": "cpu", "quick": 100})
    jobs = plan_jobs([("mutants", parted)], quick=True, measured={"mutants.b": 70.0})
    assert [(j.name, j.section, j.part, j.estimate) for j in jobs] == [("mutants.a", "mutants", "a", 50.0),
                                                                     ("mutants.b", "mutants", "b", 70.0)]
    assert all(j.module == "rollcheck.sections.sec_mutants" for j in jobs)


def test_mutant_parts_cover_every_area() -> None:
    from rollcheck.properties.mutation import MUTANTS, load_all
    from rollcheck.sections.sec_mutants import PARTS, _areas

    load_all()
    covered = [a for p in PARTS for a in _areas(p)]
    assert sorted(covered) == sorted({m.area for m in MUTANTS.values()}) and len(covered) == len(set(covered))


def test_row_status_comes_from_its_checks() -> None:
    from rollcheck.pyimpl.verdict import Check

    r = Row("hmnr", "TLC", "inv", checks=[Check.held("inv", "ok", examined=3),
                                          Check.unchecked("tlc", "java not found")])
    assert r.status == "inconclusive"
    r.status = "fail"  # a section overruling its row replaces the checks
    assert r.status == "fail" and r.verdict.value == "violated"
    with pytest.raises(ValueError):
        Row("a", "pyimpl", "c", "pass", 1, checks=[Check.violated("c", "bad")])
    with pytest.raises(ValueError):
        Row("a", "pyimpl", "c", "maybe", 1)
    assert Row("a", "pyimpl", "c", "fail", 1, detail="[Errno 122] Disk quota exceeded").status == "inconclusive"
    assert sys.modules["rollcheck.suite"].Row is Row


def test_a_process_left_behind_in_a_session_of_its_own_is_killed(fake_sections: str, tmp_path: Path) -> None:
    import os

    out, _ = _run([SectionJob("leaker", "leaker", "cpu", 1.0, f"{fake_sections}.leaker")], tmp_path, slots=1)
    pid = int(out["leaker"].rows[0].detail)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break  # killed, not yet reaped by its new parent
        except FileNotFoundError:
            break
        time.sleep(0.2)
    else:
        os.kill(pid, 9)
        pytest.fail("the section's detached child outlived the run")


def test_the_exit_code_of_a_run_is_the_one_verdict_rule() -> None:
    """``suite.exit_code`` over the rows' statuses equals :func:`decide` over the rows' checks, for
    every list of up to three statuses (the empty run included: inconclusive, 3)."""
    from itertools import product

    from rollcheck.pyimpl.verdict import decide
    from rollcheck.suite import STATUSES, exit_code

    for k in range(4):
        for statuses in product(STATUSES, repeat=k):
            rows = [Row("x", "pyimpl", "c", s, 1) for s in statuses]
            want = decide([c for r in rows for c in r.checks]).exit_code
            assert exit_code(list(statuses)) == want, statuses
    with pytest.raises(ValueError, match="bad status"):
        exit_code(["ok"])
