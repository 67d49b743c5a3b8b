"""Every loader bounds nesting up front: a JSON or JSON Lines input nested 100,000 levels deep is
bad input (exit 2, one line naming the file, and the line of a JSON Lines file), never an internal
``RecursionError`` (exit 4), for every command that reads a JSON or JSONL file a user gives it:
patterns, span systems, elastic configurations, TRT profiles, traces (of every engine and of
before the prefix rule), references, reproducers, tampers' inputs, Spark checkpoint folders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollcheck.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
N = 100_000
DEEP = "[" * N + "]" * N
CORE_HEAD = json.dumps({"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"]})
OLD_HEAD = json.dumps({"format": "rollcheck.trace/1", "config": {"processes": 2}})


def _first_line(name: str) -> str:
    with open(ROOT / "examples" / name, encoding="utf-8") as fh:
        return fh.readline().rstrip("\n")


def _deep_committed_row() -> str:
    """The shipped user's-job trace with its last committed row's text nested too deeply (the
    rows are JSON text inside the trace's strings, parsed by the replay)."""
    lines = (ROOT / "examples" / "flink-job-rescale-2-1.jsonl").read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    for x in lines[1:]:
        e = json.loads(x)
        if e["kind"] == "flink.sink_output" and e["sink"] == "tx":
            e["lines"][-1] = e["lines"][-1].rsplit("\x1f", 1)[0] + "\x1f" + DEEP
        out.append(json.dumps(e))
    return "\n".join(out) + "\n"


#: the files: (name, text, the line of the deep value or None for a JSON document)
FILES = {
    "bare.json": (DEEP, None),
    "pattern.json": ('{"format": "rollcheck.pattern/1", "processes": ' + DEEP + "}", None),
    "spans.json": ('{"format": "rollcheck.spans/1", "processors": ' + DEEP + "}", None),
    "core.jsonl": (CORE_HEAD + "\n" + '{"seq": 1, "kind": "x-note", "v": ' + DEEP + "}\n", 2),
    "core-head.jsonl": ('{"format": "rollcheck.trace/1", "processes": ' + DEEP + "}\n", 1),
    "old.jsonl": (OLD_HEAD + "\n" + '{"seq": 1, "kind": "send", "x": ' + DEEP + "}\n", 2),
    "old-head.jsonl": ('{"format": "rollcheck.trace/1", "config": ' + DEEP + "}\n", 1),
    "flink.jsonl": (_first_line("flink-aligned-task-failure.jsonl") + "\n" + DEEP + "\n", 2),
    "flink-job.jsonl": (_first_line("flink-job-rescale-2-1.jsonl") + "\n" + DEEP + "\n", 2),
    "spark.jsonl": (_first_line("spark-wordcount-kill.jsonl") + "\n" + DEEP + "\n", 2),
    "flink-job-row.jsonl": (_deep_committed_row(), None),
}

TRACE = str(ROOT / "examples" / "trace-hmnr-3p.jsonl")


def _cmd(name: str, file: str, argv: list[str], *marks: Any) -> Any:
    return pytest.param(file, argv, id=name, marks=marks)


#: (id, file, argv: {f} the file, {d} a scratch folder)
COMMANDS = [
    _cmd("validate", "bare.json", ["validate", "{f}"]),
    _cmd("validate-pattern", "pattern.json", ["validate", "{f}"]),
    _cmd("useless", "pattern.json", ["useless", "{f}"]),
    _cmd("zpath", "pattern.json", ["zpath", "{f}", "--from", "P0:1", "--to", "P1:1"]),
    _cmd("recovery-line", "pattern.json", ["recovery-line", "{f}", "--failed", "P0"]),
    _cmd("consistent", "pattern.json", ["consistent", "{f}", "P0:1"]),
    _cmd("render", "pattern.json", ["render", "{f}", "-o", "{d}/x.svg"]),
    _cmd("protocol", "pattern.json", ["protocol", "hmnr", "{f}"]),
    _cmd("check-protocol-schedule", "pattern.json",
         ["check", "protocol", "hmnr", "--schedule", "{f}", "--max-examples", "0", "--budget", "5"]),
    _cmd("check-trace", "core.jsonl", ["check", "trace", "{f}", "--no-tlc"]),
    _cmd("check-trace-header", "core-head.jsonl", ["check", "trace", "{f}", "--no-tlc"]),
    _cmd("check-trace-flink", "flink.jsonl", ["check", "trace", "{f}", "--no-tlc"]),
    _cmd("check-trace-flink-job", "flink-job.jsonl", ["check", "trace", "{f}", "--no-tlc"]),
    _cmd("check-trace-spark", "spark.jsonl", ["check", "trace", "{f}", "--no-tlc"]),
    _cmd("check-trace-reference", "bare.json", ["check", "trace", TRACE, "--no-tlc", "--reference", "{f}"]),
    _cmd("trace-to-pattern", "core.jsonl", ["trace", "to-pattern", "{f}", "-o", "{d}/p.json"]),
    _cmd("trace-validate", "core.jsonl", ["trace", "validate", "{f}"]),
    _cmd("tlc-trace-core", "core.jsonl", ["tlc-trace", "hmnr", "{f}"]),
    _cmd("tlc-trace-old", "old.jsonl", ["tlc-trace", "hmnr", "{f}"]),
    _cmd("tlc-trace-old-header", "old-head.jsonl", ["tlc-trace", "hmnr", "{f}"]),
    _cmd("tlc-trace-pattern", "pattern.json", ["tlc-trace", "hmnr", "{f}"]),
    _cmd("tlc-trace-bare", "bare.json", ["tlc-trace", "hmnr", "{f}"]),
    _cmd("spans", "spans.json", ["spans", "{f}"]),
    _cmd("spans-bare", "bare.json", ["spans", "{f}"]),
    _cmd("elastic", "bare.json", ["elastic", "simulate", "{f}"]),
    _cmd("trt-optimise", "bare.json", ["trt", "optimise", "{f}", "--bound", "10"]),
    _cmd("mutants-replay", "bare.json", ["mutants", "--replay", "{f}"]),
    _cmd("spark-replay", "spark.jsonl", ["spark", "replay", "{f}", "--no-tlc"]),
    _cmd("spark-tamper", "spark.jsonl", ["spark", "tamper", "{f}", "--how", "drop-commit", "-o", "{d}/t.jsonl"]),
    _cmd("flink-replay", "flink.jsonl", ["flink", "replay", "{f}", "--no-tlc"]),
    _cmd("flink-replay-job", "flink-job.jsonl", ["flink", "replay", "{f}", "--no-tlc"]),
    _cmd("flink-replay-job-row", "flink-job-row.jsonl", ["flink", "replay", "{f}", "--no-tlc"]),
    _cmd("check-trace-flink-job-row", "flink-job-row.jsonl", ["check", "trace", "{f}", "--no-tlc"]),
    _cmd("flink-tamper", "flink.jsonl", ["flink", "tamper", "{f}", "--how", "drop-failure", "-o", "{d}/t.jsonl"]),
]


@pytest.mark.parametrize("file,argv", COMMANDS)
def test_deep_input_is_bad_input_naming_the_file(capsys, tmp_path, file, argv):
    text, line = FILES[file]
    f = tmp_path / file
    f.write_text(text, encoding="utf-8")
    rc = main([a.format(f=f, d=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert "RecursionError" not in err and "internal error" not in err, err[-300:]
    assert rc == 2, (rc, err[-300:])
    msg = [ln for ln in err.splitlines() if ": error:" in ln]
    assert len(msg) == 1 and str(f) in msg[0], err[-300:]
    assert "nested" in msg[0], msg[0]
    if line is not None:
        assert f"line {line}" in msg[0], msg[0]


def test_spark_checkpoint_folder_with_a_deep_file_is_a_named_problem(capsys, tmp_path):
    """A checkpoint folder's files are the engine's, not a document the user wrote: one nested too
    deeply is a problem of that checkpoint (exit 1, the file named), not exit 4."""
    for sub, where in (("metadata", "metadata"), ("offsets/0", "offsets/0")):
        ck = tmp_path / sub.replace("/", "-")
        (ck / "offsets").mkdir(parents=True)
        (ck / "commits").mkdir()
        (ck / "metadata").write_text('{"id": "q"}\n')
        (ck / sub).write_text(("v1\n" if sub != "metadata" else "") + DEEP + "\n")
        rc = main(["spark", "checkpoint", str(ck), "--no-spark", "--json"])
        out = capsys.readouterr()
        assert rc == 1 and "internal error" not in out.err, out.err[-300:]
        assert any(p.startswith(where) for p in json.loads(out.out)["problems"])


@pytest.mark.parametrize("depth", [0, 200, 600])
def test_the_guard_reads_every_document_within_the_bound(depth):
    """At most 100 levels, with numbers innermost (the deepest the number hooks go), are always
    read, however deep the caller's stack; a number 101 levels deep is refused, and so are empty
    arrays 103 levels deep (every refused document is deeper than the bound)."""
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.jsonio import MAX_DEPTH, loads_json, loads_json_line

    def at(k: int, fn: Any) -> Any:
        return fn() if k == 0 else at(k - 1, fn)

    def nest(n: int, inner: str = "", obj: bool = False) -> str:
        return '{"k":' * n + (inner or "1") + "}" * n if obj else "[" * n + inner + "]" * n

    for inner, obj in (("1", False), ("1.5", False), ("", False), ('"x"', False), ("1", True)):
        doc = nest(MAX_DEPTH, inner, obj)
        assert at(depth, lambda d=doc: loads_json(d, reject_duplicate_keys=True)) is not None
        assert at(depth, lambda d=doc: loads_json_line(d, "t.jsonl", 4)) is not None
    for doc in (nest(MAX_DEPTH + 1, "1"), nest(MAX_DEPTH + 3)):
        with pytest.raises(InvalidInputError, match=r"t\.jsonl: line 4: nested more than 100"):
            at(depth, lambda d=doc: loads_json_line(d, "t.jsonl", 4))
