---------------------------- MODULE RecoveryLine ----------------------------
(***************************************************************************)
(* Recovery lines by rollback propagation on the checkpoint graph          *)
(* (FERDiS paper Sec. 7.2.5 and the survey's formulation; exact rule in    *)
(* specs/conventions.md "Checkpoint graph", restated in                    *)
(* specs/tla.md#recovery-line).  The model enumerates every pattern of N   *)
(* processes with at most MaxEvents events and checks, for every nonempty  *)
(* set of failed processes, that the computed line is a consistent cut and *)
(* the maximum consistent one under the same availability (brute force).   *)
(*                                                                         *)
(* Pattern state: ck[i] = checkpoints of P_i after the initial one; msgs   *)
(* = messages in send order, [s, r, sx, dy]: sent in I[s,sx], delivered in *)
(* I[r,dy] (dy = -1: in transit).  A line L gives each process an index;   *)
(* L[i] = ck[i] + 1 means "keep the volatile state V[i]".                  *)
(* Variant = "correct" | "single-pass" | "no-local-edges" (mutants).       *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS N, MaxEvents, Virtual, Variant

Procs == 0..(N - 1)

VARIABLES ck, msgs, nev

vars == <<ck, msgs, nev>>

Init == ck = [i \in Procs |-> 0] /\ msgs = <<>> /\ nev = 0

Send(p, q) ==
  /\ p # q /\ nev < MaxEvents
  /\ msgs' = Append(msgs, [s |-> p, r |-> q, sx |-> ck[p], dy |-> -1])
  /\ nev' = nev + 1 /\ UNCHANGED ck

Deliver(k) ==
  /\ nev < MaxEvents /\ msgs[k].dy = -1
  /\ msgs' = [msgs EXCEPT ![k].dy = ck[msgs[k].r]]
  /\ nev' = nev + 1 /\ UNCHANGED ck

Checkpoint(p) ==
  /\ nev < MaxEvents
  /\ ck' = [ck EXCEPT ![p] = @ + 1]
  /\ nev' = nev + 1 /\ UNCHANGED msgs

Next ==
  \/ \E p, q \in Procs : Send(p, q)
  \/ \E k \in 1..Len(msgs) : Deliver(k)
  \/ \E p \in Procs : Checkpoint(p)

Spec == Init /\ [][Next]_vars

Delivered == {k \in 1..Len(msgs) : msgs[k].dy >= 0}

\* The highest index process i may restore: V[i] only for survivors with virtual checkpoints.
Top(i, F) == IF Virtual /\ i \notin F THEN ck[i] + 1 ELSE ck[i]

\* Checkpoint-graph edges among the available nodes.
Edges(F) ==
  LET avail(n) == n[2] <= Top(n[1], F)
      local == IF Variant = "no-local-edges" THEN {}
               ELSE UNION {{<<<<i, x>>, <<i, x + 1>>>> : x \in 0..ck[i]} : i \in Procs}
      msg == {<<<<msgs[k].s, msgs[k].sx>>, <<msgs[k].r, msgs[k].dy + 1>>>> : k \in Delivered}
  IN {e \in local \cup msg : avail(e[1]) /\ avail(e[2])}

Succ(E, S) == {e[2] : e \in {f \in E : f[1] \in S}}

RECURSIVE Closure(_, _, _)
Closure(E, frontier, seen) ==
  IF frontier = {} THEN seen
  ELSE LET nxt == Succ(E, frontier) \ seen IN Closure(E, nxt, seen \cup nxt)

\* Nodes reachable from S by at least one edge.
Reach1(E, S) == LET s1 == Succ(E, S) IN Closure(E, s1, s1)

RECURSIVE Propagate(_, _, _)
Propagate(E, root, rounds) ==
  LET marked == Reach1(E, {<<i, root[i]>> : i \in Procs})
      latest(i) == CHOOSE x \in 0..root[i] :
                     /\ <<i, x>> \notin marked
                     /\ \A y \in (x + 1)..root[i] : <<i, y>> \in marked
      root2 == [i \in Procs |-> IF <<i, root[i]>> \in marked THEN latest(i) ELSE root[i]]
  IN IF root2 = root \/ Variant = "single-pass" THEN root2
     ELSE Propagate(E, root2, rounds + 1)

Line(F) == Propagate(Edges(F), [i \in Procs |-> Top(i, F)], 0)

ConsistentCut(L) == \A k \in Delivered : ~(msgs[k].dy < L[msgs[k].r] /\ msgs[k].sx >= L[msgs[k].s])

Cuts(F) == {c \in [Procs -> 0..(MaxEvents + 1)] : \A i \in Procs : c[i] <= Top(i, F)}

\* An independent computation of the maximum consistent cut: start at the top and, while some
\* delivered message is an orphan, roll its receiver back to the checkpoint before the delivery.
RECURSIVE DropOrphans(_)
DropOrphans(c) ==
  LET orphans == {k \in Delivered : msgs[k].dy < c[msgs[k].r] /\ msgs[k].sx >= c[msgs[k].s]}
  IN IF orphans = {} THEN c
     ELSE LET k == CHOOSE k \in orphans : TRUE
          IN DropOrphans([c EXCEPT ![msgs[k].r] = msgs[k].dy])

MaxConsistent(F) == DropOrphans([i \in Procs |-> Top(i, F)])

\* For every failure set: the line equals the maximum consistent cut.
LineIsMaxConsistent == \A F \in (SUBSET Procs) \ {{}} : Line(F) = MaxConsistent(F)

TypeOK ==
  /\ ck \in [Procs -> 0..MaxEvents]
  /\ nev \in 0..MaxEvents
  /\ Len(msgs) <= MaxEvents
  /\ \A k \in 1..Len(msgs) :
       /\ msgs[k].s \in Procs /\ msgs[k].r \in Procs /\ msgs[k].s # msgs[k].r
       /\ msgs[k].sx \in 0..ck[msgs[k].s] /\ msgs[k].dy \in -1..ck[msgs[k].r]

\* ---- coverage goals (specs/tla.md#coverage): each must be violated at its entry's bound ----
\* Some failure set makes the line roll a process back (an orphan exists).
Unreached_Rollback == ~ \E F \in (SUBSET Procs) \ {{}} : \E i \in Procs : Line(F)[i] < Top(i, F)
\* Some failure set needs two propagation rounds: a single pass leaves an orphan behind.
Unreached_SecondRound ==
  ~ \E F \in (SUBSET Procs) \ {{}} :
      LET E == Edges(F)
          root == [i \in Procs |-> Top(i, F)]
          marked == Reach1(E, {<<i, root[i]>> : i \in Procs})
          latest(i) == CHOOSE x \in 0..root[i] :
                         /\ <<i, x>> \notin marked
                         /\ \A y \in (x + 1)..root[i] : <<i, y>> \in marked
          once == [i \in Procs |-> IF <<i, root[i]>> \in marked THEN latest(i) ELSE root[i]]
      IN ~ConsistentCut(once)
\* A survivor must give up its volatile state (it received a message the failed side lost).
Unreached_SurvivorRollsBack ==
  ~ \E F \in (SUBSET Procs) \ {{}} : \E i \in Procs \ F : Virtual /\ Line(F)[i] < Top(i, F)

\* The same by brute force over every cut (small N only).
LineIsMaxBrute ==
  \A F \in (SUBSET Procs) \ {{}} :
     LET L == Line(F) IN
     /\ ConsistentCut(L)
     /\ \A c \in Cuts(F) : ConsistentCut(c) => \A i \in Procs : c[i] <= L[i]
=============================================================================
