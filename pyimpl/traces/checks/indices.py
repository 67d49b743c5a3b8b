"""``checkpoint-indices``: recorded ``index`` fields follow the numbering 1, 2, … per process.

After a recovery the numbering continues from the restored checkpoint (a checkpoint missing from
the recording shows here too). Not substantive (the recording's own consistency); reported only
when the trace gives ``index`` fields.

References
----------
``specs/formats.md#trace-checks``.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["CheckpointIndices"]


class CheckpointIndices(TraceCheck):
    """Checkpoint ``index`` fields against the checkpoint's number in the effective execution."""

    name = "checkpoint-indices"
    needs = ("checkpoint.index",)

    def __init__(self) -> None:
        self.bad: tuple[int, str] | None = None
        self.indexed = 0

    @override
    def on_checkpoint(self, v: Any, seq: int, i: int, forced: bool, index: Any) -> None:
        if index is None:
            return
        self.indexed += 1
        c = v.count[i]
        if index != c and self.bad is None:
            self.bad = (seq, f"seq {seq}: checkpoint index {index}, but it is checkpoint {c} of {v.names[i]}"
                             + (" (numbering continues from the restored checkpoint)" if v.recoveries else ""))

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        if self.bad is not None:
            return Check.violated(self.name, self.bad[1], offending_seq=self.bad[0])
        if not self.indexed:
            return None
        return Check.held(self.name, f"{self.indexed} checkpoint index field(s) follow the numbering (1, 2, … "
                          "per process, continuing from the restored checkpoint after a recovery)",
                          examined=self.indexed, substantive=False)
