"""HMNR, the fully informed protocol FI (Hélary, Mostefaoui, Netzer, Raynal 2000), as rollcheck's
reference implementation states it (rules in rollcheck's specs/protocols.md#hmnr); declared
symmetric for the explorer.

References
----------
J.-M. Hélary, A. Mostefaoui, R. H. B. Netzer, M. Raynal, "Communication-based prevention of useless
checkpoints in distributed computations", Distributed Computing 13(1), 2000; FERDiS paper §5.3.
"""

from rollcheck.pyimpl.protocols import HMNR as _HMNR


class HMNR(_HMNR):
    name = "hmnr"
    symmetric = True
