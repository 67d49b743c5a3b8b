-------------------------------- MODULE CIC --------------------------------
(***************************************************************************)
(* Communication-induced checkpointing on n processes with non-FIFO        *)
(* channels, a bounded number of sends and of basic checkpoints.           *)
(* Invariant NoUseless: no checkpoint lies on a Z-cycle, checked as        *)
(* reachability in the rollback-dependency graph (R-graph) of the history  *)
(* recorded so far (Wang's theorem, specs/conventions.md; specs/tla.md#cic). *)
(*                                                                         *)
(* The R-graph grows monotonically: node <<p, x>> is C[p,x]; the last node *)
(* <<p, ck[p]+1>> is V[p] and becomes a real checkpoint when p checkpoints. *)
(* reach is its transitive closure, kept incrementally.  C[p,x] is useless *)
(* iff <<p,x+1>> reaches <<p,x>>.                                          *)
(***************************************************************************)
EXTENDS CICRules, TLC

CONSTANTS MaxSends, MaxBasic

VARIABLES net, nsent, nbasic, reach

vars == <<ruleVars, net, nsent, nbasic, reach>>

\* Add the edge u -> v to the transitively closed relation R.
AddEdge(R, u, v) ==
  LET pre == {e[1] : e \in {f \in R : f[2] = u}} \cup {u}
      post == {e[2] : e \in {f \in R : f[1] = v}} \cup {v}
  IN R \cup (pre \X post)

Init ==
  /\ RulesInit
  /\ net = {}
  /\ nsent = 0
  /\ nbasic = 0
  /\ reach = {<<<<p, 0>>, <<p, 1>>>> : p \in Procs}

Checkpoint(p) ==
  /\ nbasic < MaxBasic
  /\ nbasic' = nbasic + 1
  /\ RCheckpoint(p)
  /\ reach' = AddEdge(reach, <<p, ck[p] + 1>>, <<p, ck[p] + 2>>)
  /\ UNCHANGED <<net, nsent>>

Send(p, q) ==
  /\ p # q
  /\ nsent < MaxSends
  /\ nsent' = nsent + 1
  /\ net' = net \cup {[id |-> nsent + 1, from |-> p, to |-> q, sx |-> ck[p], pb |-> Piggyback(p)]}
  /\ RSend(p, q)
  /\ UNCHANGED <<nbasic, reach>>

Deliver(m) ==
  LET p == m.to
      pb == UsedPb(m.from, m.pb)
      f == MustForce(p, m.from, pb)
      y == ck[p] + (IF f THEN 1 ELSE 0)
      r1 == IF f THEN AddEdge(reach, <<p, ck[p] + 1>>, <<p, ck[p] + 2>>) ELSE reach
  IN /\ net' = net \ {m}
     /\ RDeliver(p, m.from, pb, f)
     /\ reach' = AddEdge(r1, <<m.from, m.sx + 1>>, <<p, y + 1>>)
     /\ UNCHANGED <<nsent, nbasic>>

Next ==
  \/ \E p \in Procs : Checkpoint(p)
  \/ \E p, q \in Procs : Send(p, q)
  \/ \E m \in net : Deliver(m)

Spec == Init /\ [][Next]_vars

\* No checkpoint (initial ones included) is useless.
NoUseless == \A p \in Procs : \A x \in 0..ck[p] : <<<<p, x + 1>>, <<p, x>>>> \notin reach

Sym == Permutations(Procs)

\* ---- type invariant ----
Nodes == Procs \X (0..(MaxBasic + MaxSends + 1))
PbOK(pb) == IF IsHMNR THEN pb \in [clock : [Procs -> Nat], ckpt : [Procs -> Nat],
                                   taken : [Procs -> BOOLEAN]]
            ELSE pb \in Nat
TypeOK ==
  /\ RulesTypeOK
  /\ ck \in [Procs -> 0..(MaxBasic + MaxSends)]
  /\ nsent \in 0..MaxSends
  /\ nbasic \in 0..MaxBasic
  /\ reach \subseteq Nodes \X Nodes
  /\ \A m \in net : /\ m.id \in 1..nsent
                    /\ m.from \in Procs /\ m.to \in Procs /\ m.from # m.to
                    /\ m.sx \in 0..ck[m.from]
                    /\ PbOK(m.pb)

\* ---- coverage goals (specs/tla.md#coverage) ----
\* Each Unreached_X is an invariant that must be VIOLATED at the bound of the entries that list
\* it: the situation X is reachable, so the checked invariants do not hold vacuously there.
HS(m) == HState(m.to)
PbOf(m) == UsedPb(m.from, m.pb)
\* A delivery is enabled that the protocol forces by C1 alone (HMNR family).
Unreached_ForcedByC1 == ~ \E m \in net : IsHMNR /\ C1(HS(m), m.from, PbOf(m)) /\ ~C2(HS(m), m.to, PbOf(m))
\* ... by C2 alone.
Unreached_ForcedByC2 == ~ \E m \in net : IsHMNR /\ C2(HS(m), m.to, PbOf(m)) /\ ~C1(HS(m), m.from, PbOf(m))
\* A delivery is enabled that the protocol forces (any protocol).
Unreached_Forced == ~ \E m \in net : MustForce(m.to, m.from, PbOf(m))
\* A delivery whose sender is not in the receiver's latest interval (a message crossing a checkpoint).
Unreached_CrossingMessage == ~ \E m \in net : m.sx < ck[m.from]
\* Every process checkpointed at least once (basic or forced).
Unreached_AllCheckpointed == ~ \A p \in Procs : ck[p] > 0
=============================================================================
