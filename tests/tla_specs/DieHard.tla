------------------------------ MODULE DieHard ------------------------------
(* The water-jug puzzle: a 3- and a 5-gallon jug, fill / empty / pour.      *)
(* "NotSolved" fails as soon as the big jug holds exactly 4 gallons.        *)
EXTENDS Naturals

VARIABLES small, big

Min(m, n) == IF m < n THEN m ELSE n

TypeOK == small \in 0..3 /\ big \in 0..5

Init == small = 0 /\ big = 0

FillSmall == small' = 3 /\ big' = big
FillBig == big' = 5 /\ small' = small
EmptySmall == small' = 0 /\ big' = big
EmptyBig == big' = 0 /\ small' = small

SmallToBig ==
  LET poured == Min(big + small, 5) - big
  IN /\ big' = big + poured
     /\ small' = small - poured

BigToSmall ==
  LET poured == Min(big + small, 3) - small
  IN /\ big' = big - poured
     /\ small' = small + poured

Next == \/ FillSmall \/ FillBig \/ EmptySmall \/ EmptyBig \/ SmallToBig \/ BigToSmall

Spec == Init /\ [][Next]_<<small, big>>

NotSolved == big # 4
=============================================================================
