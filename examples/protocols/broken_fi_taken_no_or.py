"""BROKEN on purpose — an FI (HMNR) variant whose merge forgets half of the ``taken`` rule: a larger
``m.ckpt[k]`` replaces ``ckpt[k]`` and ``taken[k]`` as it should, but an *equal* one does not OR
``m.taken[k]`` into ``taken[k]``. Knowledge that a checkpoint lies on a causal Z-path is lost when it
arrives by a second route, and C2 misses a Z-cycle.

Smallest witness: 3 processes, 9 basic events. See the published rules in ``hmnr.py``.
"""

from hmnr import HMNR

from rollcheck.pyimpl.protocols.hmnr import HMNRState


class FITakenNoOr(HMNR):
    name = "fi-taken-no-or"

    def on_deliver(self, st, src, pb):
        i = st.i
        clock = list(map(max, st.clock, pb.clock))
        ckpt = list(st.ckpt)
        taken = list(st.taken)
        for k, (a, b) in enumerate(zip(st.ckpt, pb.ckpt, strict=True)):
            if k != i and b > a:
                ckpt[k] = b
                taken[k] = pb.taken[k]
        clock[i] = max(st.clock[i], pb.clock[src])
        return HMNRState(i, tuple(clock), tuple(ckpt), tuple(taken), st.sent_to, st.min_to)
