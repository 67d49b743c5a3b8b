"""BROKEN on purpose — an FDAS variant that, after a send, compares only the *sender's* entry of the
dependency vector (``m.tdv[src] > tdv[src]``) instead of every entry. A new dependency on a third
process, relayed through the sender, slips through without a forced checkpoint.

Smallest witness: 3 processes, 7 basic events (a dependency relayed through a third process; no
2-process schedule shows the flaw). See the published rules in ``fdas.py``.
"""

from fdas import FDAS


class FDASSenderOnly(FDAS):
    name = "fdas-sender-only"

    def must_force(self, st, src, pb):
        return st.sent and pb[src] > st.tdv[src]
