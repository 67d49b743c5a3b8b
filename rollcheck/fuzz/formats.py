"""The inputs rollcheck's fuzzer feeds the CLI: input formats, numeric options, TLA+ value strings.

One entry per input format (valid seed documents and the commands that read them) and per family
of numeric options.

Pointing the fuzzer at a new format is one entry of :data:`FORMATS` (``lines=True`` for JSON Lines
such as ``rollcheck.trace/1``).

References
----------
``specs/cli.md`` (bad input: exit 2, one line naming the file or the flag).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FileFormat", "OptionsFormat", "ValueFormat", "FORMATS", "TLA_VALUES", "GOOD_VALUES",
           "PATTERN", "SPANS", "DATAFLOW", "ELASTIC", "PROFILE", "TRACE", "OPTIONS",
           "special_inputs"]



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
    """Seed traces, as lists of lines: the shipped ``rollcheck.trace/1`` examples and synthetic runs.

    The examples are a correct run and four broken ones; the seeded synthetic runs cover other
    protocols, sizes and failures.
    """
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
GOOD_VALUES = {"--failure-rate": "0.01", "--checkpoint-cost": "1", "--interval": "20", "--runs": "5",
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


def special_inputs(fmt: FileFormat) -> list[str]:
    """The inputs of ``fmt`` that are not documents (``"directory"``, ``"missing"``)."""
    return list(fmt.special)
