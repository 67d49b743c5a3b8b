"""FDI, Fixed-Dependency-Interval (Wang 1997): the dependency vector is fixed for a whole checkpoint
interval, so every delivery that brings a new dependency is preceded by a forced checkpoint (sent or
not). Stronger (and costlier) than FDAS.

References
----------
Y.-M. Wang, IEEE Transactions on Computers 46(4), 1997, §4.
"""

from _tdv import TDVProtocol


class FDI(TDVProtocol):
    name = "fdi"

    def must_force(self, st, src, pb):
        return self.new_dependency(st, pb)
