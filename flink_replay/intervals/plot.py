"""Measured vs predicted recovery time, one picture (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_recovery"]


def plot_recovery(res: dict[str, Any], out: str | Path) -> Path:
    """Draw ``measure_recovery_times`` output against the checkpoint interval.

    The measured time (median, and each repetition) and each model's prediction.

    Parameters
    ----------
    res : dict
        A result of ``measure_recovery_times``.
    out : str or Path
        The image file to write.

    Returns
    -------
    Path
        ``out``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    params = res["parameters"]
    xs = [p["interval_ms"] for p in params]
    for p in params:
        ax.scatter([p["interval_ms"]] * len(p["repetitions"]), p["repetitions"], color="0.6", s=12)
    ax.plot(xs, [p["measured_s"] for p in params], "ko-", label="measured (median)")
    for model, style in (("chiron-trt", "s--"), ("utilization", "^:")):
        ys = [r["predicted_s"] for r in res["runs"] if r["model"] == model]
        ax.plot(xs, ys, style, label=f"predicted: {model}")
    ax.set_xlabel("checkpoint interval (ms)")
    ax.set_ylabel("failure → caught up (s)")
    title = f"Flink recovery time, λ={res['rate']:g}/s, μ cap={res['max_rate']:g}/s"
    again = [p for p in params if p.get("rate", res["rate"]) != res["rate"]]
    if again:  # intervals measured again at rates the machine could hold
        title += "; " + ", ".join(f"{p['interval_ms']} ms at {p['rate']:g}/{p['max_rate']:g}" for p in again)
    ax.set_title(title, fontsize=9 if again else None)
    ax.legend()
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
