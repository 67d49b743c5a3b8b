"""The fast kernels (python lists, numpy) decide exactly like the state machines."""

from __future__ import annotations

import pytest

from rollcheck.properties.mutants_protocols import random_schedules
from rollcheck.properties.strategies import build_from_actions, topology_channels
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols import run_protocol
from rollcheck.pyimpl.protocols.fast import forced_deliveries


def _big(n, actions, seed):
    import random

    rng = random.Random(seed)
    acts = [(rng.choice((0, 0, 1, 1, 2)), rng.randrange(10**6), 0) for _ in range(actions)]
    return build_from_actions(n, acts, topology_channels("complete", n), False)


@pytest.mark.parametrize("name", ["uc", "bcs", "hmnr"])
def test_small_schedules_agree(name):
    for p in random_schedules(150, seed=3):
        want = run_protocol(name, p).forced_messages
        for backend in ("python", "numpy", "auto"):
            assert forced_deliveries(name, p, backend) == want


@pytest.mark.parametrize("n", [8, 40, 128])
def test_large_schedules_agree(n):
    p = _big(n, 1500, seed=n)
    want = run_protocol("hmnr", p).forced_messages
    assert want, "the schedule should force something"
    assert forced_deliveries("hmnr", p, "python") == want
    assert forced_deliveries("hmnr", p, "numpy") == want
    assert forced_deliveries("bcs", p) == run_protocol("bcs", p).forced_messages


def test_bad_arguments():
    p = random_schedules(1, seed=0)[0]
    with pytest.raises(InvalidInputError):
        forced_deliveries("hmnr", p, "cuda")
    with pytest.raises(InvalidInputError):
        forced_deliveries("hmnr-no-c1", p)
