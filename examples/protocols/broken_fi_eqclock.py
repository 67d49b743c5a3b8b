"""BROKEN on purpose — an FI (HMNR) variant with a plausible-looking "optimisation" of condition C2:
force for a causal Z-cycle only when the message also knows the receiver's *current* clock
(``m.clock[i] == clock[i]``). After the receiver has advanced its clock by merging another message,
the condition no longer fires although the Z-cycle is there.

Smallest witness: 2 processes, 8 basic events (none smaller on any number of processes up to the
default bounds). See the published rules in ``hmnr.py``.
"""

from hmnr import HMNR


class FIEqClock(HMNR):
    name = "fi-eqclock"

    def c2(self, st, src, pb):
        i = st.i
        return pb.ckpt[i] == st.ckpt[i] and pb.taken[i] and pb.clock[i] == st.clock[i]
