--------------------------- MODULE ChandyLamport ---------------------------
(***************************************************************************)
(* Chandy-Lamport snapshots on a dataflow operator graph, as adapted by    *)
(* stream processors (FERDiS paper Sec. 5.1, 7.2.2-7.2.3; rules in         *)
(* specs/tla.md#chandy-lamport).  Channels are FIFO.  Sources emit up to   *)
(* MaxRecords records per output edge and start the snapshot at a moment  *)
(* of their choice by checkpointing and sending a marker downstream.       *)
(*                                                                         *)
(* Aligned (Mode = "aligned"): an operator does not consume an input past *)
(* its marker; when every input has its marker at the head it checkpoints,*)
(* consumes the markers and forwards a marker on every output.  No channel *)
(* state is recorded.  Unaligned (Mode = "unaligned"): the first marker    *)
(* triggers the checkpoint and the forwarding; records that arrive on an   *)
(* input after the checkpoint and before that input's marker are recorded  *)
(* as channel state.                                                       *)
(*                                                                         *)
(* A channel is a record: a = records ahead of the marker (all records if  *)
(* there is none), m = marker present, b = records behind the marker.      *)
(* Consistent: for every edge whose ends both checkpointed, the records    *)
(* the receiver consumed before its checkpoint plus the recorded channel   *)
(* state equal the records the sender sent before its checkpoint.          *)
(* NoChannelState (aligned modes): the snapshot needs no channel state --  *)
(* the receiver consumed, before its checkpoint, exactly the records the   *)
(* sender sent before its own (counted from sent/received, not from the   *)
(* chanState bookkeeping).  Mutants: "aligned-noblock" (consumes records   *)
(* behind a marker before checkpointing: inconsistent) and "aligned-eager" *)
(* (checkpoints at the first marker, logging the records still in flight   *)
(* on the other inputs: consistent, but not a channel-state-free snapshot). *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS Graph, Mode, MaxRecords

AcyclicEdges == {<<"s1", "j">>, <<"s2", "j">>, <<"j", "k">>}
CyclicEdges == {<<"s", "a">>, <<"a", "b">>, <<"b", "a">>, <<"b", "k">>}

Edges == IF Graph = "acyclic" THEN AcyclicEdges ELSE CyclicEdges
Nodes == {e[1] : e \in Edges} \cup {e[2] : e \in Edges}
In(v) == {e \in Edges : e[2] = v}
Out(v) == {e \in Edges : e[1] = v}
Sources == {v \in Nodes : In(v) = {}}

\* Modes that take the checkpoint at the first marker and log in-flight records as channel state.
LogsChannels == Mode \in {"unaligned", "aligned-eager"}

VARIABLES chan, sent, recv, snap, snapSent, snapRecv, chanState

vars == <<chan, sent, recv, snap, snapSent, snapRecv, chanState>>

Init ==
  /\ chan = [e \in Edges |-> [a |-> 0, m |-> FALSE, b |-> 0]]
  /\ sent = [e \in Edges |-> 0]
  /\ recv = [e \in Edges |-> 0]
  /\ snap = [v \in Nodes |-> FALSE]
  /\ snapSent = [e \in Edges |-> 0]
  /\ snapRecv = [e \in Edges |-> 0]
  /\ chanState = [e \in Edges |-> 0]

\* Append one record to channel c (behind the marker if one is in flight).
Push(c) == IF c.m THEN [c EXCEPT !.b = @ + 1] ELSE [c EXCEPT !.a = @ + 1]

\* Output edges of v that still take a record (bounded).
Open(v) == {f \in Out(v) : sent[f] < MaxRecords}

\* Emit one record on every open output of v, starting from channel function ch.
EmitFrom(ch, v) == [f \in Edges |-> IF f \in Open(v) THEN Push(ch[f]) ELSE ch[f]]

\* v checkpoints: record sent/received counts, put a marker on every output.
SnapshotAt(v, ch) ==
  /\ snap' = [snap EXCEPT ![v] = TRUE]
  /\ snapSent' = [f \in Edges |-> IF f \in Out(v) THEN sent[f] ELSE snapSent[f]]
  /\ snapRecv' = [e \in Edges |-> IF e \in In(v) THEN recv[e] ELSE snapRecv[e]]
  /\ chan' = [f \in Edges |-> IF f \in Out(v) THEN [ch[f] EXCEPT !.m = TRUE] ELSE ch[f]]

SourceEmit(v) ==
  /\ v \in Sources
  /\ Open(v) # {}
  /\ chan' = EmitFrom(chan, v)
  /\ sent' = [f \in Edges |-> IF f \in Open(v) THEN sent[f] + 1 ELSE sent[f]]
  /\ UNCHANGED <<recv, snap, snapSent, snapRecv, chanState>>

SourceSnapshot(v) ==
  /\ v \in Sources
  /\ ~snap[v]
  /\ SnapshotAt(v, chan)
  /\ UNCHANGED <<sent, recv, chanState>>

\* Has the marker of edge e already been consumed?  (It was sent and is no longer in flight.)
MarkerSeen(e) == snap[e[1]] /\ ~chan[e].m

\* Consume a record from input e and forward one record on every open output.
Process(e) ==
  LET v == e[2]
      c0 == [chan EXCEPT ![e] = [@ EXCEPT !.a = @ - 1]]
  IN /\ chan[e].a > 0
     /\ chan' = EmitFrom(c0, v)
     /\ recv' = [recv EXCEPT ![e] = @ + 1]
     /\ sent' = [f \in Edges |-> IF f \in Open(v) THEN sent[f] + 1 ELSE sent[f]]
     \* unaligned: a record consumed after v's checkpoint, before e's marker, is channel state
     /\ chanState' = IF LogsChannels /\ snap[v] /\ ~MarkerSeen(e)
                     THEN [chanState EXCEPT ![e] = @ + 1] ELSE chanState
     /\ UNCHANGED <<snap, snapSent, snapRecv>>

\* Remove the marker at the head of e (a = 0 /\ m): records behind it move ahead.
PopMarker(ch, e) == [ch EXCEPT ![e] = [a |-> ch[e].b, m |-> FALSE, b |-> 0]]

AlignedSnapshot(v) ==
  /\ Mode = "aligned"
  /\ v \notin Sources
  /\ ~snap[v]
  /\ \A e \in In(v) : chan[e].a = 0 /\ chan[e].m
  /\ LET popped == [e \in Edges |-> IF e \in In(v) THEN [a |-> chan[e].b, m |-> FALSE, b |-> 0]
                                     ELSE chan[e]]
     IN SnapshotAt(v, popped)
  /\ UNCHANGED <<sent, recv, chanState>>

\* Unaligned: a marker at the head of e is consumed; the first one triggers the checkpoint.
UnalignedMarker(e) ==
  LET v == e[2] IN
  /\ LogsChannels
  /\ chan[e].a = 0 /\ chan[e].m
  /\ IF snap[v]
       THEN /\ chan' = PopMarker(chan, e)
            /\ UNCHANGED <<snap, snapSent, snapRecv>>
       ELSE SnapshotAt(v, PopMarker(chan, e))
  /\ UNCHANGED <<sent, recv, chanState>>

\* Mutant "aligned-noblock": consumes a marker without blocking that input (so records behind
\* it are processed before the checkpoint) and checkpoints once every input's marker was consumed.
NoBlockMarker(e) ==
  LET v == e[2] IN
  /\ Mode = "aligned-noblock"
  /\ chan[e].a = 0 /\ chan[e].m
  /\ ~snap[v]
  /\ chan' = PopMarker(chan, e)
  /\ UNCHANGED <<sent, recv, snap, snapSent, snapRecv, chanState>>

NoBlockSnapshot(v) ==
  /\ Mode = "aligned-noblock"
  /\ v \notin Sources
  /\ ~snap[v]
  /\ \A e \in In(v) : MarkerSeen(e)
  /\ SnapshotAt(v, chan)
  /\ UNCHANGED <<sent, recv, chanState>>

\* Every operator checkpointed and nothing is in flight: the run is over.
Finished == /\ \A v \in Nodes : snap[v]
            /\ \A e \in Edges : chan[e].a = 0 /\ ~chan[e].m /\ chan[e].b = 0
            /\ \A v \in Sources : Open(v) = {}
Done == Finished /\ UNCHANGED vars

Next ==
  \/ \E v \in Nodes : SourceEmit(v) \/ SourceSnapshot(v) \/ AlignedSnapshot(v) \/ NoBlockSnapshot(v)
  \/ \E e \in Edges : Process(e) \/ UnalignedMarker(e) \/ NoBlockMarker(e)
  \/ Done

Spec == Init /\ [][Next]_vars

\* Checked once the recording of e is complete: both ends checkpointed and e's marker consumed.
Consistent ==
  \A e \in Edges : (snap[e[1]] /\ snap[e[2]] /\ MarkerSeen(e))
                     => snapRecv[e] + chanState[e] = snapSent[e]

\* Aligned snapshots need no channel state: once both ends of e checkpointed, the receiver had
\* consumed exactly what the sender had sent before its checkpoint (nothing in flight across the
\* cut), and nothing was logged.
NoChannelState ==
  Mode # "unaligned" =>
    \A e \in Edges : (snap[e[1]] /\ snap[e[2]]) => snapRecv[e] = snapSent[e] /\ chanState[e] = 0

TypeOK ==
  /\ chan \in [Edges -> [a : 0..(2 * MaxRecords), m : BOOLEAN, b : 0..(2 * MaxRecords)]]
  /\ sent \in [Edges -> 0..MaxRecords]
  /\ recv \in [Edges -> 0..MaxRecords]
  /\ snap \in [Nodes -> BOOLEAN]
  /\ snapSent \in [Edges -> 0..MaxRecords]
  /\ snapRecv \in [Edges -> 0..MaxRecords]
  /\ chanState \in [Edges -> 0..MaxRecords]
  /\ \A e \in Edges : chan[e].m => snap[e[1]]

\* ---- coverage goals (specs/tla.md#coverage): each must be violated at its entry's bound ----
\* Some operator with several inputs holds a marker on one input while records wait on another.
Unreached_Alignment == ~ \E v \in Nodes : \E e, f \in In(v) :
                          e # f /\ chan[e].a = 0 /\ chan[e].m /\ ~snap[v] /\ chan[f].a > 0
\* Records travel behind a marker (sent after the sender's checkpoint, before the receiver's).
Unreached_RecordBehindMarker == ~ \E e \in Edges : chan[e].m /\ chan[e].b > 0
\* Some channel state was logged (unaligned modes).
Unreached_ChannelStateLogged == ~ \E e \in Edges : chanState[e] > 0
\* The snapshot completed everywhere.
Unreached_Complete == ~ \A v \in Nodes : snap[v]
=============================================================================
