"""CBR, "checkpoint before receive": force a checkpoint before every delivery (safe, costly)."""

from rollcheck.testing import Protocol


class CBR(Protocol):
    name = "cbr"
    zcycle_free = True

    def initial(self, i, n):
        return 0

    def on_checkpoint(self, st):
        return st + 1

    def on_send(self, st, dst):
        return st, None

    def must_force(self, st, src, pb):
        return True

    def on_deliver(self, st, src, pb):
        return st


class CBRClaimsBound(CBR):
    """CBR with a claim it cannot keep: that a failure never rolls a survivor back at all."""

    name = "cbr-bound-0"
    rollback_bound = 0
