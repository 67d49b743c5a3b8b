"""A toy stream engine with planted recovery bugs, and its hunt adapter: real hunts in seconds.

The engine runs a program (sources -> union -> filter / map / dedup / count) in micro-batches,
keeps each stateful operator's state in a checkpoint after every batch, and on a failure at batch
``b`` restores the checkpoint of batch ``b - 1`` and runs ``b`` again. Two recovery bugs are
planted, both in the restore:

- bug A (releases before 2.0): a ``dedup`` preceded by a ``filter`` forgets its keys when restored
  after a failure at batch >= 1 (duplicates come out after recovery);
- bug B (every release): a ``count`` behind a ``union`` starts from zero when restored after a
  failure at batch >= 2.

The engine rejects a ``dedup`` after a ``count`` at analysis (like an engine refusing a plan).
:class:`ToyHuntAdapter` is the hunt adapter: a Hypothesis grammar of programs steered by coverage,
fault schedules, checks (``exactly-once`` against the failure-free run, ``batch-equivalent``
against the evaluation of the whole input in order, ``recovery-succeeded``), shrinking, a
standalone reproducer (``python F1.reproducer.py RELEASE``: exit 1 reproduced, 0 not).
Environment: ``ROLLCHECK_TOY_CELL_SECONDS`` makes every cell sleep that long (kill tests).
"""

from __future__ import annotations

import ast
import os
import pprint
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from rollcheck.infra.hunt import CellOutcome, HuntAdapter, HuntCell, Program, draw
from rollcheck.pyimpl.errors import InvalidInputError

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hunt_toy_engine import RELEASES, evaluate, rejected, run_engine  # noqa: E402

__all__ = ["RELEASES", "ToyHuntAdapter", "ToyFixedAdapter", "run_engine", "evaluate", "rejected"]

KINDS = ("filter", "map", "dedup", "count")
VOCABULARY = ["source", "union", *KINDS]


def judge(spec: Mapping[str, Any], fail_at: int | None, release: str) -> CellOutcome:
    """The outcome of one cell (``fail_at`` None: the failure-free cell)."""
    start = time.monotonic()
    why = rejected(spec)
    names = ("batch-equivalent", "exactly-once", "recovery-succeeded")
    if why is not None:
        return CellOutcome("rejected", dict.fromkeys(names, "unchecked"), detail=why)
    got = run_engine(spec, fail_at, release)
    flat = sorted(map(tuple, (r for b in got for r in b)))
    checks = {"batch-equivalent": "held" if flat == sorted(map(tuple, evaluate(spec))) else "violated"}
    if fail_at is None or fail_at >= len(spec["batches"]):
        checks.update({"exactly-once": "not_applicable", "recovery-succeeded": "not_applicable"})
    else:
        same = got == run_engine(spec, None, release)
        checks.update({"exactly-once": "held" if same else "violated", "recovery-succeeded": "held"})
    bad = sorted(k for k, v in checks.items() if v == "violated")
    return CellOutcome("violated" if bad else "conformant", checks,
                       attributed_to="engine" if bad else None,
                       detail=f"{', '.join(bad)} violated" if bad else "every check held",
                       seconds=time.monotonic() - start)


# the grammar --------------------------------------------------------------------------------------
def _op(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    if kind == "filter":
        return st.builds(lambda m: {"op": "filter", "min": m}, st.integers(0, 6))
    if kind == "map":
        return st.builds(lambda a: {"op": "map", "add": a}, st.integers(-2, 3))
    return st.just({"op": kind})


_ROWS = st.lists(st.lists(st.integers(0, 9), min_size=2, max_size=2).map(lambda r: [r[0] % 4, r[1]]),
                 max_size=5)


@st.composite
def programs(draw_: Any, focus: str) -> dict[str, Any]:
    """A program spec using ``focus`` (an operator kind, ``union`` or ``source``)."""
    ops = draw_(st.lists(st.sampled_from(KINDS).flatmap(_op), min_size=1, max_size=4))
    if focus in KINDS and focus not in [o["op"] for o in ops]:
        ops.insert(draw_(st.integers(0, len(ops))), draw_(_op(focus)))
    sources = 2 if focus == "union" else draw_(st.sampled_from([1, 2]))
    n = draw_(st.integers(2, 5))
    spec: dict[str, Any] = {"sources": sources, "ops": ops,
                            "batches": draw_(st.lists(_ROWS, min_size=n, max_size=n))}
    if sources == 2:
        spec["batches2"] = draw_(st.lists(_ROWS, min_size=n, max_size=n))
    return spec


def plan(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Operator kinds in plan order."""
    head = ("source", "source", "union") if spec.get("sources", 1) == 2 else ("source",)
    return head + tuple(o["op"] for o in spec["ops"])


def render(pid: str, spec: Mapping[str, Any]) -> Program:
    """The program ``pid`` of ``spec``: a module whose ``SPEC`` is the spec."""
    text = f'"""Toy hunt program {pid} (generated)."""\n\nSPEC = {pprint.pformat(dict(spec), width=100, sort_dicts=True)}\n'
    ops = plan(spec)
    pairs = tuple(dict.fromkeys(f"{a}>{b}" for a, b in zip(ops, ops[1:], strict=False) if (a, b) != ("source", "source")))
    return Program(id=pid, text=text, operators=ops, spec=dict(spec), pairs=pairs)


def read_module(path: Path) -> dict[str, Any]:
    """The ``SPEC`` of a toy program module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SPEC" for t in node.targets):
            return dict(ast.literal_eval(node.value))
    raise InvalidInputError("no SPEC", source=str(path))


_REPRODUCER = '''"""Standalone reproducer: the toy engine only. Usage: python {name} [RELEASE]; exit 1: reproduced."""
import sys
sys.path.insert(0, {engine_dir!r})
import hunt_toy_engine as hunt_toy

SPEC = {spec}
FAIL_AT = {fail_at!r}
release = sys.argv[1] if len(sys.argv) > 1 else {release!r}
expected = hunt_toy.run_engine(SPEC, None, release)
actual = hunt_toy.run_engine(SPEC, FAIL_AT, release)
batch = sorted(map(tuple, hunt_toy.evaluate(SPEC)))
if actual != expected or sorted(map(tuple, (r for b in actual for r in b))) != batch:
    print("reproduced: expected", expected, "actual", actual)
    sys.exit(1)
print("not reproduced")
'''


class ToyHuntAdapter(HuntAdapter):
    """The toy engine's hunt adapter (constructor keywords as the CLI passes them)."""

    engine = "toy"

    def __init__(self, *, engine_version: str | None = None, reference_version: str | None = None,
                 failures: Sequence[str] | None = None, seed: int = 0, out: Path | None = None,
                 jobs: int = 1, **_: Any):
        if engine_version is not None and engine_version not in RELEASES:
            raise InvalidInputError(f"no toy release {engine_version!r} ({', '.join(RELEASES)})",
                                    location="--engine-version")
        for f in failures or ():
            if f != "fail":
                raise InvalidInputError(f"unknown failure kind {f!r} (the toy knows: fail)", location="--failures")
        self.engine_version = engine_version or RELEASES[0]
        self.reference_version = reference_version
        self.delay = float(os.environ.get("ROLLCHECK_TOY_CELL_SECONDS") or 0)
        self.runs = 0

    def vocabulary(self) -> list[str]:
        return list(VOCABULARY)

    def generate(self, seed: int, index: int, coverage: Mapping[str, int]) -> Program:
        focus = min(VOCABULARY, key=lambda k: (coverage.get(k, 0), VOCABULARY.index(k)))
        return render(f"P{index:04d}", draw(programs(focus), seed, index, salt="toy-program"))

    def cells(self, program: Program, seed: int) -> list[HuntCell]:
        n = len(program.spec["batches"])
        at = draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=2), seed, 0, salt=f"toy-cells/{program.id}")
        return [HuntCell("none", {"fail_at": None})] + [HuntCell(f"fail@b{b}", {"fail_at": b}) for b in sorted(at)]

    def run(self, program: Program, module: Path, cells: Sequence[HuntCell], workdir: Path,
            jobs: int = 1) -> Iterator[tuple[HuntCell, CellOutcome]]:
        spec = read_module(module)
        for cell in cells:
            if self.delay:
                time.sleep(self.delay)
            self.runs += 1
            yield cell, judge(spec, cell.params["fail_at"], self.engine_version or RELEASES[0])

    def shrink(self, program: Program) -> Iterator[Program]:
        spec = program.spec
        for i in range(len(spec["ops"])):
            if len(spec["ops"]) > 1:
                yield render(program.id, {**spec, "ops": spec["ops"][:i] + spec["ops"][i + 1:]})
        if spec.get("sources", 1) == 2:
            yield render(program.id, {k: v for k, v in spec.items() if k != "batches2"} | {"sources": 1})
        if len(spec["batches"]) > 2:
            cut = {**spec, "batches": spec["batches"][:-1]}
            if "batches2" in spec:
                cut["batches2"] = spec["batches2"][:-1]
            yield render(program.id, cut)
        for b, rows in enumerate(spec["batches"]):
            for r in range(len(rows)):
                yield render(program.id, {**spec, "batches": [x if j != b else x[:r] + x[r + 1:]
                                                              for j, x in enumerate(spec["batches"])]})

    def reproducer(self, program: Program, cell: HuntCell, outcome: CellOutcome, dest: Path) -> Path:
        dest.write_text(_REPRODUCER.format(name=dest.name, engine_dir=str(Path(__file__).resolve().parent),
                                           spec=pprint.pformat(program.spec, width=100, sort_dicts=True),
                                           fail_at=cell.params["fail_at"], release=self.engine_version),
                        encoding="utf-8")
        return dest

    def run_reproducer(self, script: Path, release: str | None) -> str:
        try:
            r = subprocess.run([sys.executable, "-P", str(script), release or RELEASES[0]],
                               capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"could not run: {e}"
        return {1: "reproduced", 0: "not reproduced"}.get(r.returncode, f"could not run: exit {r.returncode}")

    def newer_releases(self) -> list[str]:
        line = (self.engine_version or RELEASES[0]).split(".")[0]
        newest_patch = [r for r in RELEASES if r.split(".")[0] == line][-1]
        return list(dict.fromkeys([newest_patch, RELEASES[-1]]))

    def confirm(self, module: Path, cell: HuntCell, workdir: Path) -> CellOutcome:
        return judge(read_module(module), cell.params["fail_at"], self.engine_version or RELEASES[0])


class ToyFixedAdapter(ToyHuntAdapter):
    """The toy adapter whose programs are :attr:`SPECS` in turn (then the grammar's)."""

    SPECS: list[dict[str, Any]] = []

    def cells(self, program: Program, seed: int) -> list[HuntCell]:
        n = len(program.spec["batches"])
        return [HuntCell("none", {"fail_at": None})] + [HuntCell(f"fail@b{b}", {"fail_at": b}) for b in range(n)]

    def generate(self, seed: int, index: int, coverage: Mapping[str, int]) -> Program:
        if index < len(self.SPECS):
            return render(f"P{index:04d}", self.SPECS[index])
        return super().generate(seed, index, coverage)


_DUP = [[[1, 5]], [[1, 6], [2, 7]], [[1, 8]]]

#: Programs with a known fate (used by the tests).
SPEC_BUG_A = {"sources": 1, "ops": [{"op": "map", "add": 1}, {"op": "filter", "min": 2}, {"op": "dedup"}],
              "batches": _DUP}
SPEC_BUG_A_TOO = {"sources": 1, "ops": [{"op": "filter", "min": 0}, {"op": "map", "add": 2}, {"op": "dedup"}],
                  "batches": _DUP}
SPEC_BUG_A_UNION = {"sources": 2, "ops": [{"op": "filter", "min": 1}, {"op": "dedup"}, {"op": "map", "add": 0}],
                    "batches": _DUP, "batches2": [[], [[3, 3]], []]}
SPEC_BUG_B = {"sources": 2, "ops": [{"op": "count"}, {"op": "map", "add": 1}],
              "batches": [[[1, 1]], [[1, 2]], [[1, 3]], [[1, 4]]], "batches2": [[], [], [], []]}
SPEC_CLEAN = {"sources": 1, "ops": [{"op": "map", "add": 1}], "batches": [[[1, 1]], [[2, 2]]]}
SPEC_REJECTED = {"sources": 1, "ops": [{"op": "count"}, {"op": "dedup"}], "batches": [[[1, 1]], [[1, 2]]]}


class ToyBugs(ToyFixedAdapter):
    """Bug A three times (twice with one pre-signature, once behind a union), bug B, a rejected one."""

    SPECS = [SPEC_BUG_A, SPEC_BUG_A_TOO, SPEC_REJECTED, SPEC_BUG_A_UNION, SPEC_BUG_B]


class ToyClean(ToyFixedAdapter):
    """Programs without a bug."""

    SPECS = [SPEC_CLEAN] * 50


class ToyRejected(ToyFixedAdapter):
    """Programs the engine rejects."""

    SPECS = [SPEC_REJECTED] * 50

