"""``rollcheck elastic simulate|sweep``: JSON output, exit codes, bad input, counterexample replay."""

from __future__ import annotations

import json

from rollcheck.cli.main import main
from rollcheck.properties.mutants_elastic import BROKEN_RULES, WITNESSES
from rollcheck.pyimpl.elastic import config_to_dict, simulate


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_simulate_json_with_scaling_and_failure(capsys, tmp_path):
    cfg_path = tmp_path / "c.json"
    rc, out, err = _run(capsys, "elastic", "simulate", "--ops", "affine,sum", "--parallelism", "1,2",
                        "--scale", "4:2:3", "--fail", "60:2:1", "--seed", "3", "--json",
                        "--write-config", str(cfg_path))
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["seed"] == 3 and "seed=3" in err
    assert doc["checks"] == {"failure_free_matches_reference": True, "exactly_once": True,
                             "queues_within_bound": True, "trim_safe": True}
    assert doc["with_failure"]["recoveries"][0]["task"].startswith("sum@")
    # the written document replays to the same result
    rc2, out2, _ = _run(capsys, "elastic", "simulate", str(cfg_path), "--json")
    assert rc2 == 0 and json.loads(out2)["with_failure"] == doc["with_failure"]


def test_parallel_recovery_flag(capsys):
    rc, out, _ = _run(capsys, "elastic", "simulate", "--keys", "4", "--fail", "70:2:0:2", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["config"]["failure"]["parallel"] == 2
    assert len(doc["with_failure"]["recoveries"][0]["recovered_by"]) == 2
    rc, _, err = _run(capsys, "elastic", "simulate", "--fail", "70:2:0:0")
    assert rc == 2 and "failure.parallel" in err


def test_failure_beyond_the_run_is_inconclusive(capsys):
    rc, out, _ = _run(capsys, "elastic", "simulate", "--fail", "999999:1:0", "--json")
    assert rc == 3 and json.loads(out)["inconclusive"] is True


def test_simulate_bad_input_exit_2(capsys, tmp_path):
    rc, _, err = _run(capsys, "elastic", "simulate", "--ops", "sum,nope")
    assert rc == 2 and "ops[1]" in err and "Traceback" not in err
    rc, _, err = _run(capsys, "elastic", "simulate", "--fail", "1:2")
    assert rc == 2 and "--fail" in err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "rollcheck.elastic/1", "ops": ["sum"], "keys": 2,
                               "failure": {"step": 3, "op": 1, "key": 7}}))
    rc, _, err = _run(capsys, "elastic", "simulate", str(bad))
    assert rc == 2 and "bad.json" in err and "failure.key" in err
    rc, _, _ = _run(capsys, "elastic")
    assert rc == 2


def test_counterexample_document_of_a_mutant_replays(capsys, tmp_path):
    cfg, failure = WITNESSES["elastic-l1-before-checkpoint"]
    assert simulate(cfg, failure=failure,
                    rules=BROKEN_RULES["elastic-l1-before-checkpoint"]).output_by_key() != {}
    path = tmp_path / "cex.json"
    path.write_text(json.dumps(config_to_dict(cfg, failure)))
    rc, out, _ = _run(capsys, "elastic", "simulate", str(path), "--json")
    assert rc == 0 and json.loads(out)["checks"]["exactly_once"] is True
    rc, out, _ = _run(capsys, "elastic", "simulate", str(path), "--json", "--mutant", "elastic-l1-before-checkpoint")
    doc = json.loads(out)
    assert rc == 1 and doc["rules"] == "elastic-l1-before-checkpoint"
    assert doc["checks"]["exactly_once"] is False and doc["checks"]["trim_safe"] is False
    rc, _, err = _run(capsys, "elastic", "simulate", str(path), "--mutant", "nope")
    assert rc == 2 and "--mutant" in err


def test_sweep_exactly_once_and_inconclusive(capsys):
    rc, out, _ = _run(capsys, "elastic", "sweep", "--seed", "2", "--configs", "1", "--stride", "3", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["exactly_once"] and doc["runs"] > 10
    rc, _, err = _run(capsys, "elastic", "sweep", "--configs", "0")
    assert rc == 3 and "inconclusive" in err


def _retention_by_loop(a: int, c: int, successor: str) -> int:
    """retention_rounds by its definition: the worst event over one period lcm(A, C) of rounds."""
    import math

    def ceil_to(x: int, m: int) -> int:
        return -(-x // m) * m

    if successor == "sink":
        return a + 1
    worst = 0
    for r in range(1, a * c // math.gcd(a, c) + 1):
        ready = r + 2 if successor == "stateless" else max(r + 2, ceil_to(r + 1, c))
        worst = max(worst, ceil_to(ready, a) - r + 1)
    return worst


def test_retention_rounds_closed_form_matches_the_period_loop():
    """The closed form (instant for intervals of 10^9) equals the loop over lcm(A, C)."""
    from rollcheck.pyimpl.elastic import retention_rounds

    for a in range(1, 31):
        for c in range(1, 31):
            for succ in ("sink", "stateless", "stateful"):
                assert retention_rounds(a, c, succ) == _retention_by_loop(a, c, succ), (a, c, succ)
    assert retention_rounds(10**9, 10**9 - 1, "stateful") == 2 * 10**9 - 1
