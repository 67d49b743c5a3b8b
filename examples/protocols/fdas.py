"""FDAS, Fixed-Dependency-After-Send (Wang 1997): after the first send of an interval, the
dependency vector must stay fixed until the next checkpoint, so a delivery that would add a new
dependency after a send is preceded by a forced checkpoint. Guarantees rollback-dependency
trackability, hence no useless checkpoint.

References
----------
Y.-M. Wang, IEEE Transactions on Computers 46(4), 1997, §4.
"""

from _tdv import TDVProtocol


class FDAS(TDVProtocol):
    name = "fdas"

    def must_force(self, st, src, pb):
        return st.sent and self.new_dependency(st, pb)
