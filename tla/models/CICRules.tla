------------------------------ MODULE CICRules ------------------------------
(***************************************************************************)
(* The rules of communication-induced checkpointing protocols, shared by   *)
(* the model CIC.tla and by the generated trace-validation modules.        *)
(* Source: FERDiS paper Sec. 5.3 and 7.2.2; exact rules in rollcheck's     *)
(* specs/protocols.md, restated in specs/tla.md#cic.                      *)
(*                                                                         *)
(* Index conventions (specs/conventions.md): ck[p] is the number of        *)
(* checkpoints P_p took after its initial one, so P_p is in interval       *)
(* I[p, ck[p]].  HMNR's own index ckpt[p][p] starts at 1 (0 = unknown).   *)
(*                                                                         *)
(* Protocol is "uc", "bcs", "hmnr", or a variant of pyimpl.protocols:     *)
(* unsafe "hmnr-no-c1", "hmnr-no-c2", "hmnr-merge-skip-sender",            *)
(* "hmnr-merge-own-index" (own clock merged with m.clock[i], not          *)
(* m.clock[j]), "hmnr-taken-overwrite" (equal ckpt index: taken[k] :=     *)
(* m.taken[k] instead of taken[k] \/ m.taken[k]),                          *)
(* "hmnr-piggyback-at-delivery", "bcs-no-force"; safe but forcing more     *)
(* "hmnr-no-minto", "hmnr-minto-every-send", "bcs-geq".                    *)
(***************************************************************************)
EXTENDS Naturals

CONSTANTS Procs, Protocol, Inf

VARIABLES ck, clock, ckpt, taken, sent_to, min_to, lc

ruleVars == <<ck, clock, ckpt, taken, sent_to, min_to, lc>>

IsHMNR == Protocol \in {"hmnr", "hmnr-no-c1", "hmnr-no-c2", "hmnr-merge-skip-sender",
                        "hmnr-merge-own-index", "hmnr-taken-overwrite",
                        "hmnr-piggyback-at-delivery", "hmnr-no-minto", "hmnr-minto-every-send"}
IsBCS == Protocol \in {"bcs", "bcs-no-force", "bcs-geq"}

Min(a, b) == IF a <= b THEN a ELSE b

Max(a, b) == IF a >= b THEN a ELSE b

\* HMNR: every process runs take_checkpoint once from all-zero vectors.
RulesInit ==
  /\ ck = [p \in Procs |-> 0]
  /\ clock = [p \in Procs |-> [k \in Procs |-> IF IsHMNR /\ k = p THEN 1 ELSE 0]]
  /\ ckpt = [p \in Procs |-> [k \in Procs |-> IF IsHMNR /\ k = p THEN 1 ELSE 0]]
  /\ taken = [p \in Procs |-> [k \in Procs |-> IsHMNR /\ k # p]]
  /\ sent_to = [p \in Procs |-> [k \in Procs |-> FALSE]]
  /\ min_to = [p \in Procs |-> [k \in Procs |-> IF IsHMNR THEN Inf ELSE 0]]
  /\ lc = [p \in Procs |-> 0]

\* Types of the rule variables (the models' TypeOK include it).
RulesTypeOK ==
  /\ ck \in [Procs -> Nat]
  /\ clock \in [Procs -> [Procs -> Nat]]
  /\ ckpt \in [Procs -> [Procs -> Nat]]
  /\ taken \in [Procs -> [Procs -> BOOLEAN]]
  /\ sent_to \in [Procs -> [Procs -> BOOLEAN]]
  /\ min_to \in [Procs -> [Procs -> Nat]]
  /\ lc \in [Procs -> Nat]

\* The HMNR control state of p as one record (pure operators below work on it).
HState(p) == [clock |-> clock[p], ckpt |-> ckpt[p], taken |-> taken[p],
              sent_to |-> sent_to[p], min_to |-> min_to[p]]

SetH(p, s) ==
  /\ clock' = [clock EXCEPT ![p] = s.clock]
  /\ ckpt' = [ckpt EXCEPT ![p] = s.ckpt]
  /\ taken' = [taken EXCEPT ![p] = s.taken]
  /\ sent_to' = [sent_to EXCEPT ![p] = s.sent_to]
  /\ min_to' = [min_to EXCEPT ![p] = s.min_to]

UnchangedH == UNCHANGED <<clock, ckpt, taken, sent_to, min_to>>

\* take_checkpoint
CkptH(s, p) ==
  [clock |-> [s.clock EXCEPT ![p] = @ + 1], ckpt |-> [s.ckpt EXCEPT ![p] = @ + 1],
   taken |-> [k \in Procs |-> k # p], sent_to |-> [k \in Procs |-> FALSE],
   min_to |-> [k \in Procs |-> Inf]]

SendH(s, p, q) ==
  IF Protocol = "hmnr-minto-every-send"
    THEN [s EXCEPT !.sent_to = [@ EXCEPT ![q] = TRUE],
                   !.min_to = [@ EXCEPT ![q] = Min(s.clock[q], s.clock[p])]]
  ELSE IF s.sent_to[q] THEN s
  ELSE [s EXCEPT !.sent_to = [@ EXCEPT ![q] = TRUE], !.min_to = [@ EXCEPT ![q] = s.clock[p]]]

SkipMerge(k, j) == Protocol = "hmnr-merge-skip-sender" /\ k = j

\* The entry of m.clock that the receiver p merges into its own clock: the sender's (j).
OwnMergeIndex(p, j) == IF Protocol = "hmnr-merge-own-index" THEN p ELSE j

MergeH(s, p, j, m) ==
  [s EXCEPT
     !.clock = [k \in Procs |->
                  IF k = p THEN Max(s.clock[p], m.clock[OwnMergeIndex(p, j)])
                  ELSE IF SkipMerge(k, j) THEN s.clock[k] ELSE Max(s.clock[k], m.clock[k])],
     !.ckpt = [k \in Procs |->
                  IF k = p \/ SkipMerge(k, j) THEN s.ckpt[k] ELSE Max(s.ckpt[k], m.ckpt[k])],
     !.taken = [k \in Procs |->
                  IF k = p \/ SkipMerge(k, j) THEN s.taken[k]
                  ELSE IF m.ckpt[k] > s.ckpt[k] THEN m.taken[k]
                  ELSE IF m.ckpt[k] = s.ckpt[k]
                    THEN IF Protocol = "hmnr-taken-overwrite" THEN m.taken[k] ELSE s.taken[k] \/ m.taken[k]
                  ELSE s.taken[k]]]

C1(s, j, m) == \E k \in Procs : s.sent_to[k]
                                /\ (Protocol = "hmnr-no-minto" \/ m.clock[j] > s.min_to[k])
                                /\ m.clock[j] > Max(s.clock[k], m.clock[k])
C2(s, p, m) == m.ckpt[p] = s.ckpt[p] /\ m.taken[p]

\* What a message piggybacks (copies taken at send time).
Piggyback(p) ==
  IF IsHMNR THEN [clock |-> clock[p], ckpt |-> ckpt[p], taken |-> taken[p]]
  ELSE IF IsBCS THEN lc[p] ELSE 0

\* The piggyback the receiver actually uses: the copy made at send time, except in the
\* mutant that reads the sender's vectors when the message is delivered.
UsedPb(j, pb) == IF Protocol = "hmnr-piggyback-at-delivery" THEN Piggyback(j) ELSE pb

\* Does the protocol take a forced checkpoint before p delivers a message from j with
\* piggyback pb?  Evaluated on the state *before* anything is merged.
MustForce(p, j, pb) ==
  CASE Protocol \in {"uc", "bcs-no-force"} -> FALSE
    [] Protocol = "bcs" -> pb > lc[p]
    [] Protocol = "bcs-geq" -> pb >= lc[p]
    [] Protocol = "hmnr-no-c1" -> C2(HState(p), p, pb)
    [] Protocol = "hmnr-no-c2" -> C1(HState(p), j, pb)
    [] OTHER -> C1(HState(p), j, pb) \/ C2(HState(p), p, pb)

\* ---- the three rule steps (they change only ruleVars) ----
RCheckpoint(p) ==
  /\ ck' = [ck EXCEPT ![p] = @ + 1]
  /\ IF IsHMNR THEN SetH(p, CkptH(HState(p), p)) ELSE UnchangedH
  /\ lc' = IF IsBCS THEN [lc EXCEPT ![p] = @ + 1] ELSE lc

RSend(p, q) ==
  /\ IF IsHMNR THEN SetH(p, SendH(HState(p), p, q)) ELSE UnchangedH
  /\ UNCHANGED <<ck, lc>>

\* Deliver at p a message from j with piggyback pb; forced says whether a forced checkpoint
\* is taken immediately before the delivery.
RDeliver(p, j, pb, forced) ==
  /\ ck' = [ck EXCEPT ![p] = @ + (IF forced THEN 1 ELSE 0)]
  /\ IF IsHMNR
       THEN LET s0 == HState(p)
                s1 == IF forced THEN CkptH(s0, p) ELSE s0
            IN SetH(p, MergeH(s1, p, j, pb))
       ELSE UnchangedH
  \* BCS: a forced checkpoint does lc += 1, then lc := max(lc, m.lc).
  /\ lc' = IF IsBCS THEN [lc EXCEPT ![p] = Max(@ + (IF forced THEN 1 ELSE 0), pb)] ELSE lc
=============================================================================
