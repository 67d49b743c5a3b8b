"""The "faults" row of the fuzz/fault harness (:mod:`rollcheck.testing.faults`), quick scenarios.

Runs what ``make test`` and ``verify --quick`` run (about 15 s; the disk-full scenarios need root
and are reported as not run otherwise, which makes the row inconclusive, never a pass), and shows
that the harness catches the broken launcher rollcheck used before (children in a new session,
nothing else): its children outlive a SIGKILLed parent (about 10 s, the contract's grace).
"""

from __future__ import annotations

from rollcheck.testing.faults import PARENT_PLAIN, can_mount, children_die, faults_row


def test_the_quick_faults_row_passes():
    row = faults_row(quick=True, seed=0)
    assert row.method == "faults" and row.count >= 2
    if can_mount():
        assert row.status == "pass", row.detail
    else:
        assert row.status == "inconclusive" and "needs root" in row.detail, row.detail


def test_the_harness_catches_children_that_outlive_their_parent(tmp_path):
    problem = children_die(tmp_path, PARENT_PLAIN)
    assert problem is not None and "outlived a SIGKILLed parent" in problem
