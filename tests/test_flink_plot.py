"""The utilization picture verify's report embeds: measured against predicted, drawn from a result
of ``flink utilization`` (the numbers of the 40 s sweep in docs/flink.md; no Flink runs; a few seconds,
mostly importing matplotlib)."""

from __future__ import annotations

from pathlib import Path

from rollcheck.flink_replay.intervals.utilization import plot_utilization

RESULT = {"failure_every_s": 5.0,
          "parameters": {"failure_rate": 0.225, "checkpoint_cost_s": 0.085, "restart_cost_s": 0.26, "depth": 2,
                         "completion_delay_s": 0.038},
          "runs": [{"interval_ms": 300, "measured_utilization": 0.6514, "predicted_utilization": 0.6332},
                   {"interval_ms": 700, "measured_utilization": 0.7504, "predicted_utilization": 0.7533},
                   {"interval_ms": 1200, "measured_utilization": 0.7474, "predicted_utilization": 0.7606},
                   {"interval_ms": 2000, "measured_utilization": 0.7127, "predicted_utilization": 0.7141}],
          "optimum": {"measured_ms": 700, "predicted_ms": 899.0}}


def test_plot_is_a_png_with_both_curves(tmp_path: Path) -> None:
    out = plot_utilization(RESULT, tmp_path / "sub" / "utilization.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # a picture without the measured points is a different picture (the plot is drawn from the data)
    other = plot_utilization({**RESULT, "runs": [{**r, "measured_utilization": 0.3} for r in RESULT["runs"]]},
                             tmp_path / "other.png")
    assert other.read_bytes() != data
