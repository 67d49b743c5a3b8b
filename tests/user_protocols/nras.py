"""NRAS, "no receive after send": a user-written protocol, as a researcher would write it.

Force a checkpoint before a delivery if the process sent a message since its last checkpoint.
Every checkpoint interval is then receives-then-sends, so no Z-path has a non-causal hop and no
checkpoint is ever useless (FERDiS paper §5.3; the CIC literature).
"""

from dataclasses import dataclass, replace

from rollcheck.testing import Protocol


@dataclass(frozen=True)
class State:
    sent: bool = False


class NRAS(Protocol):
    name = "nras"
    zcycle_free = True
    description = "no receive after send"

    def initial(self, i, n):
        return State()

    def on_checkpoint(self, st):
        return replace(st, sent=False)

    def on_send(self, st, dst):
        return replace(st, sent=True), None

    def must_force(self, st, src, pb):
        return st.sent

    def on_deliver(self, st, src, pb):
        return st
