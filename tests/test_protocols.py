"""Protocol state machines: the exact rules of specs/protocols.md, run_protocol, timer, snapshots."""

from __future__ import annotations

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import PatternBuilder
from rollcheck.pyimpl.protocols import (
    BCS,
    HMNR,
    PROTOCOLS,
    UC,
    VARIANTS,
    AlignedNoBlock,
    AlignedSnapshot,
    BasicTimer,
    UnalignedSnapshot,
    count_schedule,
    get_protocol,
    get_snapshot_protocol,
    run_protocol,
    strip_forced,
)
from rollcheck.pyimpl.protocols.hmnr import INF
from rollcheck.pyimpl.protocols.variants import (
    HMNRMergeSkipSender,
    HMNRNoC1,
    HMNRNoC2,
    HMNRPiggybackAtDelivery,
)
from rollcheck.pyimpl.zpaths import useless_checkpoints


def c2_cycle():
    """P1 -> P0 (m0) delivered; P0 checkpoints; P0 -> P1 (m1): C2 must force before m1."""
    b = PatternBuilder(2)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    return b.build()


def c1_cycle():
    """The non-causal Z-cycle through C[2,1] that only C1 sees (P0 sends to P1 before receiving)."""
    b = PatternBuilder(3)
    m_a = b.send(1, 2)       # P1 -> P2, sent before P1 hears from anyone
    m_b = b.send(0, 1)       # P0 -> P1, sent in P0's interval 0
    b.deliver(2, m_a)
    b.checkpoint(2)          # C[2,1]
    m_c = b.send(2, 0)       # P2 -> P0 after C[2,1]
    b.deliver(0, m_c)        # P0 delivers in interval 0, after having sent m_b
    b.deliver(1, m_b)        # P1 delivers m_b in the interval in which it sent m_a
    return b.build()


def test_hmnr_initial_checkpoint_procedure():
    st = HMNR().initial(1, 3)
    assert st.clock == (0, 1, 0) and st.ckpt == (0, 1, 0)
    assert st.taken == (True, False, True)
    assert st.sent_to == (False,) * 3 and st.min_to == (INF,) * 3


def test_hmnr_checkpoint_resets_interval_and_send_sets_min_to_once():
    h = HMNR()
    st = h.initial(0, 3)
    st, _ = h.on_send(st, 2)
    assert st.sent_to == (False, False, True) and st.min_to[2] == 1
    st = h.on_checkpoint(st)
    assert st.clock[0] == 2 and st.ckpt[0] == 2 and st.sent_to == (False,) * 3 and st.min_to == (INF,) * 3
    st, _ = h.on_send(st, 1)
    st = st._replace(clock=(5, 0, 0))  # a later send must not move min_to
    st, _ = h.on_send(st, 1)
    assert st.min_to[1] == 2


def test_piggyback_is_a_copy_taken_at_send_time():
    h = HMNR()
    st = h.initial(0, 2)
    st, pb = h.on_send(st, 1)
    st = h.on_checkpoint(st)
    assert pb.clock == (1, 0) and pb.ckpt == (1, 0) and pb.taken == (False, True)
    live = HMNRPiggybackAtDelivery()
    lst = live.initial(0, 2)
    lst, lpb = live.on_send(lst, 1)
    live.on_checkpoint(lst)
    assert lpb.clock == (2, 0)  # the broken variant reads the sender's later state


def test_c1_and_c2_are_decided_before_merging():
    h = HMNR()
    p = c2_cycle()
    r = run_protocol(h, p)
    assert r.forced_messages == ("m1",) and not useless_checkpoints(r.pattern)
    # After merging, C2 would be false (ckpt[i] unchanged, but the forced checkpoint is needed).
    assert useless_checkpoints(run_protocol(HMNRNoC2(), p).pattern)


def test_c1_detects_the_non_causal_z_path():
    p = c1_cycle()
    assert useless_checkpoints(run_protocol("uc", p).pattern)
    r = run_protocol("hmnr", p)
    assert r.forced_messages == ("m2",) and not useless_checkpoints(r.pattern)
    assert useless_checkpoints(run_protocol(HMNRNoC1(), p).pattern)


def test_merge_covers_the_sender():
    h, skip = HMNR(), HMNRMergeSkipSender()
    a = h.initial(0, 3)
    b = h.on_checkpoint(h.initial(1, 3))
    b, pb = h.on_send(b, 0)
    merged = h.on_deliver(a, 1, pb)
    assert merged.ckpt[1] == 2 and merged.taken[1] is False and merged.clock == (2, 2, 0)
    skipped = skip.on_deliver(a, 1, pb)
    assert skipped.ckpt[1] == 0 and skipped.clock == (2, 0, 0)


def test_bcs_rules_and_geq_variant():
    bcs = BCS()
    p1 = bcs.initial(1, 2)
    assert bcs.must_force(p1, 0, 1) and not bcs.must_force(p1, 0, 0)
    assert get_protocol("bcs-geq").must_force(p1, 0, 0)
    r = run_protocol("bcs", c2_cycle())
    assert r.forced_messages == ("m1",) and r.final_states[1].lc == 1


def test_uc_never_forces():
    r = run_protocol(UC(), c1_cycle())
    assert r.forced_checkpoints == 0 and r.pattern == c1_cycle()


def test_run_protocol_marks_forced_and_keeps_basic():
    b = PatternBuilder(2)
    b.checkpoint(1, forced=True)  # an input checkpoint is basic whatever its flag says
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    p = b.build()
    r = run_protocol("hmnr", p)
    assert r.basic_checkpoints == 2 and r.forced_checkpoints == 1
    assert [e.forced for e in r.pattern.events if e.kind == "checkpoint"] == [False, False, True]
    assert len(strip_forced(r.pattern)) == len(p)
    assert set(r.piggybacks) == {"m0", "m1"}


def test_every_variant_runs_and_unknown_names_are_rejected():
    p = c1_cycle()
    for name in PROTOCOLS + VARIANTS:
        assert run_protocol(name, p).protocol == name
    with pytest.raises(InvalidInputError, match="unknown protocol 'bogus'"):
        get_protocol("bogus")
    with pytest.raises(InvalidInputError):
        run_protocol(object(), p)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        HMNR().initial(3, 3)


def test_basic_timer_restarts_after_any_checkpoint():
    t = BasicTimer(5)
    assert not t.due(4) and t.due(5)
    t = t.restart(3)
    assert t.deadline == 8
    assert count_schedule(["send"] * 12, 4) == [4, 8]
    assert count_schedule(["send"] * 12, 4, forced_at=[3]) == [7, 11]
    with pytest.raises(InvalidInputError):
        BasicTimer(0)
    with pytest.raises(InvalidInputError):
        count_schedule([], 0)


def test_aligned_snapshot_blocks_until_all_markers():
    cl = AlignedSnapshot()
    src = cl.initial("src", [], ["a"])
    src, acts = cl.start(src, 1)
    assert [a.kind for a in acts] == ["checkpoint", "forward", "complete"]
    op = cl.initial("join", ["a", "b", "c"], ["out"])
    op, acts = cl.on_marker(op, "a", 1)
    assert acts == () and cl.blocked_inputs(op) == {"a"} and not cl.records(op, "b")
    op, acts = cl.on_marker(op, "c", 1)
    assert acts == () and cl.is_blocked(op, "c") and not cl.is_blocked(op, "b")
    op, acts = cl.on_marker(op, "b", 1)
    assert [a.kind for a in acts] == ["checkpoint", "forward", "complete"]
    assert cl.blocked_inputs(op) == frozenset() and op.snapshot == 1
    op, acts = cl.on_marker(op, "a", 2)  # the next snapshot starts cleanly
    assert cl.is_blocked(op, "a")


def test_unaligned_snapshot_records_in_flight_messages():
    cl = UnalignedSnapshot()
    op = cl.initial("join", ["a", "b"], ["out"])
    assert not cl.records(op, "a")
    op, acts = cl.on_marker(op, "b", 1)
    assert [a.kind for a in acts] == ["checkpoint", "forward"]
    assert cl.records(op, "a") and not cl.records(op, "b") and not cl.is_blocked(op, "b")
    op, acts = cl.on_marker(op, "a", 1)
    assert [a.kind for a in acts] == ["complete"] and not cl.records(op, "a")


def test_snapshot_preconditions():
    cl = get_snapshot_protocol("cl-aligned")
    op = cl.initial("x", ["a", "b"], [])
    with pytest.raises(InvalidInputError, match="unknown input"):
        cl.on_marker(op, "z", 1)
    op, _ = cl.on_marker(op, "a", 1)
    with pytest.raises(InvalidInputError, match="second marker"):
        cl.on_marker(op, "a", 1)
    with pytest.raises(InvalidInputError, match="in progress"):
        cl.on_marker(op, "b", 2)
    with pytest.raises(InvalidInputError, match="snapshots start at sources"):
        cl.start(op, 3)
    with pytest.raises(InvalidInputError):
        get_snapshot_protocol("cl-nope")
    nb = AlignedNoBlock()
    op = nb.initial("x", ["a", "b"], [])
    op, _ = nb.on_marker(op, "a", 1)
    assert not nb.is_blocked(op, "a")
