-------------------------------- MODULE Spans --------------------------------
(***************************************************************************)
(* The Falkirk Wheel span fixed point (Falkirk Wheel paper Sec. 3.1-3.4,    *)
(* 4.1-4.3; rules in specs/tla.md#spans) on small systems, abstracted to   *)
(* chain indices.  Processor p restores one of c_0 .. c_K (index 0..K) or, *)
(* when alive, its top set (index K+1).  Because chains are nested, each   *)
(* constraint on an edge e = (p, q) is a threshold on indices:             *)
(*   C1 (owned by p): T_D_e(s(p)) \subseteq s(q)  <=>  D[e][s(p)] <= s(q),  *)
(*       except that it holds when both ends stay at top;                  *)
(*   C2 (owned by q): T_M_e \cap s(q) \subseteq phi_e(s(p))                 *)
(*       <=>  s(q) <= G[e][s(p)].                                          *)
(* D is nondecreasing with D[e][0] = 0 (T_D(empty) = empty; K+2 stands for *)
(* "not contained even in top"); G[e][top of p] = top of q (phi(top) = all *)
(* times) and G is nondecreasing iff phi is monotone.  Init enumerates     *)
(* every such system; the worklist algorithm then runs in every order.     *)
(*                                                                         *)
(* Checked at termination: every constraint holds and the assignment is   *)
(* the greatest feasible one (brute force over all assignments).          *)
(* Variant: "worklist" (correct), "downstream-only" (re-examines only      *)
(* receivers: a mutant), "non-monotone-phi" (G arbitrary: the theorem's     *)
(* hypothesis fails and maximality can fail).                              *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS Graph, K, Variant

Edges == CASE Graph = "cycle2" -> {<<"p", "q">>, <<"q", "p">>}
           [] Graph = "chain3" -> {<<"p", "q">>, <<"q", "r">>}
           [] OTHER -> {<<"p", "q">>}
Procs == {e[1] : e \in Edges} \cup {e[2] : e \in Edges}

VARIABLES alive, D, G, s, work

vars == <<alive, D, G, s, work>>

Top(p) == IF alive[p] THEN K + 1 ELSE K
Idx(p) == 0..Top(p)

Monotone(f, dom) == \A x, y \in dom : x <= y => f[x] <= f[y]

Thresholds(e) ==
  {f \in [0..(K + 1) -> 0..(K + 2)] : f[0] = 0 /\ Monotone(f, 0..(K + 1))}
Caps(e) ==
  IF Variant = "non-monotone-phi"
    THEN {f \in [0..(K + 1) -> 0..(K + 1)] : f[K + 1] = K + 1}
    ELSE {f \in [0..(K + 1) -> 0..(K + 1)] : f[K + 1] = K + 1 /\ Monotone(f, 0..(K + 1))}

\* C1 of e = (p, q) with p at index a and q at index b; C2 of e likewise.
C1(e, a, b) == D[e][a] <= b \/ (a = Top(e[1]) /\ b = Top(e[2]) /\ alive[e[1]] /\ alive[e[2]])
C2(e, a, b) == b <= (IF a = Top(e[1]) THEN Top(e[2]) ELSE G[e][a])

\* Every constraint owned by w holds when w is at index x and the others at asg.
OwnedHold(w, x, asg) ==
  LET at(v) == IF v = w THEN x ELSE asg[v] IN
  /\ \A e \in Edges : e[1] = w => C1(e, x, at(e[2]))
  /\ \A e \in Edges : e[2] = w => C2(e, at(e[1]), x)

Feasible(asg) == \A e \in Edges : C1(e, asg[e[1]], asg[e[2]]) /\ C2(e, asg[e[1]], asg[e[2]])

Init ==
  /\ alive \in [Procs -> BOOLEAN]
  /\ D \in [Edges -> UNION {Thresholds(e) : e \in Edges}]
  /\ G \in [Edges -> UNION {Caps(e) : e \in Edges}]
  /\ s = [p \in Procs |-> Top(p)]
  /\ work = Procs

\* Whom to re-examine after w changed: owners of constraints whose neighbour is w.
Affected(w) ==
  IF Variant = "downstream-only" THEN {e[2] : e \in {f \in Edges : f[1] = w}}
  ELSE {e[2] : e \in {f \in Edges : f[1] = w}} \cup {e[1] : e \in {f \in Edges : f[2] = w}}

Examine(w) ==
  /\ w \in work
  /\ LET x == CHOOSE x \in 0..s[w] : OwnedHold(w, x, s) /\ \A y \in (x + 1)..s[w] : ~OwnedHold(w, y, s)
     IN /\ s' = [s EXCEPT ![w] = x]
        /\ work' = IF x # s[w] THEN (work \ {w}) \cup Affected(w) ELSE work \ {w}
  /\ UNCHANGED <<alive, D, G>>

Done == work = {} /\ UNCHANGED vars

Next == (\E w \in Procs : Examine(w)) \/ Done

Spec == Init /\ [][Next]_vars

Assignments == {a \in [Procs -> 0..(K + 1)] : \A p \in Procs : a[p] <= Top(p)}

TypeOK ==
  /\ alive \in [Procs -> BOOLEAN]
  /\ s \in [Procs -> 0..(K + 1)]
  /\ \A p \in Procs : s[p] <= Top(p)
  /\ work \subseteq Procs
  /\ DOMAIN D = Edges /\ DOMAIN G = Edges

\* ---- coverage goals (specs/tla.md#coverage): each must be violated at its entry's bound ----
\* The worklist lowered some processor (a constraint was violated at the top).
Unreached_Lowered == ~ \E p \in Procs : s[p] < Top(p)
\* Some processor is re-examined after a neighbour changed (the worklist did propagate).
Unreached_Requeued == ~ \E p \in Procs : p \in work /\ s[p] < Top(p) /\ \E q \in Procs : q # p /\ s[q] < Top(q)
\* A run terminated with a processor at index 0 (rolled back to the beginning).
Unreached_BottomReached == ~ (work = {} /\ \E p \in Procs : s[p] = 0)

ResultCorrect ==
  work = {} =>
    /\ Feasible(s)
    /\ \A a \in Assignments : Feasible(a) => \A p \in Procs : a[p] <= s[p]
=============================================================================
