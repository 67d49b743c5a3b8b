------------------------------- MODULE Slow -------------------------------
(* Enough distinct states to keep TLC busy for a while (interrupt tests). *)
EXTENDS Naturals
VARIABLES a, b, c
Init == a = 0 /\ b = 0 /\ c = 0
Next == \/ a < 400 /\ a' = a + 1 /\ UNCHANGED <<b, c>>
        \/ b < 400 /\ b' = b + 1 /\ UNCHANGED <<a, c>>
        \/ c < 400 /\ c' = c + 1 /\ UNCHANGED <<a, b>>
=============================================================================
