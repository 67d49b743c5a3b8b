"""One checker in fact: ``rollcheck check trace`` on a built-in engine's trace is that engine's replay.

For every trace rollcheck ships (``examples/*.jsonl``, ``tests/data/**/*.jsonl``) or records here
(the message-passing job in-process, a Spark trace in the header written before the prefix rule)
whose header names a built-in engine, and for every tamper of the engines' tamper modules applied
to it (through ``rollcheck spark tamper`` / ``rollcheck flink tamper``), ``check trace --json``
and ``spark replay --json`` / ``flink replay --json`` give the same checks (names and ``ok``),
the same verdict, the same first offending seq and the same exit code; in text too. Traces of any
other engine list the checks the command line did not enable as not applicable, with the option.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.cli.check_trace import ENGINES, engine_of
from rollcheck.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted({*ROOT.glob("examples/*.jsonl"), *ROOT.glob("tests/**/*.jsonl")})


def _header(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.loads(fh.readline())


ENGINE_TRACES = {str(p.relative_to(ROOT)): p for p in SHIPPED if engine_of(_header(p)) is not None}
RECORDED = ["recorded/nhop-uc", "recorded/nhop-bcs", "recorded/nhop-hmnr", "recorded/spark-before-prefix-rule",
            "recorded/flink-cut", "recorded/spark-cut"]


def _tampers(engine: str) -> list[str]:
    if engine == "spark":
        from rollcheck.spark_replay.tamper import TAMPERS
    else:
        from rollcheck.flink_replay.checks.tamper import TAMPERS
    return sorted(TAMPERS)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Path]:
    """Traces recorded for this module: the message-passing job of each protocol (no JVM), the
    shipped Spark word count rewritten in the header and kinds of before the prefix rule, and a
    Flink and a Spark recording cut short (a killed recorder)."""
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop

    d = tmp_path_factory.mktemp("recorded")
    out: dict[str, Path] = {}
    for k, proto in enumerate(("uc", "bcs", "hmnr")):
        p = d / f"nhop-{proto}.jsonl"
        record_nhop(NhopConfig(protocol=proto, processes=3, rounds=5, seed=k + 1, fail_process=1, fail_round=3),
                    p, engine="local")
        out[f"recorded/nhop-{proto}"] = p
    lines = (ROOT / "examples" / "spark-wordcount-kill.jsonl").read_text(encoding="utf-8").splitlines()
    head = {k: v for k, v in json.loads(lines[0]).items() if k not in ("job", "processes")}
    old = [json.dumps(head | {"source": "spark-wordcount"})]
    for x in lines[1:]:
        e = json.loads(x)
        e["kind"] = e["kind"].removeprefix("spark.")
        if e["kind"] == "failure":
            e.pop("processes", None)
        old.append(json.dumps(e))
    p = d / "spark-before-prefix-rule.jsonl"
    p.write_text("\n".join(old) + "\n", encoding="utf-8")
    out["recorded/spark-before-prefix-rule"] = p
    # recordings killed mid-run: the first two thirds, the last line cut in the middle
    for name, src in (("flink-cut", "flink-aligned-task-failure.jsonl"), ("spark-cut", "spark-wordcount-kill.jsonl")):
        text = (ROOT / "examples" / src).read_text(encoding="utf-8")
        p = d / f"{name}.jsonl"
        p.write_text(text[: 2 * len(text) // 3], encoding="utf-8")
        out[f"recorded/{name}"] = p
    return out


def _path(name: str, recorded: dict[str, Path]) -> Path:
    return recorded[name] if name in recorded else ENGINE_TRACES[name]


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    rc = main(argv)
    return rc, capsys.readouterr().out


def _both(capsys, path: Path) -> tuple[int, dict, int, dict]:
    engine = engine_of(_header(path))
    assert engine is not None
    rc_c, out_c = _run(capsys, ["check", "trace", str(path), "--no-tlc", "--json"])
    rc_r, out_r = _run(capsys, [engine, "replay", str(path), "--no-tlc", "--json"])
    return rc_c, json.loads(out_c), rc_r, json.loads(out_r)


def _same(capsys, path: Path) -> tuple[int, dict]:
    """Assert that check trace and the engine's replay agree on ``path`` (JSON and text)."""
    rc_c, doc_c, rc_r, doc_r = _both(capsys, path)
    assert {"conformant", "truncated", "first_offending_seq", "checks"} <= set(doc_c)
    assert [(c["name"], c["ok"]) for c in doc_c["checks"]] == [(c["name"], c["ok"]) for c in doc_r["checks"]]
    assert (doc_c["conformant"], doc_c["first_offending_seq"], rc_c) == \
        (doc_r["conformant"], doc_r["first_offending_seq"], rc_r)
    engine = engine_of(_header(path))
    rc_ct, text_c = _run(capsys, ["check", "trace", str(path), "--no-tlc"])
    rc_rt, text_r = _run(capsys, [engine, "replay", str(path), "--no-tlc"])
    assert rc_ct == rc_rt == rc_c
    first, *rest = text_c.splitlines()
    assert f"checked by {engine}'s own replay" in first and rest == text_r.splitlines()
    return rc_c, doc_c


def test_every_recorder_source_is_a_built_in_engine():
    """The header sources the built-in recorders write (and wrote before the prefix rule)."""
    import inspect

    from rollcheck.flink_replay.recording import record
    from rollcheck.spark_replay.jobs import nhop, wordcount
    from rollcheck.spark_replay.query import record as query

    for mod, src in ((record, '"source": "flink"'), (nhop, '"source": "spark-nhop"'),
                     (query, '"source": "spark"'), (wordcount, '"source": "spark"')):
        assert src in inspect.getsource(mod), (mod.__name__, src)
    assert set(ENGINES) == {"spark", "spark-wordcount", "spark-query", "spark-nhop", "flink"}
    assert {engine_of(_header(p)) for p in ENGINE_TRACES.values()} == {"spark", "flink"}
    assert len(ENGINE_TRACES) >= 10


@pytest.mark.parametrize("name", [*ENGINE_TRACES, *RECORDED])
def test_check_trace_is_the_engines_replay(capsys, recorded, name):
    rc, doc = _same(capsys, _path(name, recorded))
    assert rc in (0, 1, 3)
    assert len(doc["checks"]) > 4  # the engine's own checks, not the generic ones alone


CASES = [(name, how) for name in [*ENGINE_TRACES, *RECORDED]
         for how in _tampers("flink" if "flink" in name else "spark")]


@pytest.mark.parametrize("name,how", CASES, ids=[f"{n}-{h}" for n, h in CASES])
def test_every_tamper_gets_the_same_verdict(capsys, recorded, tmp_path, name, how):
    src = _path(name, recorded)
    engine = engine_of(_header(src))
    out = tmp_path / "tampered.jsonl"
    rc = main([engine, "tamper", str(src), "--how", how, "-o", str(out)])
    err = capsys.readouterr().err
    if rc == 2:  # the trace lacks what this tamper changes (e.g. no keyed restore): named, exit 2
        assert "error" in err and not out.exists()
        pytest.skip(f"{how} does not apply to {name}: {err.strip()}")
    assert rc == 0
    rc_c, _doc = _same(capsys, out)
    assert rc_c in (1, 3), f"{how} on {name} went unnoticed"


def test_every_tamper_applies_to_some_trace(capsys, recorded, tmp_path):
    """No tamper is skipped everywhere above: each breaks at least one shipped or recorded trace."""
    traces = {**ENGINE_TRACES, **recorded}
    for engine in ("spark", "flink"):
        names = [n for n, p in traces.items() if engine_of(_header(p)) == engine]
        for how in _tampers(engine):
            out = tmp_path / f"{engine}-{how}.jsonl"
            found = any(main([engine, "tamper", str(traces[n]), "--how", how, "-o", str(out)]) == 0 for n in names)
            capsys.readouterr()
            assert found, (engine, how)


def _rewrite(src: Path, dst: Path, keep) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()
    events = [json.loads(x) for x in lines[1:] if x.strip()]
    kept = [e for e in events if keep(e)]
    dst.write_text("\n".join([lines[0], *(json.dumps({**e, "seq": k}) for k, e in enumerate(kept, 1))]) + "\n",
                   encoding="utf-8")
    return dst


def test_flink_duplicated_committed_row_is_not_conformant(capsys, tmp_path):
    """The issue's case: a committed row of a user's job twice; check trace said conformant, exit 0."""
    out = tmp_path / "dup.jsonl"
    assert main(["flink", "tamper", str(ROOT / "examples" / "flink-job-rescale-2-1.jsonl"), "--how", "duplicate-row",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    rc, doc = _same(capsys, out)
    assert rc == 1 and doc["conformant"] is False
    assert "output-exactly-once" in {c["name"] for c in doc["checks"] if c["ok"] is False}


def test_flink_trace_without_sink_outputs_is_inconclusive(capsys, tmp_path):
    """Every sink output removed: flink replay is inconclusive; check trace said conformant."""
    src = ROOT / "examples" / "flink-aligned-task-failure.jsonl"
    out = _rewrite(src, tmp_path / "nosink.jsonl", lambda e: e["kind"] != "flink.sink_output")
    rc, doc = _same(capsys, out)
    assert rc == 3 and doc["conformant"] is None


def test_check_trace_refuses_options_the_engine_replay_does_not_take(capsys):
    src = str(ROOT / "examples" / "flink-aligned-task-failure.jsonl")
    for extra in (["--protocol", "hmnr"], ["--reference", str(ROOT / "examples" / "trace-hmnr-3p.reference.json")],
                  ["--no-virtual"]):
        rc = main(["check", "trace", src, "--no-tlc", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and extra[0] in err and "flink replay" in err, err


# -- any other engine: what the command line did not enable is listed, with its option ------------

def _core_trace(tmp_path: Path, header_protocol: str | None = None, outputs: bool = True) -> Path:
    h = {"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"]}
    if header_protocol:
        h["protocol"] = header_protocol
    evs = [{"kind": "send", "process": "a", "message": "m", "to": "b"},
           {"kind": "deliver", "process": "b", "message": "m"},
           {"kind": "checkpoint", "process": "b", "index": 1, "forced": False}]
    if outputs:
        evs.append({"kind": "output", "process": "b", "key": "k", "value": 1})
    evs.append({"kind": "end"})
    p = tmp_path / "core.jsonl"
    p.write_text("\n".join([json.dumps(h), *(json.dumps({**e, "seq": k}) for k, e in enumerate(evs, 1))]) + "\n")
    return p


def _na(doc: dict) -> dict[str, str]:
    return {c["name"]: c.get("enabled_by") for c in doc["checks"] if c["status"] == "not-applicable"
            and c.get("enabled_by")}


def test_other_engines_list_what_the_command_line_did_not_enable(capsys, tmp_path):
    p = str(_core_trace(tmp_path))
    rc = main(["check", "trace", p, "--no-tlc", "--json"])
    got = capsys.readouterr()
    doc = json.loads(got.out)
    # nothing substantive was enabled: inconclusive, and the message says what would enable it
    assert rc == 3 and _na(doc) == {"forced-checkpoints": "--protocol", "no-useless-checkpoints": "--protocol",
                                    "outputs-exactly-once": "--reference", "tlc-trace": "--tlc"}
    assert "not enabled: forced-checkpoints (--protocol)" in got.err
    names = [c["name"] for c in doc["checks"]]
    assert names.index("forced-checkpoints") == 1 and names[-1] == "tlc-trace"
    rc, text = _run(capsys, ["check", "trace", p, "--no-tlc"])
    assert rc == 3 and "n/a  forced-checkpoints:" in text and "--protocol" in text and "--reference OUTPUTS.json" in text
    # enabled: nothing of it is listed as not applicable any more
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps([{"process": "b", "key": "k", "value": 1}]))
    rc, out = _run(capsys, ["check", "trace", p, "--no-tlc", "--protocol", "hmnr", "--reference", str(ref), "--json"])
    doc = json.loads(out)
    assert rc == 0 and _na(doc) == {"tlc-trace": "--tlc"}
    assert {"forced-checkpoints": True, "outputs-exactly-once": True}.items() <= \
        {c["name"]: c["ok"] for c in doc["checks"]}.items()


def test_header_protocol_and_no_outputs_call_for_nothing_more(capsys, tmp_path):
    p = str(_core_trace(tmp_path, header_protocol="hmnr", outputs=False))
    rc, out = _run(capsys, ["check", "trace", p, "--no-tlc", "--json"])
    doc = json.loads(out)
    assert rc == 0 and _na(doc) == {"tlc-trace": "--tlc"}
    assert "forced-checkpoints" in {c["name"] for c in doc["checks"] if c["ok"] is True}


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.parametrize("name", ["examples/flink-aligned-task-failure.jsonl", "recorded/nhop-hmnr"])
def test_with_tlc_too(capsys, recorded, name):
    """TLC on (the replays' default, and check trace's): the engine's TLC check in both."""
    path = _path(name, recorded)
    engine = engine_of(_header(path))
    rc_c = main(["check", "trace", str(path), "--json"])
    doc_c = json.loads(capsys.readouterr().out)
    rc_r = main([engine, "replay", str(path), "--json"])
    doc_r = json.loads(capsys.readouterr().out)
    pairs = [(c["name"], c["ok"]) for c in doc_c["checks"]]
    assert pairs == [(c["name"], c["ok"]) for c in doc_r["checks"]] and rc_c == rc_r == 0
    assert any("tlc" in n and ok is True for n, ok in pairs), pairs


def test_tlc_off_above_the_automatic_limit_names_its_option(capsys, monkeypatch):
    """A protocol with a TLA+ model but a trace above the automatic limit: tlc-trace is n/a, --tlc."""
    import rollcheck.cli.check_trace as ct

    monkeypatch.setattr(ct, "TLC_AUTO_MAX_EVENTS", 3)
    rc = main(["check", "trace", str(ROOT / "examples" / "trace-hmnr-3p.jsonl"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and _na(doc) == {"tlc-trace": "--tlc", "outputs-exactly-once": "--reference"}


def test_the_replays_and_check_trace_call_one_function(capsys, monkeypatch, recorded):
    """``spark replay``, ``flink replay`` (word count and a user's job) and ``check trace`` on their
    traces all go through :func:`rollcheck.cli.engine_replay.replay_engine_trace` (they cannot
    drift apart): each command calls it exactly once, naming the engine."""
    import rollcheck.cli.engine_replay as er

    calls: list[tuple[str, str | None]] = []
    real = er.replay_engine_trace

    def spy(path, **kw):
        calls.append((Path(path).name, kw.get("engine")))
        return real(path, **kw)

    monkeypatch.setattr(er, "replay_engine_trace", spy)
    for name, engine in (("examples/spark-wordcount-kill.jsonl", "spark"), ("recorded/nhop-uc", "spark"),
                         ("examples/flink-aligned-task-failure.jsonl", "flink"),
                         ("examples/flink-job-rescale-2-1.jsonl", "flink")):
        path = _path(name, recorded)
        for argv in ([engine, "replay", str(path), "--no-tlc", "--json"], ["check", "trace", str(path), "--no-tlc", "--json"]):
            calls.clear()
            main(argv)
            capsys.readouterr()
            assert calls == [(path.name, engine)], (argv, calls)


def test_flink_tamper_keeps_the_cut_line_of_a_cut_recording(capsys, recorded, tmp_path):
    """A recording cut mid-line is tampered like a whole one (its cut line was a malformed-JSON
    refusal, exit 2); the copy keeps the cut line last, so it is truncated where the source is."""
    src = recorded["recorded/flink-cut"]
    out = tmp_path / "t.jsonl"
    assert main(["flink", "tamper", str(src), "--how", "drop-failure", "-o", str(out)]) == 0
    capsys.readouterr()
    cut = src.read_text(encoding="utf-8").rsplit("\n", 1)[1]
    assert cut and out.read_text(encoding="utf-8").endswith("\n" + cut)
    rc, doc = _same(capsys, out)
    assert rc == 3 and doc["truncated"] is True
