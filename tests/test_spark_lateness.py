"""``batch-equivalent`` decides late rows by Spark's own lateness rule (``spark_replay/oracles/lateness.py``).

Fast tests read the rule from analysed plans pyspark printed (``tests/spark_queries/lateness_plans.py``)
and judge hand-made evaluation events. The real-engine tests record a windowed aggregation in update
mode, a deduplication and a two-source stream-stream join, each with late rows some of which Spark
drops, with a task failure: each is decided (held), and a final table made by a wrong lateness rule
(the row's event time instead of its window's end; counting the dropped rows) is a violation.
The ``engines`` tests repeat the windowed aggregation on each supported minor release.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rollcheck.spark_replay.oracles.batch_eval import analyse_plan
from rollcheck.spark_replay.oracles.checks import batch_equivalent
from rollcheck.spark_replay.oracles.lateness import (
    Operand,
    late_watermarks,
    plan_rule,
    row_dropped,
    windows_of,
)
from rollcheck.spark_replay.oracles.tampers import ORACLE_TAMPERS
from rollcheck.spark_replay.replay.conformance import replay_trace
from rollcheck.spark_replay.tamper import to_lines
from rollcheck.spark_replay.trace import parse_trace_text, read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent / "spark_queries"))
from lateness_plans import PLANS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]
QUERIES = ROOT / "tests" / "spark_queries"
T = dt.datetime(1970, 1, 1)


def _s(sec: float) -> dt.datetime:
    return T + dt.timedelta(seconds=sec)


# ----------------------------------------------------------------------------- the rule from the plan
@pytest.mark.parametrize("name, kind, size, slide, offset", [
    ("tumble", "window", 10_000_000, 10_000_000, 0),
    ("slide", "window", 10_000_000, 5_000_000, 0),
    ("tumble_offset", "window", 10_000_000, 10_000_000, 3_000_000),
    ("groupts", "value", 0, 0, 0),
    ("dedup", "value", 0, 0, 0),
    ("dedupww", "value", 0, 0, 0),
])
def test_single_source_operators_give_their_operand(name: str, kind: str, size: int, slide: int, offset: int) -> None:
    rule = plan_rule(PLANS[name], ["input"])
    assert rule.applicable, rule.reason
    assert rule.operands == {"input": Operand("input", "ts", kind, size, slide, offset)}
    assert rule.not_in_complete == (name in ("tumble", "slide", "tumble_offset", "groupts"))


def test_a_join_of_two_sources_has_one_operand_per_side_and_is_applicable() -> None:
    for name in ("join", "join_left"):
        rule = plan_rule(PLANS[name], ["a", "b"])
        assert rule.applicable and rule.operator == "Join", rule.reason
        assert rule.operands == {"a": Operand("a", "ats"), "b": Operand("b", "bts")}
    got = analyse_plan(PLANS["join"], {"a": ["ats", "k"], "b": ["bts", "k2"]})
    assert got["applicable"] and got["event_time"] == {"a": "ats", "b": "bts"}


@pytest.mark.parametrize("name, why", [
    ("session", "session windows"),
    ("chain", "several stateful operators chained (Aggregate, Aggregate)"),
])
def test_what_the_rule_does_not_model_is_not_applicable_with_the_reason(name: str, why: str) -> None:
    got = analyse_plan(PLANS[name], ["ts", "page", "user"])
    assert got["applicable"] is False and why in got["reason"]


def test_a_relation_of_no_source_is_not_applicable() -> None:
    got = analyse_plan(PLANS["join"], {"x": ["ats", "k"], "y": ["bts", "k2"]})
    assert got["applicable"] is False and "no folder named after a source" in got["reason"]


def test_late_events_watermark_is_the_previous_batchs() -> None:
    assert late_watermarks(4, {0: 0, 1: 2000, 2: 9000, 3: 9000}) == ({0: 0, 1: 0, 2: 2000, 3: 9000}, [])
    assert late_watermarks(3, {0: 0}) == ({0: 0, 1: 0}, [2])


def test_a_windowed_row_is_judged_by_its_windows_end_not_its_event_time() -> None:
    tumble = Operand("s", "ts", "window", 10_000_000, 10_000_000, 0)
    # t=12 s in [10, 20): at or below a 15 s watermark by event time, but its window ends at 20 s
    assert row_dropped(_s(12), tumble, 15_000) is False
    assert row_dropped(_s(12), tumble, 20_000) is True
    assert row_dropped(_s(12), Operand("s", "ts"), 15_000) is True  # dedup/join: the event time itself
    assert row_dropped(None, Operand("s", "ts"), 15_000) is False  # a null predicate drops nothing
    slide = Operand("s", "ts", "window", 10_000_000, 5_000_000, 0)
    assert windows_of(12_000_000, slide) == [(10_000_000, 20_000_000), (5_000_000, 15_000_000)]
    assert row_dropped(_s(12), slide, 16_000) is None  # counts in [10, 20) only
    assert row_dropped(_s(12), slide, 20_000) is True
    offset = Operand("s", "ts", "window", 10_000_000, 10_000_000, 3_000_000)
    assert windows_of(12_000_000, offset) == [(3_000_000, 13_000_000)]


# ----------------------------------------------------------------------------- the judge
def _hdr(mode: str = "update") -> dict[str, Any]:
    return {"source": "spark", "job": "query", "config": {"key": ["k"], "output_mode": mode}}


def _eval(variants: list[tuple[list[str], list[dict[str, Any]]]], **extra: Any) -> dict[str, Any]:
    return {"seq": 2, "kind": "spark.batch_evaluation", "run": "final", "applicable": True, "reason": None,
            "rule": "Aggregate: ...", "watermarks": {"0": 0}, "on_time_rows": 3, "dropped_rows": 1,
            "fields": [{"name": "k", "type": "string", "metadata": {}}, {"name": "n", "type": "bigint", "metadata": {}}],
            "variants": [{"late": [], "rows": r, "modes": m} for m, r in variants], **extra}


def _out(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"seq": 1, "kind": "spark.output_final", "rows": rows}


def test_the_rule_decides_one_table_for_the_runs_mode() -> None:
    kept, every = [{"k": "a", "n": 2}], [{"k": "a", "n": 3}]
    ev = _eval([(["append", "update"], kept), (["complete"], every)])
    assert batch_equivalent(_hdr("update"), [_out(kept), ev]).status.value == "held"
    bad = batch_equivalent(_hdr("update"), [_out(every), ev])  # counted the row Spark drops
    assert bad.status.value == "violated" and "lateness rule" in bad.detail and bad.offending_seq == 1
    assert batch_equivalent(_hdr("complete"), [_out(every), ev]).status.value == "held"
    assert batch_equivalent(_hdr("complete"), [_out(kept), ev]).status.value == "violated"


def test_an_unknown_watermark_is_inconclusive_and_an_old_event_with_late_rows_too() -> None:
    ev = {**_eval([]), "undecided": "the watermark of batch 1 is unknown"}
    c = batch_equivalent(_hdr(), [_out([]), ev])
    assert c.status.value == "unchecked" and "batch 1" in c.detail
    old = {k: v for k, v in _eval([(["update"], [{"k": "a", "n": 1}])]).items() if k != "rule"}
    old["late"] = [{"batch": 1, "row": []}]
    c = batch_equivalent(_hdr(), [_out([{"k": "a", "n": 1}]), old])
    assert c.status.value == "unchecked" and "record the query again" in c.detail


# ----------------------------------------------------------------------------- real engine
def _module_file(module: str) -> Path:
    """The query module's file: the windowed aggregation is the shipped example of the issue's user
    query (tumbling windows, late rows in every batch); dedup and join live with the tests."""
    if module == "late_window_update":
        return ROOT / "examples" / "queries" / "late_clicks_window.py"
    return QUERIES / f"{module}.py"


def _record(tmp: Path, module: str, *extra: str) -> Path:
    out = tmp / f"{module}.jsonl"
    r = subprocess.run([*RC, "spark", "record", "query", "--module", str(_module_file(module)), "--out", str(out),
                        "--fail-at-batch", "2", "--failure", "task", "--json", *extra],
                       capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("lateness")
    return {m: _record(tmp, m) for m in ("late_window_update", "late_dedup", "late_join")}


def _final_eval(trace: Path) -> dict[str, Any]:
    return next(e for e in read_trace(trace).events if e["kind"] == "spark.batch_evaluation" and e["run"] == "final")


def _with_final_rows(trace: Path, rows: list[dict[str, Any]]) -> Any:
    t = read_trace(trace)
    events = [dict(e) for e in t.events]
    for e in events:
        if e["kind"] == "spark.output_final":
            e["rows"] = rows
    return replay_trace(parse_trace_text(("\n".join(to_lines(t.header, events)) + "\n").encode()))


def _check(rep: Any, name: str = "batch-equivalent") -> Any:
    return next(c for c in rep.checks if c.name == name)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("module", ["late_window_update", "late_dedup", "late_join"])
def test_recorded_late_rows_are_decided(recorded: dict[str, Path], module: str) -> None:
    rep = replay_trace(read_trace(recorded[module]))
    c = _check(rep)
    assert c.status.value == "held", c.detail
    assert rep.verdict.value == "conformant", [(x.name, x.status.value, x.detail) for x in rep.checks]
    ev = _final_eval(recorded[module])
    assert ev["dropped_rows"] >= 1 and "previous batch's" in ev["rule"], ev
    if module == "late_join":  # a row dropped on each side, each by its own event-time column
        assert {d["source"] for d in ev["dropped"]} == {"imps", "clicks"}, ev["dropped"]
    if module == "late_dedup":  # Spark's own count of input rows dropped as late agrees, batch by batch
        spark_dropped = {e["batch"]: e["late_rows_dropped"] for e in read_trace(recorded[module]).events
                         if e["kind"] == "spark.progress"}
        assert sum(spark_dropped.values()) == ev["dropped_rows"] == 3, (spark_dropped, ev["dropped"])


def _wrong_rule_table(trace: Path) -> list[dict[str, Any]]:
    """late_window_update's table if Spark dropped a row by its own event time (<= the previous
    batch's watermark) instead of by its window's end."""
    spec = importlib.util.spec_from_file_location("late_window_update", _module_file("late_window_update"))
    assert spec is not None and spec.loader is not None
    q = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(q)

    ev = _final_eval(trace)
    late = {int(b): int(w) for b, w in ev["late_watermarks"].items()}
    counts: Counter[tuple[str, str]] = Counter()
    for b, rows in enumerate(q.batches(0)):
        for ts, page, _ in rows:
            if (ts - dt.datetime(1970, 1, 1)).total_seconds() * 1000 > late[b]:
                start = ts.replace(second=ts.second - ts.second % 10)
                counts[(start.isoformat(), page)] += 1
    return [{"window_start": s, "page": p, "clicks": n} for (s, p), n in sorted(counts.items())]


@pytest.mark.spark
@pytest.mark.slow
def test_a_wrong_lateness_rule_is_caught(recorded: dict[str, Path]) -> None:
    trace = recorded["late_window_update"]
    wrong = _wrong_rule_table(trace)
    ev = _final_eval(trace)
    assert ev["variants"][0]["rows"] and wrong, ev
    c = _check(_with_final_rows(trace, wrong))
    assert c.status.value == "violated" and "lateness rule" in c.detail, c.detail
    c = _check(_with_final_rows(trace, ev["with_dropped"]))  # counted the rows Spark drops too
    assert c.status.value == "violated", c.detail
    lines, seq = ORACLE_TAMPERS["count-late-row"](read_trace(trace))  # a dropped row re-creates its window
    c = _check(replay_trace(parse_trace_text(("\n".join(lines) + "\n").encode())))
    assert c.status.value == "violated" and c.offending_seq == seq, c.detail


# ----------------------------------------------------------------------------- other releases
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
@pytest.mark.parametrize("module", ["late_window_update", "late_dedup", "late_join"])
@pytest.mark.parametrize("version", ["3.4.4", "3.5.2", "4.0.5", "4.1.4", "4.2.1"])
def test_the_rule_holds_on_each_supported_minor(tmp_path: Path, version: str, module: str) -> None:
    """The windowed aggregation, the deduplication and the stream-stream join with late rows
    recorded on ``version``: decided and held."""
    trace = _record(tmp_path, module, "--engine-version", version)
    assert json.loads(trace.read_text().splitlines()[0])["engine_version"] == version
    c = _check(replay_trace(read_trace(trace)))
    assert c.status.value == "held", c.detail
