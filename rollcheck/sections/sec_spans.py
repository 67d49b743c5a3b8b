"""``rollcheck verify`` section: Falkirk Wheel spans (``docs/spans.md``, ``specs/spans.md``).

Rows: the contract example of ``rollcheck spans``; the Hypothesis properties (constraints hold,
greatest by brute force and by Z3, every evaluation order agrees, low watermark, end to end);
the kept non-monotone-φ instance; exhaustive end-to-end failure sweeps of the five example
dataflows (every processor failed at several points, exactly once against the failure-free run);
the worklist against whole-graph rounds on a domino chain; the command path (a document compiled
straight into flat tables, bulk worklist) against the reference solver on seeded generated systems;
a dataflow description expanded, solved and checked against its expected recovery work. Quick runs
also run the span mutants here (the full run's mutation section covers them).
"""

from __future__ import annotations

import functools
import time

from rollcheck.sections._words import mapping_words
from rollcheck.suite import Row, VerifyContext

TITLE = "Falkirk Wheel spans: consistent rollback, low watermark, end-to-end exactly once"
ALGO = "spans (Falkirk Wheel)"


def _contract_row() -> Row:
    from rollcheck.pyimpl.spans import solve, system_from_dict

    t0 = time.perf_counter()
    doc = {"format": "rollcheck.spans/1",
           "processors": {"p": {"chain": [[], ["e1:1"], ["e1:1", "e1:2"]], "top": ["e1:1", "e1:2", "e1:3"]},
                          "q": {"chain": [[], ["e2:1"]]}},
           "edges": [{"name": "e2", "src": "p", "dst": "q", "discarded": [[], ["e2:1"], ["e2:1", "e2:2"]],
                      "discarded_top": ["e2:1", "e2:2", "e2:3"], "processed": ["e2:1", "e2:2"],
                      "phi": [[], ["e2:1"], ["e2:1", "e2:2"]]}]}
    got = solve(system_from_dict(doc))
    ok = got == {"p": 1, "q": 1}
    return Row(ALGO, "pyimpl", "contract example of the rollcheck.spans/1 format", "pass" if ok else "fail", 1,
               "systems", time.perf_counter() - t0, f"spans {mapping_words(got)}")


def _property_rows() -> list[Row]:
    import rollcheck.properties.spans_props  # noqa: F401
    from rollcheck.properties.registry import PROPERTIES, run_property

    rows = []
    for name in sorted(n for n, p in PROPERTIES.items() if p.area == "spans"):
        res = run_property(name)
        method = "Z3" if name.endswith("z3") else "Hypothesis"
        detail = "; ".join(x for x in (res.error or "", res.coverage_text()) if x)
        rows.append(Row(ALGO, method, f"{name} ({res.theorem})", res.status, res.examples, "examples",
                        res.seconds, detail))
    return rows


def _non_monotone_row() -> Row:
    from rollcheck.properties.spans_props import brute_force
    from rollcheck.pyimpl.spans import solve_literal, system_from_dict

    t0 = time.perf_counter()
    doc = {"format": "rollcheck.spans/1",
           "processors": {"bridge": {"chain": [[], [0], [0, 1]]},
                          "count": {"chain": [[], [["c", 1], ["c", 2], ["c", 3]]],
                                    "top": [["c", 1], ["c", 2], ["c", 3], ["c", 4]]}},
           "edges": [{"name": "c", "src": "bridge", "dst": "count", "discarded": [[], [], []],
                      "processed": [["c", 1], ["c", 2], ["c", 3], ["c", 4]],
                      "phi": [[], [["c", 1], ["c", 2], ["c", 3]], [["c", 1]]]}]}
    s = system_from_dict(doc, phi="keep")
    lit = solve_literal(s)
    feas = brute_force(s)
    broken = any(any(f[n] > lit[n] for n in lit) for f in feas)
    return Row(ALGO, "pyimpl", "non-monotone φ (per-epoch bridge) breaks maximality", "pass" if broken else "fail",
               len(feas), "assignments", time.perf_counter() - t0,
               f"fixed point {mapping_words(lit)}, yet bridge 1 and count 1 is feasible; normalising φ restores it")


def _e2e_row(ctx: VerifyContext) -> Row:
    from rollcheck.pyimpl.spans.executor import EXAMPLES, Run, failure_sweep, run_to_end

    seeds = range(ctx.seed, ctx.seed + (2 if ctx.quick else 8))
    points = 4 if ctx.quick else 10
    t0 = time.perf_counter()
    runs, bad, rolled, detail = 0, 0, 0, ""
    for name, make in EXAMPLES.items():
        for seed in seeds:
            n = run_to_end(Run.start(make(seed), seed)).steps
            # = failure_experiment for every point and processor, sharing the failure-free run and
            # the recorded run up to each point (tests/test_spans.py checks the two agree)
            for fail_at, failed, out in failure_sweep(functools.partial(make, seed), seed,
                                                      [i * n // points for i in range(points)],
                                                      [{p} for p in make(seed).ops],
                                                      track_watermark=not ctx.quick):
                runs += 1
                rolled += sum(v != "top" for v in out.levels.values()) > 1
                if not out.ok:
                    bad += 1
                    detail = detail or f"{name} seed {seed} fail {min(failed)} at {fail_at}: {out.detail}"
    ctx.log(f"  spans: {runs} end-to-end failure runs (seeds {seeds.start}..{seeds.stop - 1})")
    return Row(ALGO, "pyimpl", f"five example dataflows, every processor failed at {points} points: "
               "exactly once vs failure-free", "fail" if bad else "pass", runs, "failure runs",
               time.perf_counter() - t0, detail or f"{rolled} runs rolled back more than the failed processor")


def _command_path_row(ctx: VerifyContext) -> Row:
    """Flat tables from the document = the reference solver (spans and watermark), seeded systems."""
    import json

    from rollcheck.pyimpl.spans import low_watermark, solve, system_from_dict, system_to_dict
    from rollcheck.pyimpl.spans.builder import random_epoch_document
    from rollcheck.pyimpl.spans.frontier import random_seq_system
    from rollcheck.pyimpl.spans.tables import compile_document, solve_tables, watermark_tables

    t0 = time.perf_counter()
    n = 40 if ctx.profile == "ci" else 200
    checked = 0
    for seed in range(ctx.seed, ctx.seed + n):
        seq = random_seq_system(40, cyclic=seed % 2 == 0, seed=seed, K=3, failed=0.2)
        for doc in (random_epoch_document(seed, 2 + seed % 11, seed % 31),
                    json.loads(json.dumps(system_to_dict(seq.to_span_system())))):
            s = system_from_dict(doc, semantic=True)
            t = compile_document(doc)
            got, want = solve_tables(t)[0], solve(s)
            if got != want or watermark_tables(t) != low_watermark(s):
                return Row(ALGO, "pyimpl", "command path (flat tables) = reference solver", "fail", checked + 1,
                           "systems", time.perf_counter() - t0,
                           f"seed {seed}: the tables give {mapping_words(got)}, the reference solver "
                           f"{mapping_words(want)}"[:300])
            checked += 1
    return Row(ALGO, "pyimpl", "command path (flat tables from the document) = reference solver, spans and "
               "watermark", "pass", checked, "systems", time.perf_counter() - t0,
               f"seeds {ctx.seed}..{ctx.seed + n - 1}, epoch and sequence-number systems")


DATAFLOW = {
    "format": "rollcheck.dataflow/1",
    "processors": {"source": {"inputs": [0, 1, 2, 3, 4], "checkpoints": {"every": 2}},
                   "agg": {"checkpoints": {"every": 2}}, "sink": {"checkpoints": [1]}},
    "edges": [{"name": "a", "src": "source", "dst": "agg", "logged": True,
               "sent": [[0, 0], [1, 1], [2, 2], [3, 3], [4, 4]], "delivered": 4},
              {"name": "b", "src": "agg", "dst": "sink", "sent": [[0, 0], [1, 1], [2, 2], [3, 3]], "delivered": 3}],
    "failed": ["agg"],
}


def _dataflow_row() -> Row:
    """The worked example of docs/spans.md: spans, replay, discard, watermark, acknowledgements."""
    from rollcheck.pyimpl.spans.description import analyse, description_from_dict

    t0 = time.perf_counter()
    a = analyse(description_from_dict(DATAFLOW))
    ok = (a.spans == {"source": "top", "agg": 1, "sink": 1}
          and a.processors["agg"]["replay"] == {"a": [2, 3, 4]} and a.processors["sink"]["discard"] == [2]
          and a.watermark == {"source": 2, "agg": 1, "sink": 1} and a.acknowledge == {"source": [0, 1, 2, 3]})
    return Row(ALGO, "pyimpl", "dataflow description (rollcheck.dataflow/1) worked example", "pass" if ok else "fail",
               1, "descriptions", time.perf_counter() - t0,
               f"spans {mapping_words(a.spans)}, watermark {mapping_words(a.watermark)}")


def _domino_row() -> Row:
    from rollcheck.pyimpl.spans.fixpoint import domino_chain, run_rounds, run_worklist

    t0 = time.perf_counter()
    c = domino_chain(400)
    w, r = run_worklist(c), run_rounds(c)
    ok = w.levels == r.levels
    return Row(ALGO, "pyimpl", "worklist vs whole-graph rounds on a 400-processor domino chain",
               "pass" if ok else "fail", 2, "runs", time.perf_counter() - t0,
               f"examinations {w.examinations} vs {r.examinations} (x{r.examinations / w.examinations:.0f})")


def run(ctx: VerifyContext) -> list[Row]:
    """Run the Falkirk Wheel spans section: its rows."""
    rows = [_contract_row(), _non_monotone_row(), _domino_row(), _command_path_row(ctx), _dataflow_row()]
    rows += _property_rows()
    rows.append(_e2e_row(ctx))
    # the mutants run once, in the catalogue section (sec_mutants)
    return rows
