from rollcheck.pyimpl.protocols import Protocol


class Eager(Protocol):
    """Checkpoints before every delivery (trivially free of useless checkpoints)."""

    name = "eager"
    zcycle_free = True

    def initial(self, i, n):
        return 0

    def on_checkpoint(self, st):
        return st

    def on_send(self, st, dst):
        return st, None

    def must_force(self, st, src, pb):
        return True

    def on_deliver(self, st, src, pb):
        return st
