---- MODULE Counter ----
\* Two processes increment a shared counter without a lock: the read and the write are separate
\* steps, so an update can be lost. The invariant NoLostUpdate is violated.
EXTENDS Naturals
VARIABLES count, local, pc
vars == <<count, local, pc>>
Procs == {"p0", "p1"}

Init == count = 0 /\ local = [p \in Procs |-> 0] /\ pc = [p \in Procs |-> "read"]

Read(p) == pc[p] = "read" /\ local' = [local EXCEPT ![p] = count]
           /\ pc' = [pc EXCEPT ![p] = "write"] /\ UNCHANGED count
Write(p) == pc[p] = "write" /\ count' = local[p] + 1
            /\ pc' = [pc EXCEPT ![p] = "done"] /\ UNCHANGED local

Next == \E p \in Procs : Read(p) \/ Write(p)

NoLostUpdate == (\A p \in Procs : pc[p] = "done") => count = 2
====
