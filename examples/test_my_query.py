"""Keep "my query stays exactly-once" in your own test suite (``docs/spark-matrix.md``, "Keep it in
your test suite"). Each cell records the query with a real Spark driver (20-60 s each)::

    pytest -p no:cacheprovider examples/test_my_query.py --rollcheck-out artifacts

A failing cell's trace, witness and reproducer are in ``artifacts/<module>-spark-*/``, with the
matrix's ``index.html``.
"""

from pathlib import Path

from rollcheck.testing import assert_query_exactly_once

QUERY = Path(__file__).parent / "queries" / "foreachbatch_idempotent.py"


def test_my_sink_stays_exactly_once_under_a_sink_failure_and_a_driver_kill():
    report = assert_query_exactly_once(QUERY, failures=("sink", "kill"), kill_points=("commit",), batches=3,
                                       fail_at_batch=1)
    assert [c["column"] for c in report.cells] == ["sink", "kill:commit"]
