----------------------------- MODULE HourClock -----------------------------
(* An hour clock that ticks forever; "ReachesThirteen" is a liveness claim *)
(* that cannot hold, so TLC answers with a lasso: 1, 2, ..., 12, back to 1. *)
EXTENDS Naturals

VARIABLE hr

Init == hr \in 1..12
Tick == hr' = IF hr = 12 THEN 1 ELSE hr + 1

Spec == Init /\ [][Tick]_hr /\ WF_hr(Tick)

TypeOK == hr \in 1..12
ReachesThirteen == <>(hr = 13)
=============================================================================
