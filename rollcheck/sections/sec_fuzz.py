"""``rollcheck verify`` section: fuzzing every input format and numeric option (``specs/cli.md``).

One row per entry of :data:`rollcheck.fuzz.FORMATS` and one for TLA+ value strings: ≥ 10^4
Hypothesis-mutated inputs each (300 with ``--quick``), seeded by verify's seed, run through the
real CLI in-process. A row passes when every input kept the bad-input contract (exit 0/1/3, or
exit 2 with one line naming the file or flag, in time, nothing written, never a traceback or exit
4). Timings: docs/internals/fuzz.md#where-it-runs.
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path
from typing import Any

from rollcheck.suite import Row, VerifyContext

TITLE = "Hardened inputs: fuzzing every input format and numeric option through the CLI"
ALGO = "CLI input hardening"
FULL, QUICK = 10_000, 300


def _settings(n: int, seed: int) -> Any:
    from hypothesis import HealthCheck, Phase, settings

    return settings(max_examples=n, phases=[Phase.generate], deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), derandomize=False)


def _row(name: str, n_inputs: int, codes: collections.Counter, findings: list[str], seconds: float,
         method: str = "Hypothesis") -> Row:
    tracebacks = sum(1 for f in findings if "traceback" in f or "escaped" in f or "exit code 4" in f)
    unbounded = sum(1 for f in findings if f.startswith("unbounded"))
    counts = ", ".join(f"exit {k}: {v}" for k, v in sorted(codes.items(), key=lambda kv: str(kv[0])))
    detail = (f"{n_inputs} inputs ({counts}); tracebacks/internal errors: {tracebacks}, "
              f"unbounded runs: {unbounded}, other findings: {len(findings) - tracebacks - unbounded}")
    if findings:
        firsts = list(dict.fromkeys(f[:160] for f in findings))[:3]
        detail += "; first: " + " | ".join(firsts)
    # an input cut by the wall backstop before using its CPU time is the machine's: inconclusive
    status = "fail" if findings else "inconclusive" if codes.get("overloaded") else "pass"
    return Row(ALGO, method, f"fuzz: {name}", status, n_inputs, "inputs", seconds, detail)


def _fuzz_file(name: str, fmt: Any, n: int, seed: int, work: Path) -> Row:
    from hypothesis import given
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    from rollcheck.fuzz import mutated_document, run_file_input

    seeds = fmt.seeds()
    codes: collections.Counter = collections.Counter()
    findings: list[str] = []
    t0 = time.perf_counter()

    @hseed(seed)
    @_settings(n, seed)
    @given(doc=mutated_document(seeds, fmt.lines), command=st.sampled_from(fmt.commands),
           special=st.sampled_from([None] * 18 + list(fmt.special)))
    def case(doc: Any, command: list[str], special: str | None) -> None:
        what, data = doc
        o, problem = run_file_input(fmt, command, special or data, work)
        codes["overloaded" if o.overloaded else "timeout" if o.timed_out else o.code] += 1
        if problem:
            findings.append(f"{problem} <- {special or what} ({command[0]})")

    case()
    return _row(f"{name} files", sum(codes.values()), codes, findings, time.perf_counter() - t0)


def _fuzz_options(name: str, fmt: Any, n: int, seed: int, work: Path) -> Row:
    from hypothesis import given
    from hypothesis import seed as hseed

    from rollcheck.fuzz import mutated_options, run_options_input

    codes: collections.Counter = collections.Counter()
    findings: list[str] = []
    t0 = time.perf_counter()

    @hseed(seed)
    @_settings(n, seed)
    @given(argv=mutated_options(fmt))
    def case(argv: list[str]) -> None:
        o, problem = run_options_input(argv, work)
        codes["overloaded" if o.overloaded else "timeout" if o.timed_out else o.code] += 1
        if problem:
            findings.append(f"{problem} <- {' '.join(argv)[:200]}")

    case()
    return _row(name, sum(codes.values()), codes, findings, time.perf_counter() - t0)


def _fuzz_tla(n: int, seed: int) -> Row:
    from hypothesis import given
    from hypothesis import seed as hseed

    from rollcheck.fuzz import TLA_VALUES, mutated_text, run_value_input

    codes: collections.Counter = collections.Counter()
    findings: list[str] = []
    t0 = time.perf_counter()
    # every mutation kind, huge ranges, deep nesting and huge integers included (the parser bounds them)
    @hseed(seed)
    @_settings(n, seed)
    @given(text=mutated_text(TLA_VALUES.seeds))
    def case(text: str) -> None:
        problem = run_value_input(TLA_VALUES, text)
        codes["rejected or parsed" if problem is None else "finding"] += 1
        if problem:
            findings.append(f"{problem} <- {text[:60]!r}")

    case()
    return _row("TLA+ value strings (parse_value)", sum(codes.values()), codes, findings,
                time.perf_counter() - t0, method="pyimpl")


#: Independent parts the scheduler runs side by side (CPU-bound, one core each): the trace format
#: alone (the costliest, about half of the section), the other file formats, and the options, the
#: TLA+ value strings and the fault injections (a file format other than the trace's runs in
#: ``files``). The quick run, half a minute in all, is not split.
PARTS = {"quick": (), "full": ("trace", "files", "options")}


def _part_of(name: str, fmt: object) -> str:
    from rollcheck.fuzz import FileFormat

    if name == "trace":
        return "trace"
    return "files" if isinstance(fmt, FileFormat) else "options"


def run(ctx: VerifyContext) -> list[Row]:
    """Run the fuzz section: a row per input format and for TLA+ value strings, and the faults row."""
    from rollcheck.fuzz import FORMATS, FileFormat

    n = QUICK if ctx.quick else FULL
    rows = []
    with tempfile.TemporaryDirectory(prefix="rollcheck-fuzz-") as tmp:
        for name, fmt in FORMATS.items():
            if not ctx.runs(_part_of(name, fmt)):
                continue
            ctx.log(f"  fuzzing {name}: {n} inputs (seed {ctx.seed})")
            work = Path(tmp) / name
            work.mkdir()
            if isinstance(fmt, FileFormat):
                rows.append(_fuzz_file(name, fmt, n, ctx.seed, work))
            else:
                rows.append(_fuzz_options(fmt.name, fmt, n, ctx.seed, work))
        if ctx.runs("options"):
            ctx.log(f"  fuzzing TLA+ value strings: {n} inputs")
            rows.append(_fuzz_tla(n, ctx.seed))
    if ctx.runs("options"):
        from rollcheck.testing.faults import faults_row  # killed, disk full, hanging user code

        rows.append(faults_row(ctx.quick, ctx.seed))
    return rows
