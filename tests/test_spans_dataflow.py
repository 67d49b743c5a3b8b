"""The spans front door: ``rollcheck.dataflow/1`` descriptions and the fast ``rollcheck.spans/1`` path.

The worked examples of ``docs/spans.md`` end to end through the command, invalid and impossible
documents (exit 2 naming the JSON path), the ``--emit-system`` round trip, and the command path
(flat tables, bulk worklist) against the reference solver on explicit sets.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.spans import low_watermark, solve, system_from_dict, system_to_dict, tables
from rollcheck.pyimpl.spans.builder import random_epoch_document
from rollcheck.pyimpl.spans.description import analyse, description_from_dict, span_system
from rollcheck.pyimpl.spans.executor import Edge, example, run_to_end
from rollcheck.pyimpl.spans.executor.recording import build_system
from rollcheck.pyimpl.spans.executor.run import Run
from rollcheck.pyimpl.spans.frontier import random_seq_system
from rollcheck.pyimpl.spans.system import validate_schema
from rollcheck.pyimpl.spans.tables import compile_document, solve_tables, watermark_tables

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EPOCHS = json.loads((EXAMPLES / "dataflow-epochs.json").read_text())
LOOP = json.loads((EXAMPLES / "dataflow-loop.json").read_text())
SYSTEM = json.loads((EXAMPLES / "spans-system.json").read_text())


def _subprocess(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rollcheck.cli.main", *args],
                          capture_output=True, text=True, timeout=120)


def _run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def _write(tmp_path: Path, doc: object, name: str = "d.json") -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


# -- the worked examples (their output is quoted in docs/spans.md) ------------------------------

def test_epoch_pipeline_worked_example() -> None:
    r = _subprocess("spans", str(EXAMPLES / "dataflow-epochs.json"), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["spans"] == {"source": "top", "agg": 1, "sink": 1}
    assert out["processors"]["agg"] == {
        "restore": "processors.agg.checkpoints (every 2: epoch 1)", "discard": [2, 3], "reread": [],
        "replay": {"a": [2, 3, 4]}, "resume_epoch": 2}
    assert out["processors"]["sink"] == {"restore": "processors.sink.checkpoints[0]", "discard": [2],
                                         "reread": [], "replay": {}, "resume_epoch": 2}
    assert out["processors"]["source"]["restore"] == "top"
    assert out["watermark"] == {"source": 2, "agg": 1, "sink": 1}
    assert out["acknowledge"] == {"source": [0, 1, 2, 3]}
    assert out["release"] == {"sink": [0, 1]}


def test_loop_worked_example(capsys: pytest.CaptureFixture) -> None:
    rc, out, err = _run(capsys, "spans", str(EXAMPLES / "dataflow-loop.json"), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["spans"] == {"src": "top", "entry": "top", "body": 2, "leave": "top", "out": "top"}
    assert doc["processors"]["body"] == {"restore": "processors.body.checkpoints[1]",
                                         "discard": [[1, 0], [1, 1]], "reread": [],
                                         "replay": {"enter": [[1, 0]]}, "resume_epoch": 1}
    assert doc["watermark"] == {"src": 1, "entry": 1, "body": 2, "leave": 1, "out": 1}


def test_text_output_names_the_work(capsys: pytest.CaptureFixture) -> None:
    rc, out, _ = _run(capsys, "spans", str(EXAMPLES / "dataflow-epochs.json"))
    assert rc == 0
    assert "agg: 1" in out and "replay [2, 3, 4] on a" in out and "acknowledge source: [0, 1, 2, 3]" in out


def test_examples_match_their_schemas() -> None:
    validate_schema(EPOCHS, "dataflow")
    validate_schema(LOOP, "dataflow")
    validate_schema(SYSTEM, "spans")
    validate_schema(system_to_dict(span_system(description_from_dict(LOOP)).system), "spans")


@pytest.mark.parametrize("doc", [EPOCHS, LOOP], ids=["epochs", "loop"])
def test_emit_system_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture, doc: dict) -> None:
    out_path = tmp_path / "sys.json"
    rc, out, err = _run(capsys, "spans", _write(tmp_path, doc), "--json", "--emit-system", str(out_path))
    assert rc == 0, err
    first = json.loads(out)
    emitted = json.loads(out_path.read_text())
    assert emitted["format"] == "rollcheck.spans/1"
    rc, out, err = _run(capsys, "spans", str(out_path), "--json", "--watermark")
    assert rc == 0, err
    second = json.loads(out)
    assert second["spans"] == first["spans"]
    assert second["watermark"] == first["watermark"]
    assert solve(system_from_dict(emitted)) == first["spans"]


def test_spans_system_example(capsys: pytest.CaptureFixture) -> None:
    rc, out, _ = _run(capsys, "spans", str(EXAMPLES / "spans-system.json"), "--json", "--stats")
    assert rc == 0
    assert json.loads(out) == {"spans": {"p": 1, "q": 1},
                               "stats": {"order": "bulk", "examinations": 3, "bulk_steps": 2}}


# -- invalid and impossible descriptions: exit 2 naming the JSON path --------------------------

def _epochs(change) -> dict:  # type: ignore[no-untyped-def]
    d = copy.deepcopy(EPOCHS)
    change(d)
    return d


BAD_DATAFLOW = [
    (lambda d: d["edges"][1]["sent"].__setitem__(0, [7, 0]), "edges[1].sent[0][0]", "no event at that time"),
    (lambda d: d["edges"][0].__setitem__("delivered", 9), "edges[0].delivered", "delivered must be"),
    (lambda d: d["processors"]["sink"].__setitem__("checkpoints", [3]), "processors.sink.checkpoints[0]",
     "has not been processed by sink"),
    (lambda d: d["processors"]["sink"].__setitem__("checkpoints", [1, 0]), "processors.sink.checkpoints[1]",
     "checkpoints must grow"),
    (lambda d: d.__setitem__("failed", ["nobody"]), "failed[0]", "unknown processor"),
    (lambda d: d.__setitem__("failed", ["agg", "agg"]), "failed[1]", "listed twice"),
    (lambda d: d["edges"][0].__setitem__("src", ["source"]), "edges[0].src", "unknown processor"),
    (lambda d: d["edges"][0]["sent"].__setitem__(0, [0, [0, 1]]), "edges[0].sent[0][1]", "must be an epoch"),
    (lambda d: d["edges"][0]["sent"].__setitem__(0, [0, -1]), "edges[0].sent[0][1]", "must be an epoch"),
    (lambda d: d["processors"]["agg"].__setitem__("checkpoints", {"every": 0}),
     "processors.agg.checkpoints.every", "every must be"),
    (lambda d: d["processors"]["agg"].__setitem__("loops", 1), "edges[0].sent[0][1]", "[epoch, c1]"),
    (lambda d: d["edges"][1].__setitem__("name", "a"), "edges[1].name", "duplicate edge name"),
    (lambda d: d["edges"][1].__setitem__("colour", "red"), "edges[1]", "unknown field"),
    (lambda d: d.__setitem__("format", "rollcheck.spans/2"), "format", "format must be"),
]


@pytest.mark.parametrize("change,where,why", BAD_DATAFLOW, ids=[b[1] + ":" + b[2] for b in BAD_DATAFLOW])
def test_bad_description_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, change, where: str,  # type: ignore[no-untyped-def]
                                why: str) -> None:
    path = _write(tmp_path, _epochs(change))
    rc, out, err = _run(capsys, "spans", path, "--json", "--emit-system", str(tmp_path / "never.json"))
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and path in err and where in err and why in err, err
    assert not (tmp_path / "never.json").exists()


def test_a_checkpoint_with_unlogged_messages_in_flight_is_not_restorable() -> None:
    # agg's checkpoint at epoch 2 is pending while b@2 is in flight (b is not logged)
    d = copy.deepcopy(EPOCHS)
    d["processors"]["agg"]["checkpoints"] = [1, 2]
    d["edges"][1]["delivered"] = 2
    d["processors"]["sink"]["checkpoints"] = [1]
    a = analyse(description_from_dict(d))
    assert a.processors["agg"]["pending"] == ["processors.agg.checkpoints[1]"]
    assert a.spans["agg"] == 1


# -- invalid span systems on the fast path --------------------------------------------------------

def _system(change) -> dict:  # type: ignore[no-untyped-def]
    d = copy.deepcopy(SYSTEM)
    change(d)
    return d


BAD_SYSTEM = [
    (lambda d: d["processors"]["p"]["chain"].__setitem__(2, ["e1:2"]), "processors.p.chain[2]",
     "not strictly increasing"),
    (lambda d: d["processors"]["p"]["chain"].__setitem__(2, ["e1:1"]), "processors.p.chain[2]", "equals"),
    (lambda d: d["edges"][0]["phi"].__setitem__(2, ["e2:2"]), "edges[0].phi[2]", "not monotone"),
    (lambda d: d["edges"][0].__setitem__("src", ["p"]), "edges[0].src", "must be a processor name"),
    (lambda d: d["edges"][0]["discarded"].__setitem__(2, ["e2:2"]), "edges[0].discarded[2]", "misses time"),
    (lambda d: d["edges"][0]["discarded"].__setitem__(0, ["e2:1"]), "edges[0].discarded[0]", "must be empty"),
    (lambda d: d["edges"][0].pop("discarded_top"), "edges[0].discarded_top", "required"),
    (lambda d: d["edges"][0]["phi"].pop(), "edges[0].phi", "has 2 entries"),
    (lambda d: d["edges"][0]["phi"][1].__setitem__(0, 1.5), "edges[0].phi[1][0]", "a time must be"),
    (lambda d: d["edges"][0]["phi"][1].__setitem__(0, True), "edges[0].phi[1][0]", "a time must be"),
    (lambda d: d["edges"][0]["processed"].__setitem__(0, None), "edges[0].processed[0]", "a time must be"),
    (lambda d: d["processors"]["p"].__setitem__("top", ["e1:1"]), "processors.p.top", "must contain"),
    (lambda d: d["edges"][0].__setitem__("dst", "r"), "edges[0].dst", "unknown processor"),
]


@pytest.mark.parametrize("change,where,why", BAD_SYSTEM, ids=[b[1] + ":" + b[2] for b in BAD_SYSTEM])
def test_bad_system_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, change, where: str,  # type: ignore[no-untyped-def]
                           why: str) -> None:
    doc = _system(change)
    path = _write(tmp_path, doc)
    rc, out, err = _run(capsys, "spans", path, "--json")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and path in err and where in err and why in err, err
    # the reference path (explicit sets) rejects it too
    rc, _out, err = _run(capsys, "spans", path, "--json", "--order", "fifo")
    assert rc == 2, err


def test_processed_outside_a_live_top_is_impossible(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    doc = copy.deepcopy(SYSTEM)
    doc["processors"]["q"]["top"] = ["e2:1"]
    rc, _out, err = _run(capsys, "spans", _write(tmp_path, doc), "--json")
    assert rc == 2 and "edges[0].processed" in err and "top does not hold" in err


def test_normalise_phi_accepts(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    doc = copy.deepcopy(SYSTEM)
    doc["edges"][0]["phi"][2] = ["e2:2"]
    rc, out, _ = _run(capsys, "spans", _write(tmp_path, doc), "--json", "--normalise-phi")
    assert rc == 0
    assert json.loads(out)["spans"] == solve(system_from_dict(doc, phi="normalise"))


@pytest.mark.parametrize("raw,why", [
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested more than 100 levels deep"),
    (b'{"format": "rollcheck.spans/1",', "malformed JSON"),
    (b"[1, 2]", "format must be one of"),
])
def test_unreadable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, raw: bytes, why: str) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(raw)
    rc, out, err = _run(capsys, "spans", str(p), "--json")
    assert rc == 2 and out == "" and why in err and str(p) in err


def test_nesting_is_bounded_up_front(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A span system nested 500 levels deep parses with ``json.loads`` (so catching a
    RecursionError afterwards would let it through to the recursive validation); both readers of
    the format refuse it before, naming the file; 100 levels are still read."""
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.spans.system import load_system

    for depth, refused in ((500, True), (100, False)):
        p = tmp_path / f"deep{depth}.json"
        p.write_text('{"format": "rollcheck.spans/1", "processors": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}")
        rc, out, err = _run(capsys, "spans", str(p), "--json")
        assert rc == 2 and out == "" and str(p) in err
        assert ("nested more than 100 levels deep" in err) == refused, err
        with pytest.raises(InvalidInputError) as e:
            load_system(p)
        assert ("nested more than 100 levels deep" in str(e.value)) == refused, e.value
        assert str(p) in str(e.value)


def test_lone_surrogate_names_print(tmp_path: Path) -> None:
    text = json.dumps(SYSTEM).replace('"q"', '"\\ud800"')
    p = tmp_path / "s.json"
    p.write_text(text)
    r = _subprocess("spans", str(p))
    assert r.returncode == 0, r.stderr
    assert "\\ud800: 1" in r.stdout
    p.write_text(json.dumps(EPOCHS).replace('"agg"', '"\\udc80"'))
    r = _subprocess("spans", str(p))
    assert r.returncode == 0, r.stderr
    assert "\\udc80: 1  (restore processors.\\udc80.checkpoints" in r.stdout


def test_strict_schema(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    doc = copy.deepcopy(SYSTEM)
    doc["processors"]["p"]["chain"][1] = [{"t": 1}]
    rc, _out, err = _run(capsys, "spans", _write(tmp_path, doc), "--json", "--strict")
    assert rc == 2 and "processors.p.chain[1][0]" in err


# -- the command path equals the reference solver -------------------------------------------------

def _seq_doc(seed: int) -> dict:
    s = random_seq_system(40, cyclic=seed % 2 == 0, seed=seed, K=3, failed=0.2)
    return json.loads(json.dumps(system_to_dict(s.to_span_system())))


SEEDS = range(24)


@pytest.mark.parametrize("seed", SEEDS)
def test_command_path_equals_reference(seed: int) -> None:
    rng = random.Random(seed)
    for doc in (random_epoch_document(seed, rng.randint(2, 12), rng.randint(0, 30)), _seq_doc(seed)):
        s = system_from_dict(doc, semantic=True)
        t = compile_document(doc)
        assert solve_tables(t)[0] == solve(s), f"seed {seed}"
        assert watermark_tables(t) == low_watermark(s), f"seed {seed}"
        assert solve_tables(compile_document(doc, plain=True))[0] == solve(s)


def _c2_need_without_running_max(ranks, phi_ranks, top_b):  # type: ignore[no-untyped-def]
    """A broken C2 table: each receiver level looks only at the times of exactly that rank."""
    best = [0] * (top_b + 1)
    for r, f in zip(ranks, phi_ranks, strict=True):
        if r <= top_b and f > best[r]:
            best[r] = f
    return best


def test_the_comparison_catches_a_broken_c2_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tables, "_c2_need", _c2_need_without_running_max)
    caught = next((seed for seed in range(200)
                   if solve_tables(compile_document(d := random_epoch_document(seed, 8, 20)))[0]
                   != solve(system_from_dict(d))), None)
    assert caught is not None, "the broken C2 table survived 200 seeded systems"


def test_command_path_equals_reference_through_the_cli(tmp_path: Path) -> None:
    doc = random_epoch_document(7, 30, 80)
    r = _subprocess("spans", _write(tmp_path, doc), "--json", "--watermark")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    s = system_from_dict(doc)
    assert out == {"spans": solve(s), "watermark": low_watermark(s)}


# -- a description of a recorded run gives the executor's own span system ------------------------

def _describe(r: Run, failed: set[str]) -> dict:
    """The rollcheck.dataflow/1 description of an executor recording (epoch and loop times)."""
    df = r.df
    procs: dict = {}
    for p, op in df.ops.items():
        loops = 1 if op.domain == "loop" else 0
        inputs = [ev.time for ev in r.history[p] if ev.edge.startswith("in:")]
        cps = []
        for span in r.chain[p][1:]:
            u = {ev.time for ev in r.history[p]} | {m.time for e in df.ins[p] for m in r.sent[e]}
            cps.append({"times": sorted([list(t) if isinstance(t, tuple) else t for t in span.restrict(u)])})
        procs[p] = {"loops": loops, "inputs": inputs, "checkpoints": cps}
    edges = []
    for e in df.edges:
        got = sum(1 for ev in r.history[e.dst] if ev.edge == e.name)

        def js(t):  # type: ignore[no-untyped-def]
            return list(t) if isinstance(t, tuple) else t

        edges.append({"name": e.name, "src": e.src, "dst": e.dst, "logged": e.logged,
                      "sent": [[js(r.cause_time[m.cause][1]), js(m.time)] for m in r.sent[e.name]],
                      "delivered": got})
    return {"format": "rollcheck.dataflow/1", "processors": procs, "edges": edges, "failed": sorted(failed)}


@pytest.mark.parametrize("name,seed,steps,failed", [
    ("epoch", 1, 12, {"sum"}), ("epoch", 2, 20, {"m1", "out"}), ("loop", 1, 9, {"body"}),
    ("loop", 3, 14, {"exit"}), ("selective", 2, 7, {"sum"}),
])
def test_description_of_a_recording_matches_the_executor(name: str, seed: int, steps: int,
                                                         failed: set[str]) -> None:
    df = example(name, seed)
    df.edges = [Edge(e.name, e.src, e.dst, e.logged, e.seq, "recorded") for e in df.edges]
    df.__post_init__()
    r = Run.start(df, seed)
    while r.steps < steps and r.step():
        pass
    ref = build_system(r, failed, phi="reject").system
    desc = description_from_dict(_describe(r, failed))
    mine = span_system(desc).system
    assert solve(mine) == solve(ref)
    assert low_watermark(mine) == low_watermark(ref)
    run_to_end(r)  # the recording stays a valid run


# -- docs/spans.md shows real files and real output ------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "spans.md"


def _blocks() -> list[list[str]]:
    out, cur = [], None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if cur is None:
                cur = []
            else:
                out.append(cur)
                cur = None
        elif cur is not None:
            cur.append(line)
    return out


def test_docs_example_description_is_the_shipped_file(capsys: pytest.CaptureFixture) -> None:
    blocks = [b for b in _blocks() if b and b[0].startswith("{")]
    desc = json.loads("\n".join(blocks[0]))
    assert desc == {k: v for k, v in EPOCHS.items() if k != "comment"}
    rc, out, _ = _run(capsys, "spans", str(EXAMPLES / "dataflow-epochs.json"), "--json")
    assert rc == 0 and json.loads("\n".join(blocks[1])) == json.loads(out)


def test_an_every_k_policy_over_huge_epochs_is_refused_up_front(tmp_path, capsys) -> None:
    """Found by verify's fuzzing: ``every 2`` with an input at epoch 10^12 stood for 5·10^11
    checkpoints and ran for ever; it is refused with the JSON path before any work."""
    doc = {k: v for k, v in EPOCHS.items() if k != "edges"}
    doc["processors"] = json.loads(json.dumps(EPOCHS["processors"]))
    doc["processors"]["source"]["inputs"][0] = 10**12
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    rc, out, err = _run(capsys, "spans", str(path), "--json")
    assert rc == 2 and out == "" and "processors.source.checkpoints" in err and "every 2" in err
