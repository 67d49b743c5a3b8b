------------------------------ MODULE Peterson ------------------------------
(* Peterson's two-process mutual exclusion, as a plain state machine.      *)
EXTENDS Naturals

VARIABLES flag, turn, pc

Other(p) == 1 - p
Procs == {0, 1}
vars == <<flag, turn, pc>>

Init == /\ flag = [p \in Procs |-> FALSE]
        /\ turn = 0
        /\ pc = [p \in Procs |-> "idle"]

Request(p) == /\ pc[p] = "idle"
              /\ flag' = [flag EXCEPT ![p] = TRUE]
              /\ turn' = Other(p)
              /\ pc' = [pc EXCEPT ![p] = "wait"]

Enter(p) == /\ pc[p] = "wait"
            /\ ~flag[Other(p)] \/ turn = p
            /\ pc' = [pc EXCEPT ![p] = "cs"]
            /\ UNCHANGED <<flag, turn>>

Exit(p) == /\ pc[p] = "cs"
           /\ flag' = [flag EXCEPT ![p] = FALSE]
           /\ pc' = [pc EXCEPT ![p] = "idle"]
           /\ UNCHANGED turn

Next == \E p \in Procs : Request(p) \/ Enter(p) \/ Exit(p)

Spec == Init /\ [][Next]_vars /\ \A p \in Procs : WF_vars(Enter(p)) /\ WF_vars(Exit(p))

TypeOK == /\ flag \in [Procs -> BOOLEAN]
          /\ turn \in Procs
          /\ pc \in [Procs -> {"idle", "wait", "cs"}]

MutualExclusion == ~(pc[0] = "cs" /\ pc[1] = "cs")

NoStarvation == \A p \in Procs : pc[p] = "wait" ~> pc[p] = "cs"
=============================================================================
