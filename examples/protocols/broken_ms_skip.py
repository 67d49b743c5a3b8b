"""BROKEN on purpose — Manivannan–Singhal with the skip taken literally: a basic checkpoint whose
tick a forced checkpoint already reached keeps the forced checkpoint's index instead of taking a new
one (the real protocol *omits* that basic checkpoint; here the schedule has it, and two checkpoints
of a process with the same index break the index-line argument). Uses ``on_checkpoint(st, forced)``.

Smallest witness: 2 processes, 6 basic events. See the published rules in ``ms.py``.
"""

from ms import ManivannanSinghal, MSState


class MSSkip(ManivannanSinghal):
    name = "ms-skip"

    def on_checkpoint(self, st, forced=False):
        if forced:
            return st
        ticks = st.ticks + 1
        return MSState(st.sn if st.sn >= ticks else ticks, ticks)
