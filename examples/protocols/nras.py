"""NRAS, No-Receive-After-Send (Russell 1980, named so by Wang 1997): no delivery may follow a send
in the same checkpoint interval; a delivery after a send is preceded by a forced checkpoint. Every
interval is then "receive* send*", which leaves no non-causal Z-path, hence no useless checkpoint.

References
----------
D. L. Russell, "State restoration in systems of communicating processes", IEEE TSE 6(2), 1980;
Y.-M. Wang, IEEE Transactions on Computers 46(4), 1997, §4.
"""

from _tdv import TDVProtocol


class NRAS(TDVProtocol):
    name = "nras"

    def must_force(self, st, src, pb):
        return st.sent
