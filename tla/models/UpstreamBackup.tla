--------------------------- MODULE UpstreamBackup ---------------------------
(***************************************************************************)
(* Upstream backup with two-level acknowledgements (SPATE paper Sec. 4-5;  *)
(* rules in specs/tla.md#upstream-backup) on the pipeline U -> O -> D.     *)
(* U produces slices 1..NumSlices and keeps each in its output queue Q     *)
(* until it may trim it.  O is stateful (a running sum of the slice        *)
(* numbers) and emits one result per slice, carrying the slice's sequence  *)
(* number; D deduplicates by sequence number.  O checkpoints (lastIn, sum).*)
(* Trim rule (Variant = "two-level"): slice k leaves Q only after the L1   *)
(* acknowledgement: D received k's result AND O took a checkpoint covering *)
(* k (postponed for a stateful operator).  Mutants: "l0" trims when O      *)
(* received k; "no-postpone" trims when D received k's result;             *)
(* "no-dedup": O re-applies a replayed slice its state already covers.     *)
(* Variant "ckpt-only" trims once O's checkpoint covers k, without D's     *)
(* acknowledgement: safe HERE because results in flight towards D survive  *)
(* O's failure (specs/tla.md#upstream-backup says why).                    *)
(* O may fail MaxFailures times: it restores its checkpoint, loses the     *)
(* slices in flight towards it, and U replays its whole queue Q (it does   *)
(* not know O's checkpoint), so O deduplicates slices it already covers.   *)
(* Results already in flight towards D survive.                            *)
(***************************************************************************)
EXTENDS Naturals, Sequences

CONSTANTS NumSlices, MaxFailures, Variant

VARIABLES produced, Q, uo, lastIn, sum, ck, od, dLast, dOut, fails

vars == <<produced, Q, uo, lastIn, sum, ck, od, dLast, dOut, fails>>

RunningSum(k) == (k * (k + 1)) \div 2

Init ==
  /\ produced = 0 /\ Q = {} /\ uo = <<>>
  /\ lastIn = 0 /\ sum = 0 /\ ck = [lastIn |-> 0, sum |-> 0]
  /\ od = <<>> /\ dLast = 0 /\ dOut = <<>> /\ fails = 0

Produce ==
  /\ produced < NumSlices
  /\ produced' = produced + 1
  /\ Q' = Q \cup {produced + 1}
  /\ uo' = Append(uo, produced + 1)
  /\ UNCHANGED <<lastIn, sum, ck, od, dLast, dOut, fails>>

OProcess ==
  /\ uo # <<>>
  /\ LET k == Head(uo) IN
     /\ (k <= lastIn + 1 \/ Variant = "no-dedup")
     /\ uo' = Tail(uo)
     /\ IF k = lastIn + 1 \/ Variant = "no-dedup"
          THEN /\ lastIn' = k /\ sum' = sum + k
               /\ od' = Append(od, [seq |-> k, val |-> sum + k])
          ELSE UNCHANGED <<lastIn, sum, od>>     \* a duplicate from a replay
  /\ UNCHANGED <<produced, Q, ck, dLast, dOut, fails>>

OCheckpoint ==
  /\ ck # [lastIn |-> lastIn, sum |-> sum]
  /\ ck' = [lastIn |-> lastIn, sum |-> sum]
  /\ UNCHANGED <<produced, Q, uo, lastIn, sum, od, dLast, dOut, fails>>

DReceive ==
  /\ od # <<>>
  /\ od' = Tail(od)
  /\ IF Head(od).seq = dLast + 1
       THEN dLast' = dLast + 1 /\ dOut' = Append(dOut, Head(od).val)
       ELSE UNCHANGED <<dLast, dOut>>
  /\ UNCHANGED <<produced, Q, uo, lastIn, sum, ck, fails>>

MayTrim(k) ==
  CASE Variant = "l0" -> k <= lastIn
    [] Variant = "no-postpone" -> k <= dLast
    [] Variant = "ckpt-only" -> k <= ck.lastIn
    [] OTHER -> k <= dLast /\ k <= ck.lastIn

Trim ==
  /\ \E k \in Q : MayTrim(k) /\ Q' = Q \ {k}
  /\ UNCHANGED <<produced, uo, lastIn, sum, ck, od, dLast, dOut, fails>>

\* The slices of Q above n, in increasing order.
RECURSIVE Replay(_, _)
Replay(n, hi) == IF n > hi THEN <<>>
                 ELSE (IF n \in Q THEN <<n>> ELSE <<>>) \o Replay(n + 1, hi)

Fail ==
  /\ fails < MaxFailures
  /\ fails' = fails + 1
  /\ lastIn' = ck.lastIn /\ sum' = ck.sum
  /\ uo' = Replay(1, produced)
  /\ UNCHANGED <<produced, Q, ck, od, dLast, dOut>>

Finished == dLast = NumSlices /\ uo = <<>> /\ od = <<>>
Done == Finished /\ UNCHANGED vars

Next == Produce \/ OProcess \/ OCheckpoint \/ DReceive \/ Trim \/ Fail \/ Done

Spec == Init /\ [][Next]_vars

RECURSIVE SumSet(_)
SumSet(S) == IF S = {} THEN 0 ELSE LET x == CHOOSE x \in S : TRUE IN x + SumSet(S \ {x})

\* If O failed now, the state it rebuilds -- its checkpoint plus the replay of U's queue above it
\* -- is the failure-free state after every slice produced so far (computed from the values, not
\* from the trim rule).
RecoveryExact == ck.sum + SumSet({k \in Q : k > ck.lastIn}) = RunningSum(produced)

TypeOK ==
  /\ produced \in 0..NumSlices
  /\ Q \subseteq 1..produced
  /\ \A i \in 1..Len(uo) : uo[i] \in 1..produced
  /\ lastIn \in 0..produced /\ sum \in Nat
  /\ ck \in [lastIn : 0..produced, sum : Nat]
  /\ \A i \in 1..Len(od) : od[i] \in [seq : 1..produced, val : Nat]
  /\ dLast \in 0..produced /\ Len(dOut) = dLast
  /\ fails \in 0..MaxFailures

\* ---- coverage goals (specs/tla.md#coverage): each must be violated at its entry's bound ----
\* A replayed slice O already covers arrives at O (the deduplication branch is taken next).
Unreached_DuplicateAtO == ~ (uo # <<>> /\ Head(uo) <= lastIn)
\* O's checkpoint covers a slice whose result D has not received yet (the first-level ACK matters).
Unreached_CheckpointAheadOfD == ~ (ck.lastIn > dLast)
\* O failed after U had trimmed a slice.
Unreached_FailAfterTrim == ~ (fails > 0 /\ \E k \in 1..produced : k \notin Q)
\* The run finished after a failure.
Unreached_FinishedAfterFailure == ~ (Finished /\ fails > 0)

\* D's output is a prefix of the failure-free output: no loss, no duplicate, right values.
ExactOutput == \A i \in 1..Len(dOut) : dOut[i] = RunningSum(i)
=============================================================================
