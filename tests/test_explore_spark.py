"""``check protocol --spark``: the same verdict, counts and smallest counterexample as the local run."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcheck.testing import check_protocol

CORPUS = Path(__file__).resolve().parent.parent / "examples" / "protocols"


@pytest.mark.spark
@pytest.mark.slow
def test_spark_agrees_with_local(tmp_path):
    # a file-defined class importing a sibling module: it must travel by value
    spec = f"{CORPUS / 'broken_fdas_sender_only.py'}:FDASSenderOnly"
    local = check_protocol(spec, bounds="2x7,3x7", max_examples=0, picture=False, out=tmp_path / "l")
    spark = check_protocol(spec, bounds="2x7,3x7", max_examples=0, picture=False, out=tmp_path / "s",
                           spark=True, master="local[2]")
    assert spark.engine == "spark" and local.engine == "local"
    assert spark.verdict == local.verdict == "unsafe"
    assert [b["schedules"] for b in spark.exhaustive] == [b["schedules"] for b in local.exhaustive]
    assert Path(spark.counterexample).read_text() == Path(local.counterexample).read_text()
    assert spark.counterexample_events == 7
