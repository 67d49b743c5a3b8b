from rollcheck.testing import Protocol


class Broken(Protocol):
    """Keeps a dict of the indices it has seen, but looks a sender up before ever storing it."""

    name = "broken"
    zcycle_free = True

    def initial(self, i, n):
        return {}

    def on_checkpoint(self, st):
        return st

    def on_send(self, st, dst):
        return st, 0

    def must_force(self, st, src, pb):
        return pb > st[src]               # KeyError for a sender not seen before

    def on_deliver(self, st, src, pb):
        return {**st, src: pb}
