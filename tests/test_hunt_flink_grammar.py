"""The Flink hunt's grammar (no engine runs): programs are deterministic, load as job modules,
contain the operators they claim, shrink into valid modules, and reach every operator.

The modules are loaded by the recorder's own job-module loader (``job/user.py``: import, ``KEY``,
``SOURCES``, ``records(seed)`` and its checks) in the PyFlink environment, without a JVM.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from rollcheck.flink_replay.hunt.cells import hunt_cells
from rollcheck.flink_replay.hunt.grammar import operators, program, vocabulary
from rollcheck.flink_replay.hunt.render import render
from rollcheck.flink_replay.hunt.shrink import shrink
from rollcheck.infra.hunt.adapter import Program

ROOT = Path(__file__).resolve().parent.parent

#: What each operator kind looks like in a rendered module.
MARKERS = {
    "source": "def records(seed)", "watermark": "for_bounded_out_of_orderness", "filter": ".filter(lambda r: r[2] >=",
    "map-literal-key": ".map(lambda r: (r[0], ", "union": ".union(", "connect-coprocess": "CoTotals()",
    "connect-interval-join": "IntervalJoin()", "window-tumbling": ".window(TumblingEventTimeWindows.of(",
    "window-sliding": ".window(SlidingEventTimeWindows.of(", "window-session": ".window(EventTimeSessionWindows.with_gap(",
    "win-reduce": ".reduce(_combine, window_function=Stamp()", "win-aggregate": ".aggregate(CountSumMax()",
    "win-process": ".process(Spread()", "process-timers": ".process(Buckets(", "keyed-reduce": ".reduce(_combine).map",
    "keyed-sum": ".sum(2)", "process-value-state": ".process(Totals())", "process-list-state": ".process(Seen())",
    "process-map-state": ".process(Distinct())", "sql-source": "tables.from_data_stream(",
    "sql-changelog-source": "CHANGELOG = True", "sql-where": "SELECT * FROM base WHERE",
    "sql-union-all": " UNION ALL ", "sql-join-inner": " JOIN s1 b ON a.k = b.k", "sql-join-left": " LEFT JOIN s1 b",
    "sql-join-interval": "a.ts BETWEEN b.ts - INTERVAL", "sql-select": "SELECT id, k, v FROM input",
    "sql-group-by": "FROM input GROUP BY k", "sql-global-agg": "SELECT 'all' AS k,", "tvf-tumble": "TUMBLE(TABLE input",
    "tvf-hop": "HOP(TABLE input", "tvf-cumulate": "CUMULATE(TABLE input", "over-sum-rows": "ROWS BETWEEN",
    "over-sum-range": "RANGE BETWEEN INTERVAL", "over-row-number": "ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS a0",
    "over-rank": "RANK() OVER (PARTITION BY k ORDER BY ts)", "top-n": "ORDER BY v DESC, id ASC) AS rn",
    "dedup-first": "ORDER BY ts ASC) AS rn", "dedup-last": "ORDER BY ts DESC) AS rn", "agg-count": "COUNT(*) AS a",
    "agg-sum": "SUM(v) AS a", "agg-min": "MIN(v) AS a", "agg-max": "MAX(v) AS a", "agg-avg": "AVG(v) AS a",
    "agg-count-distinct": "COUNT(DISTINCT v) AS a", "agg-filtered": "COUNT(*) FILTER (WHERE v >=",
    "post-group-by": "SELECT k, COUNT(*) AS n FROM main GROUP BY k", "post-top-n": "FROM main) WHERE rn <=",
    "post-tvf": "TUMBLE(TABLE main", "post-join": "FROM main m JOIN", "sql-minibatch": "table.exec.mini-batch.enabled",
    "sql-two-phase": "TWO_PHASE", "sql-distinct-split": "distinct-agg.split.enabled", "final-table": ".process(FinalTable())",
}


@functools.lru_cache(maxsize=2)
def _programs(seed: int, n: int) -> list[Program]:
    """Programs 0..n-1 of ``seed`` with the coverage steering (drawn once per test session)."""
    cov: Counter[str] = Counter()
    out = []
    for i in range(n):
        p = program(seed, i, cov)
        cov.update(p.operators)
        cov.update(p.pairs)
        out.append(p)
    return out


def test_markers_name_every_operator() -> None:
    assert sorted(MARKERS) == sorted(vocabulary())


def test_the_same_seed_and_coverage_give_the_same_program() -> None:
    for i in range(5):
        assert program(42, i, {"source": 3}) == program(42, i, {"source": 3})
    assert [program(1, i, {}).text for i in range(4)] != [program(2, i, {}).text for i in range(4)]
    assert render(program(42, 1, {}).spec, title="P0001") == program(42, 1, {}).text


def test_every_vocabulary_operator_is_reached_within_200_programs() -> None:
    seen = Counter(op for p in _programs(5, 200) for op in p.operators)
    assert [op for op in vocabulary() if not seen[op]] == []
    assert seen["source"] and seen["sql-source"]  # both forms


def test_coverage_steers_towards_the_least_covered() -> None:
    # every DataStream operator covered a hundred times: the SQL programs are the news
    covered = {op: 100 for op in MARKERS if not op.startswith(("sql-", "tvf-", "over-", "agg-", "post-", "top-",
                                                               "dedup-", "final-"))}
    steered = [program(9, i, covered).spec["form"] for i in range(12)]
    plain = [program(9, i, {}).spec["form"] for i in range(12)]
    assert steered.count("sql") > plain.count("sql")
    assert steered.count("sql") >= 10


def test_operators_claimed_are_in_the_module_text() -> None:
    for p in _programs(5, 200):
        assert p.operators == operators(p.spec)
        missing = [op for op in p.operators if MARKERS[op] not in p.text]
        assert missing == [], (p.id, missing)
        compile(p.text, p.id, "exec")
        assert ("BATCH_EQUIVALENT" in p.text) == bool(p.spec.get("changelog")), p.id


def test_cells_are_deterministic_and_unique() -> None:
    a = hunt_cells("P0004", 3, ["task", "twice"], ["hashmap", "rocksdb"], ["aligned", "unaligned"])
    assert a == hunt_cells("P0004", 3, ["task", "twice"], ["hashmap", "rocksdb"], ["aligned", "unaligned"])
    keys = [c.key for c in a]
    assert len(set(keys)) == len(keys) and keys[0] == "plan"
    assert {"diff:providers", "diff:partitioning"} <= set(keys)
    json.dumps([c.params for c in a])  # JSON-able


_LOADER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from user import load_user_module, resolve_key, check_sources, _check_records
out = []
for path in sys.argv[3:]:
    mod = load_user_module(path)
    key = resolve_key(mod)
    names = check_sources(mod)
    recs = mod.records(0)
    _check_records(sys.argv[2], recs, names)
    n = sum(len(v) for v in recs.values()) if names else len(recs)
    changes = 0
    for r in ([x for v in recs.values() for x in v] if names else recs):  # the record functions, as Flink calls them
        if getattr(mod, "CHANGELOG", False):
            changes += len(list(mod._changes(r)))
        elif hasattr(mod, "_row"):
            mod._row(r)
        if hasattr(mod, "_clean"):
            mod._clean(r)
    out.append({"module": path, "key": key, "sources": names, "records": n, "changes": changes})
print(json.dumps(out))
"""


def _load_in_flink_env(paths: list[Path], tmp: Path) -> list[dict]:
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        python = find_flink().python
    except InconclusiveError as e:
        pytest.skip(f"no PyFlink environment: {e}")
    p = subprocess.run([str(python), "-I", "-c", _LOADER, str(ROOT / "flink_replay" / "job"), str(tmp), *map(str, paths)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not (tmp / "user-error.json").exists(), (tmp / "user-error.json").read_text()
    return list(json.loads(p.stdout.strip().splitlines()[-1]))


def test_modules_and_their_shrinks_load_through_the_job_module_loader(tmp_path: Path) -> None:
    progs = _programs(5, 200)[:24]
    paths = []
    for p in progs:
        paths.append(tmp_path / f"{p.id}.py")
        paths[-1].write_text(p.text)
    for p in progs[:6]:
        for j, q in enumerate(shrink(p)):
            assert q.spec != p.spec and q.operators == operators(q.spec)
            if j < 3:
                paths.append(tmp_path / f"{p.id}_s{j}.py")
                paths[-1].write_text(q.text)
    # a changelog program with a source drawn without changes (inserts only: records of four fields)
    changelog = next(q for q in _programs(5, 200) if q.spec.get("changelog"))
    spec = dict(changelog.spec, sources=[dict(changelog.spec["sources"][0], changes=0.0),
                                         *changelog.spec["sources"][1:]])
    paths.append(tmp_path / "changelog_inserts_only.py")
    paths[-1].write_text(render(spec, title="inserts only"))
    loaded = _load_in_flink_env(paths, tmp_path)
    assert len(loaded) == len(paths)
    assert loaded[-1]["changes"] >= loaded[-1]["records"]
    for entry, p in zip(loaded, progs, strict=False):
        assert entry["records"] > 0
        assert (entry["sources"] is None) == (len(p.spec["sources"]) == 1)
