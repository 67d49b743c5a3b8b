"""Flink record/replay costs, side by side.

- replay: microseconds per trace event for the stored aligned and unaligned traces, and their ratio
  (the replay is linear in the events);
- record (not with --quick, needs ``make flink-setup``): wall time of one aligned and one unaligned
  recording with the same input, and their ratio (JVM start included: most of it is start-up).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "flink"


def _replay_us_per_event(path: Path, reps: int) -> float:
    from rollcheck.flink_replay.checks.replay import read_flink_trace, replay

    n = len(read_flink_trace(path)[1])
    replay(path)  # warm: imports and file cache
    t0 = time.perf_counter()
    for _ in range(reps):
        replay(path)
    return (time.perf_counter() - t0) / reps / n * 1e6


def main(quick: bool) -> None:
    reps = 5 if quick else 30
    a = _replay_us_per_event(DATA / "aligned-task-failure.jsonl", reps)
    u = _replay_us_per_event(DATA / "unaligned-task-failure.jsonl", reps)
    print(f"replay: aligned {a:.1f} us/event, unaligned {u:.1f} us/event, ratio unaligned/aligned {u / a:.2f}")
    if quick:
        return
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.flink_replay.recording.record import RecordConfig, record_wordcount
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError as e:
        print(f"record: skipped ({e})")
        return
    secs = {}
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-flink-") as d:
        for mode in ("aligned", "unaligned"):
            cfg = RecordConfig.make(checkpoints=mode, records=1500, rate=500.0, fail_at_record=750, failure="task")
            t0 = time.perf_counter()
            record_wordcount(Path(d) / f"{mode}.jsonl", cfg)
            secs[mode] = time.perf_counter() - t0
    print(f"record: aligned {secs['aligned']:.1f} s, unaligned {secs['unaligned']:.1f} s, "
          f"ratio {secs['unaligned'] / secs['aligned']:.2f}")


if __name__ == "__main__":
    main(quick=False)
