"""CASBR, Checkpoint-After-Send-Before-Receive (Wang 1997): a checkpoint after every send that is
followed by a receive. Here forced checkpoints are taken immediately before deliveries, so the
checkpoint is placed right before the receive that follows the send(s): the decisions coincide with
NRAS's (the patterns differ only in where, between the send and the receive, the checkpoint lies).

References
----------
Y.-M. Wang, IEEE Transactions on Computers 46(4), 1997, §4.
"""

from _tdv import TDVProtocol


class CASBR(TDVProtocol):
    name = "casbr"

    def must_force(self, st, src, pb):
        return st.sent
