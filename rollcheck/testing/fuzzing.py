"""Fuzzing the CLI's inputs: a Hypothesis-driven mutator of valid documents and a checked runner.

Every input format and every numeric option of rollcheck must meet one contract on bad input
(``specs/cli.md``): exit 2 with **one** line naming the file (or flag) and the place, within a
bounded time, nothing written, never a traceback, never exit 4. Valid input may give 0, 1 or 3.

- :func:`mutated_document` — a strategy of ``(description, bytes)``: a valid seed document with
  structural mutations (wrong types, missing and unknown keys, unknown names, duplicates, huge,
  negative and fractional numbers, deep nesting, lone surrogates, long strings, reordered lists)
  and byte-level ones (NaN/Infinity/1e999, 5,000-digit integers, truncation, BOM, bytes that are
  not UTF-8, trailing garbage, duplicate keys, empty and blank files), plus "the input is a
  folder" and "the input does not exist".
- :func:`run_cli` — ``rollcheck.cli.main.main(argv)`` in-process with stdout/stderr captured and
  a hard per-input time bound (SIGALRM); :func:`check_outcome` — the contract above.
- :data:`FORMATS` — one entry per input format (a :class:`FileFormat`: valid seeds and the
  commands that read it) or option family (:class:`OptionsFormat`); pointing the harness at a new
  format is one entry (``lines=True`` for JSON Lines such as ``rollcheck.trace/1``).
  :data:`TLA_VALUES` fuzzes :func:`rollcheck.tla.values.parse_value`.

``tests/test_fuzz.py`` runs a ci-sized fuzz of every entry; ``rollcheck verify`` (section
``fuzz``) runs ≥ 10^4 inputs per format and reports the counts.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "FileFormat",
    "OptionsFormat",
    "ValueFormat",
    "FORMATS",
    "TLA_VALUES",
    "Outcome",
    "mutated_document",
    "mutated_options",
    "mutated_text",
    "run_cli",
    "check_outcome",
    "run_file_input",
    "run_options_input",
    "run_value_input",
]

TIME_LIMIT = 20.0
"""Seconds one input may take in-process before it counts as an unbounded run."""


# ---------------------------------------------------------------------------------------------
# Running the CLI in-process
# ---------------------------------------------------------------------------------------------


class _Timeout(BaseException):
    """Raised by SIGALRM inside the command: not an Exception, so main() does not map it."""


@dataclass
class Outcome:
    """What one CLI run did."""

    code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    crashed: str | None = None  # an exception that escaped main() itself


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: Sequence[str], time_limit: float = TIME_LIMIT) -> Outcome:
    """Run ``rollcheck ARGV`` in-process; stdout/stderr captured; at most ``time_limit`` seconds."""
    from rollcheck.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    code: int | None = None
    timed_out = False
    crashed = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _alarm(time_limit):
            code = main(list(argv))
    except SystemExit as e:  # argparse usage errors
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except _Timeout:
        timed_out = True
    except BaseException as e:  # noqa: BLE001 - anything escaping main() is a finding
        crashed = f"{type(e).__name__}: {e}"[:300]
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - t0, timed_out, crashed)


def _strict_json(text: str) -> Any:
    def bad(s: str) -> Any:
        raise ValueError(f"{s} in JSON output")

    return json.loads(text, parse_constant=bad)


def check_outcome(o: Outcome, *, names: Sequence[str], json_out: bool, out_dir: Path | None,
                  in_dir: Path | None = None, allowed_inputs: Sequence[str] = ()) -> str | None:
    """The contract of a run on (possibly) bad input; None when kept, else what was broken.

    ``names`` — strings one of which an exit-2 message must contain (the file, the flag);
    ``out_dir`` — must be empty after exit 2 (nothing written on bad input); ``in_dir`` — must hold
    nothing but ``allowed_inputs`` afterwards (no temporary file left next to the input).
    """
    if o.timed_out:
        return f"unbounded run (over {o.seconds:.1f} s)"
    if o.crashed:
        return f"exception escaped main(): {o.crashed}"
    if "Traceback (most recent call last)" in o.stderr:
        return "traceback on stderr"
    if o.code not in (0, 1, 2, 3):
        return f"exit code {o.code}: {o.stderr.strip()[-300:]}"
    if o.code == 2:
        lines = [ln for ln in o.stderr.splitlines() if ": error:" in ln]
        if len(lines) != 1:
            return f"expected one error line, got {len(lines)}: {o.stderr[-300:]!r}"
        if len(lines[0]) > 2600:
            return f"error line of {len(lines[0])} characters"
        if names and not any(n in lines[0] for n in names):
            return f"error line names neither of {list(names)}: {lines[0][:300]!r}"
    # bad input writes nothing (a run that ended 1 or 3 may write what was asked: a counterexample)
    if o.code == 2 and out_dir is not None and out_dir.exists() and any(out_dir.iterdir()):
        return f"exit {o.code} but files were written: {sorted(p.name for p in out_dir.iterdir())}"
    if in_dir is not None:
        extra = sorted(p.name for p in in_dir.iterdir() if p.name not in allowed_inputs)
        if extra:
            return f"files left next to the input: {extra}"
    if o.code in (0, 1, 3) and json_out and o.stdout.strip():
        try:
            _strict_json(o.stdout)
        except ValueError as e:
            return f"stdout is not one strict JSON document: {e}"
    return None


# ---------------------------------------------------------------------------------------------
# Mutating documents
# ---------------------------------------------------------------------------------------------

_ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 3, 7, 2**31, 2**63, 2**64, -(2**64), 10**30, 10**99,
    1.5, -0.0, 1e308, -1e308, 1e-308, "", " ", "x", "P0", "p", "nope", "\ud800", "a\udfffb",
    "$\\frac$", "\x00", "\n", "é" * 3, "a" * 5000, [], [[]], [[[[[]]]]], {}, {"x": 1},
    [1, 2, 3], ["P0", "P0"], [None], {"format": "x"},
]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _strings(doc: Any) -> list[str]:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in [k, *_strings(v)]]
    if isinstance(doc, list):
        return [s for v in doc for s in _strings(v)]
    return []


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


_STRUCTURAL = ("replace", "delete", "add_key", "duplicate", "drop_item", "swap_name", "nest",
               "reverse", "number")
_BYTES = ("none", "none", "none", "nan", "infinity", "overflow", "bigint", "truncate", "bom",
          "bad_utf8", "trailing", "dup_key", "empty", "blank", "deep", "surrogate_bytes")


@st.composite
def _structural(draw: Any, doc: Any) -> tuple[Any, str]:
    kind = draw(st.sampled_from(_STRUCTURAL))
    paths = _paths(doc)
    path = draw(st.sampled_from(paths))
    target = _get(doc, path)
    where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path) or "(root)"
    if kind == "replace":
        return _set(doc, path, copy.deepcopy(draw(st.sampled_from(_ODD_VALUES)))), f"replace {where}"
    if kind == "delete" and path:
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return doc, f"delete {where}"
    if kind == "add_key" and isinstance(target, dict):
        key = draw(st.sampled_from(["extra", "format", "", "\ud800", "processes", "x" * 300]))
        target[key] = copy.deepcopy(draw(st.sampled_from(_ODD_VALUES)))
        return doc, f"add key to {where}"
    if kind == "duplicate" and isinstance(target, list) and target:
        i = draw(st.integers(0, len(target) - 1))
        target.insert(draw(st.integers(0, len(target))), copy.deepcopy(target[i]))
        return doc, f"duplicate an item of {where}"
    if kind == "drop_item" and isinstance(target, list) and target:
        del target[draw(st.integers(0, len(target) - 1))]
        return doc, f"drop an item of {where}"
    if kind == "swap_name" and isinstance(target, str):
        names = _strings(doc) + ["nope", "P9", ""]
        return _set(doc, path, draw(st.sampled_from(names))), f"swap name at {where}"
    if kind == "nest":
        # deeper nesting is a byte-level mutation ("deep"): Python's own deepcopy/dumps of a
        # document nested ~1,000 deep would recurse out, inside the strategy
        depth = draw(st.sampled_from([2, 50, 99, 101, 150, 300]))
        v: Any = target
        for _ in range(depth):
            v = [v]
        return _set(doc, path, v), f"nest {where} {depth} deep"
    if kind == "reverse" and isinstance(target, list):
        target.reverse()
        return doc, f"reverse {where}"
    if kind == "number" and isinstance(target, (int, float)) and not isinstance(target, bool):
        v = draw(st.sampled_from([-target, target * 1000, target + 0.5, 0, -1, 10**9, 10**18, 2**64,
                                  10**23, 1e9, 1e-300, 1e300]))
        return _set(doc, path, v), f"number at {where}"
    return _set(doc, path, copy.deepcopy(draw(st.sampled_from(_ODD_VALUES)))), f"replace {where}"


def _dump(doc: Any, compact: bool, lines: bool = False) -> bytes:
    """The file bytes of ``doc``: one JSON document, or (``lines``) one JSON value per line when
    ``doc`` is a list (a JSON Lines trace: header, then events)."""
    sep = (",", ":") if compact else None
    if lines and isinstance(doc, list):
        text = "".join(json.dumps(x, separators=sep, ensure_ascii=False) + "\n" for x in doc)
    else:
        text = json.dumps(doc, separators=sep, ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")  # lone surrogates become bytes that are not UTF-8


def _byte_mutation(draw: Any, data: bytes) -> tuple[bytes, str]:
    import re

    kind = draw(st.sampled_from(_BYTES))
    if kind == "none":
        return data, ""
    num = re.search(rb"(?<![\w.\"])-?\d+(\.\d+)?([eE][+-]?\d+)?", data)
    if kind in ("nan", "infinity", "overflow", "bigint") and num:
        rep = {"nan": b"NaN", "infinity": b"-Infinity", "overflow": b"1e999", "bigint": b"9" * 5000}[kind]
        return data[:num.start()] + rep + data[num.end():], kind
    if kind == "truncate" and len(data) > 1:
        return data[:draw(st.integers(0, len(data) - 1))], kind
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, kind
    if kind == "bad_utf8":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + data[i:], kind
    if kind == "trailing":
        return data + draw(st.sampled_from([b"x", b"{}", b"]", b"\x00", b"\n\n{"])), kind
    if kind == "dup_key" and data.startswith(b"{"):
        return b'{"format":"dup",' + data[1:], kind
    if kind == "empty":
        return b"", kind
    if kind == "blank":
        return b" \n\t ", kind
    if kind == "deep":
        n = draw(st.sampled_from([200, 100_000]))
        return b"[" * n + b"]" * n, kind
    if kind == "surrogate_bytes":
        return data.replace(b'"', b'"\xed\xa0\x80', 1), kind
    return data, ""


@st.composite
def mutated_document(draw: Any, seeds: Sequence[Any], lines: bool = False) -> tuple[str, bytes]:
    """A strategy of ``(description, file bytes)``: a seed with 0–3 structural and 0–1 byte mutations.

    The seeds themselves (no mutation) are among the values drawn, so valid input is exercised too.
    With ``lines`` a seed is a list of objects written one per line (JSON Lines): the structural
    mutations of the list drop, duplicate and reorder lines, those of its items change fields, and
    the byte-level ``truncate`` cuts the file mid-line, as a killed writer does.
    """
    doc = copy.deepcopy(draw(st.sampled_from(list(seeds))))
    notes = []
    for _ in range(draw(st.integers(0, 3))):
        doc, what = draw(_structural(doc))
        notes.append(what)
        if what.startswith("nest"):
            break  # keep the document shallow enough for deepcopy and json.dumps
    if lines and isinstance(doc, list) and len(doc) > 2 and draw(st.booleans()):
        # a line-level mutation: what a buggy engine or a bad merge of two logs writes
        i = draw(st.integers(1, len(doc) - 1))
        kind = draw(st.sampled_from(["drop line", "repeat line", "swap lines", "move line"]))
        if kind == "drop line":
            del doc[i]
        elif kind == "repeat line":
            doc.insert(i, copy.deepcopy(doc[i]))
        elif kind == "swap lines" and i + 1 < len(doc):
            doc[i], doc[i + 1] = doc[i + 1], doc[i]
        else:
            doc.insert(draw(st.integers(1, len(doc) - 1)), doc.pop(i))
        notes.append(kind)
    if lines and notes and isinstance(doc, list) and draw(st.booleans()):
        # renumber the events 1, 2, … so that a dropped, repeated or reordered line reaches the
        # checker instead of stopping at the reader's "seq numbers have no gaps"
        for i, item in enumerate(doc[1:], start=1):
            if isinstance(item, dict):
                item["seq"] = i
        notes.append("renumber seq")
    data = _dump(doc, draw(st.booleans()), lines)
    data, what = _byte_mutation(draw, data)
    if what:
        notes.append(what)
    return "; ".join(notes) or "valid seed", data


# ---------------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------------


@dataclass
class FileFormat:
    """An input file format: valid seed documents and the commands that read it.

    ``commands`` are argv templates; ``{input}`` is the input file, ``{out}`` a fresh empty output
    folder (which must stay empty when the command fails).
    """

    name: str
    seeds: Callable[[], list[Any]]
    commands: list[list[str]]
    suffix: str = ".json"
    special: tuple[str, ...] = ("directory", "missing")
    lines: bool = False  # JSON Lines: each seed is a list of objects, written one per line


@dataclass
class OptionsFormat:
    """A family of numeric options: base argv per command and the flags to fill with odd values."""

    name: str
    commands: list[tuple[list[str], dict[str, list[str]]]]
    json_flag: str = "--json"


@dataclass
class ValueFormat:
    """Text parsed by a library function that must raise only InvalidInputError."""

    name: str
    seeds: list[str]
    parse: Callable[[], Callable[[str], Any]]
    time_limit: float = 5.0
    skip_kinds: tuple[str, ...] = field(default_factory=tuple)


def _pattern_seeds() -> list[Any]:
    from rollcheck.pyimpl.generate import random_pattern
    from rollcheck.pyimpl.patternio import pattern_to_dict

    # three processes P0, P1, P2 (the commands refer to P0 and P1)
    return [pattern_to_dict(random_pattern(3, 14, s)) for s in range(4)]


def _spans_seeds() -> list[Any]:
    return [{
        "format": "rollcheck.spans/1",
        "processors": {
            "p": {"chain": [[], ["e1:1"], ["e1:1", "e1:2"]], "top": ["e1:1", "e1:2", "e1:3"]},
            "q": {"chain": [[], ["e2:1"]]},
        },
        "edges": [
            {"name": "e2", "src": "p", "dst": "q",
             "discarded": [[], ["e2:1"], ["e2:1", "e2:2"]],
             "discarded_top": ["e2:1", "e2:2", "e2:3"],
             "processed": ["e2:1", "e2:2"],
             "phi": [[], ["e2:1"], ["e2:1", "e2:2"]]},
        ],
    }]


def _dataflow_seeds() -> list[Any]:
    import json
    from importlib.resources import files

    data = files("rollcheck.data")
    return [json.loads((data / name).read_text(encoding="utf-8"))
            for name in ("dataflow-epochs.json", "dataflow-loop.json")]


def _elastic_seeds() -> list[Any]:
    from rollcheck.pyimpl.elastic import Config, Failure, ScaleEvent, config_to_dict

    return [
        config_to_dict(Config(keys=4, rounds=6), Failure(20, 2, 1)),
        config_to_dict(Config(keys=3, ops=("affine", "filter", "max"), parallelism=(1, 2, 1), rounds=5,
                              scaling=(ScaleEvent(2, 1, 3),)), None),
    ]


def _profile_seeds() -> list[Any]:
    from rollcheck.pyimpl.intervals.profile import FORMAT

    pts = [{"ci": 1000, "latency": 900, "trt": 40}, {"ci": 20000, "latency": 700, "trt": 80},
           {"ci": 40000, "latency": 650, "trt": 130}, {"ci": 60000, "latency": 690, "trt": 190}]
    return [{"format": FORMAT, "points": pts}, pts]


def _trace_seeds() -> list[Any]:
    """The shipped ``rollcheck.trace/1`` examples (a correct run and four broken ones) and seeded
    synthetic runs of other protocols, sizes and failures, as lists of lines."""
    from importlib.resources import files

    from rollcheck.pyimpl.traces.synth import synthetic_trace

    data = files("rollcheck.data")
    seeds: list[Any] = [
        [json.loads(ln) for ln in (data / name).read_text(encoding="utf-8").splitlines() if ln.strip()]
        for name in ("trace-hmnr-3p.jsonl", "trace-hmnr-3p-orphan.jsonl", "trace-hmnr-3p-no-forced.jsonl",
                     "trace-hmnr-3p-not-replayed.jsonl", "trace-hmnr-3p-duplicate-output.jsonl")]
    for k, (n, protocol, failures) in enumerate([(2, "bcs", (12,)), (4, "uc", (10, 25)), (3, "hmnr", ())]):
        seeds.append(list(synthetic_trace(n, 30, seed=k, protocol=protocol, failures=failures)))
    return seeds


def _trace_reference() -> str:
    from importlib.resources import files

    return str(files("rollcheck.data") / "trace-hmnr-3p.reference.json")


PATTERN = FileFormat("pattern", _pattern_seeds, [
    ["validate", "{input}"],
    ["validate", "--strict", "{input}", "--json"],
    ["useless", "{input}", "--json", "--witness"],
    ["recovery-line", "{input}", "--failed", "P0"],
    ["recovery-line", "{input}", "--failed", "P1", "--method", "cgraph", "--json"],
    ["zpath", "{input}", "--from", "P0:1", "--to", "P1:0"],
    ["consistent", "{input}", "P0:1", "--json"],
])
SPANS = FileFormat("spans", _spans_seeds, [["spans", "{input}", "--json"], ["spans", "{input}"]])
DATAFLOW = FileFormat("dataflow", _dataflow_seeds, [
    ["spans", "{input}", "--json"],
    ["spans", "{input}", "--watermark", "--emit-system", "{out}/system.json"],
])
ELASTIC = FileFormat("elastic", _elastic_seeds, [
    ["elastic", "simulate", "{input}", "--json", "--write-config", "{out}/effective.json"],
])
PROFILE = FileFormat("trt profile", _profile_seeds, [
    ["trt", "optimise", "{input}", "--bound", "150", "--json"],
    ["trt", "optimise", "{input}", "--bound", "150", "--timeout", "5", "--recovery", "3", "--warmup", "2",
     "--ratio", "0.5"],
])

TRACE = FileFormat("trace", _trace_seeds, [
    ["check", "trace", "{input}", "--no-tlc"],
    ["check", "trace", "{input}", "--no-tlc", "--json"],
    ["check", "trace", "{input}", "--no-tlc", "--reference", _trace_reference()],
    ["check", "trace", "{input}", "--no-tlc", "--protocol", "bcs", "--no-virtual", "--json"],
    ["trace", "validate", "{input}"],
    ["trace", "validate", "--strict", "{input}", "--json"],
    ["trace", "to-pattern", "{input}", "-o", "{out}/pattern.json"],
    ["trace", "to-pattern", "{input}", "-o", "{out}/pattern.json", "--json"],
], suffix=".jsonl", lines=True)
"""``rollcheck.trace/1`` (JSON Lines) through ``check trace`` (without TLC: a JVM per input would
bound nothing but the fuzzer's speed), ``trace validate`` and ``trace to-pattern``."""

_NUM = ["0", "-1", "1", "0.5", "1e-300", "1e308", "-1e308", "nan", "inf", "-inf", "1e9", "1e23",
        "abc", "", "1" * 5000, "0x10", "1_000", "2", "10", "-0", "5e-324", "0.999999999999"]
_INT = ["0", "-1", "1", "2", "3", "250", "1000000000", "1e9", "-5", "1" * 5000, "x", "", "100001",
        "18446744073709551616"]

OPTIONS = OptionsFormat("interval/trt/simulate options", [
    (["interval", "optimal", "--json"], {"--failure-rate": _NUM, "--checkpoint-cost": _NUM,
                                         "--restart-cost": _NUM, "--depth": _INT, "--token-delay": _NUM}),
    (["interval", "utilization", "--json"], {"--interval": _NUM, "--failure-rate": _NUM,
                                             "--checkpoint-cost": _NUM, "--restart-cost": _NUM,
                                             "--depth": _INT, "--token-delay": _NUM}),
    (["interval", "compare", "--json"], {"--failure-rate": _NUM, "--checkpoint-cost": _NUM,
                                         "--restart-cost": _NUM, "--against": _NUM}),
    (["interval", "simulate", "--json"], {"--failure-rate": _NUM, "--checkpoint-cost": _NUM,
                                          "--restart-cost": _NUM, "--runs": _INT,
                                          "--horizon-failures": _NUM, "--seed": _INT, "--interval": _NUM}),
    (["trt", "--json"], {"--ci": _NUM, "--timeout": _NUM, "--recovery": _NUM, "--warmup": _NUM,
                         "--ratio": _NUM, "--threshold": _NUM, "--i-avg": _NUM, "--i-max": _NUM}),
    (["elastic", "simulate", "--json"], {"--keys": _INT, "--rounds": _INT, "--rate": _INT,
                                         "--ack-interval": _INT, "--checkpoint-interval": _INT,
                                         "--seed": _INT, "--scale": ["1:1:2", "x", "1:9:1", "0:0:0"],
                                         "--fail": ["3:1:0", "1:1:99", "1:1", "a:b:c"]}),
])
# Sensible values, so that a mutated command line is usually one bad flag away from a good one.
_GOOD = {"--failure-rate": "0.01", "--checkpoint-cost": "1", "--interval": "20", "--runs": "5",
         "--horizon-failures": "50", "--ci": "10", "--timeout": "5", "--recovery": "3", "--warmup": "2",
         "--ratio": "0.5"}


def _tla_parse() -> Callable[[str], Any]:
    from rollcheck.tla.values import parse_value

    return parse_value


TLA_VALUES = ValueFormat("TLA+ values", [
    '[a |-> <<1, "q">>, b |-> {2, 1}]', "(0 :> TRUE @@ 1 :> FALSE)", "1..3", "p1",
    '<<{}, <<>>, [x |-> -3]>>', '{"a", "b\\"c"}',
], _tla_parse)

FORMATS: dict[str, FileFormat | OptionsFormat] = {
    "pattern": PATTERN,
    "spans": SPANS,
    "dataflow": DATAFLOW,
    "elastic": ELASTIC,
    "trt profile": PROFILE,
    "trace": TRACE,
    "options": OPTIONS,
}
"""Every fuzzed input: add a format here and every runner picks it up (with :data:`TLA_VALUES`,
eight formats: pattern, span system, dataflow, elastic configuration, TRT profile, trace, numeric
options, TLA+ values)."""


@st.composite
def mutated_options(draw: Any, fmt: OptionsFormat) -> list[str]:
    """An argv: one command of ``fmt`` with each flag either sensible, odd, or absent."""
    base, flags = draw(st.sampled_from(fmt.commands))
    argv = list(base)
    for flag, odd in flags.items():
        choice = draw(st.sampled_from(["good", "odd", "odd", "absent"]))
        if choice == "good" and flag in _GOOD:
            argv += [flag, _GOOD[flag]]
        elif choice == "odd":
            argv += [f"{flag}={draw(st.sampled_from(odd))}"]
    return argv


_TEXT_KINDS = ("cut", "splice", "deep", "bigint", "range", "char", "dup")


@st.composite
def mutated_text(draw: Any, seeds: Sequence[str], skip: Sequence[str] = ()) -> str:
    """A TLA+-like text: a seed cut, spliced, deepened, or with huge numbers and ranges."""
    s = draw(st.sampled_from(list(seeds)))
    kinds = [k for k in _TEXT_KINDS if k not in skip]
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(kinds))
        i = draw(st.integers(0, len(s)))
        if kind == "cut":
            s = s[:i]
        elif kind == "splice":
            s = s[:i] + draw(st.sampled_from(list(seeds))) + s[i:]
        elif kind == "deep":
            n = draw(st.sampled_from([10, 500, 5000]))
            s = "<<" * n + s + ">>" * n
        elif kind == "bigint":
            s = s[:i] + "9" * draw(st.sampled_from([20, 5000])) + s[i:]
        elif kind == "range":
            s = s[:i] + draw(st.sampled_from(["1..1000000000000", "-5..5", "3..1", "1..", ".."])) + s[i:]
        elif kind == "char":
            s = s[:i] + draw(st.sampled_from(["\ud800", "\x00", "@@", ":>", "|->", '"', "\\", "{", ">>"])) + s[i:]
        else:
            s = s + s
    return s


# ---------------------------------------------------------------------------------------------
# One input, checked
# ---------------------------------------------------------------------------------------------


def run_file_input(fmt: FileFormat, command: list[str], data: bytes | str, workdir: Path,
                   time_limit: float = TIME_LIMIT) -> tuple[Outcome, str | None]:
    """Write ``data`` as the input (or use a folder / a missing path), run ``command``, check it.

    ``data`` may be the strings ``"directory"`` or ``"missing"`` for those special inputs.
    """
    in_dir = workdir / "in"
    out_dir = workdir / "out"
    for d in (in_dir, out_dir):
        d.mkdir(parents=True, exist_ok=True)
        for p in d.iterdir():
            if p.is_dir():
                for q in p.iterdir():
                    q.unlink()
                p.rmdir()
            else:
                p.unlink()
    path = in_dir / f"input{fmt.suffix}"
    if data == "directory":
        path.mkdir()
    elif data != "missing":
        assert isinstance(data, bytes)
        path.write_bytes(data)
    argv = [a.replace("{input}", str(path)).replace("{out}", str(out_dir)) for a in command]
    o = run_cli(argv, time_limit)
    # the message names the file, or the flag whose value the file does not support, or another
    # input file the command was given (a reference the trace does not fit)
    flags = [a for a in command if a.startswith("-") and a != "--json"]
    others = [a for a in command if "{" not in a and not a.startswith("-") and Path(a).is_file()]
    problem = check_outcome(o, names=[str(path), path.name, *flags, *others], json_out="--json" in command,
                            out_dir=out_dir, in_dir=in_dir, allowed_inputs=[path.name])
    return o, problem


def run_options_input(argv: list[str], workdir: Path, time_limit: float = TIME_LIMIT) -> tuple[Outcome, str | None]:
    """Run an options argv and check it; an exit-2 message must name a flag (``--…``)."""
    o = run_cli(argv, time_limit)
    flags = [a.split("=")[0] for a in argv if a.startswith("--")] + ["rollcheck", "--"]
    problem = check_outcome(o, names=flags, json_out="--json" in argv, out_dir=None)
    return o, problem


def run_value_input(fmt: ValueFormat, text: str) -> str | None:
    """Parse ``text``: only :class:`InvalidInputError` (one line) may come out, within the bound."""
    from rollcheck.pyimpl.errors import InvalidInputError

    parse = fmt.parse()
    t0 = time.perf_counter()
    try:
        with _alarm(fmt.time_limit):
            parse(text)
    except _Timeout:
        return f"unbounded parse (over {fmt.time_limit} s)"
    except InvalidInputError as e:
        if len(str(e)) > 2000:
            return f"message of {len(str(e))} characters"
        return None
    except BaseException as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:200]} ({time.perf_counter() - t0:.1f} s)"
    return None


def special_inputs(fmt: FileFormat) -> list[str]:
    return list(fmt.special)

