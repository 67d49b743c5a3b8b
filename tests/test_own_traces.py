"""rollcheck's own traces pass its own reader: every trace it ships or records, through
``trace validate`` and ``check trace``, without exit 2 (one prefix rule, one header with ``processes``).

Shipped: ``examples/*.jsonl``, the fixtures under ``tests/data`` and the package data. Recorded here:
the message-passing job (in-process rounds, no JVM). The Spark streaming recorders' header is the
one of the migrated fixtures (``source: spark``, ``job``, ``processes``), and a trace recorded before
the prefix rule still reads, through the Spark adapter's one rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted([*ROOT.glob("examples/*.jsonl"), *ROOT.glob("tests/data/**/*.jsonl"),
                  *ROOT.glob("rollcheck/data/*.jsonl")])


def _validate_and_check(capsys, path: Path) -> tuple[int, int, dict]:
    rc_v = main(["trace", "validate", str(path), "--json"])
    capsys.readouterr()
    rc_c = main(["check", "trace", str(path), "--no-tlc", "--json"])
    doc = json.loads(capsys.readouterr().out)
    return rc_v, rc_c, doc


def test_the_shipped_set_is_not_empty():
    names = {p.name for p in SHIPPED}
    assert {"spark-wordcount-kill.jsonl", "flink-aligned-task-failure.jsonl", "trace-hmnr-3p.jsonl"} <= names
    assert len(SHIPPED) >= 15


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_every_shipped_trace_is_readable(capsys, path):
    rc_v, rc_c, doc = _validate_and_check(capsys, path)
    assert rc_v == 0 and rc_c in (0, 1, 3), doc
    header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert isinstance(header.get("processes"), list) and header["processes"], header
    src = header["source"]
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:  # the one prefix rule
        kind = json.loads(line)["kind"]
        assert kind in {"send", "deliver", "checkpoint", "failure", "recovery", "output", "end"} \
            or kind.startswith(("x-", f"{src}.")), (path.name, kind)


def test_a_recorded_message_passing_trace_is_readable(capsys, tmp_path):
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop

    out = tmp_path / "nh.jsonl"
    record_nhop(NhopConfig(protocol="bcs", processes=3, rounds=4, seed=2, fail_process=0, fail_round=2),
                out, engine="local")
    rc_v, rc_c, doc = _validate_and_check(capsys, out)
    assert rc_v == 0 and rc_c == 0, doc


def test_a_spark_trace_from_before_the_prefix_rule_still_reads(capsys, tmp_path):
    """The old header (``spark-wordcount``, no ``processes``, bare kinds) is read by one rule."""
    lines = (ROOT / "examples" / "spark-wordcount-kill.jsonl").read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    old_head = {k: v for k, v in head.items() if k not in ("job", "processes")} | {"source": "spark-wordcount"}
    old = [json.dumps(old_head)]
    for x in lines[1:]:
        e = json.loads(x)
        e["kind"] = e["kind"].removeprefix("spark.")
        e.pop("processes", None) if e["kind"] == "failure" else None
        old.append(json.dumps(e))
    p = tmp_path / "old.jsonl"
    p.write_text("\n".join(old) + "\n", encoding="utf-8")
    rc_v, rc_c, doc = _validate_and_check(capsys, p)
    assert rc_v == 0 and rc_c == 0, doc
    assert main(["spark", "replay", str(p)]) == 0
