"""Standalone reproducers of the Flink hunt's planning and differential findings (pyflink only).

A fault cell's finding gets the matrix's reproducer (:mod:`rollcheck.flink_replay.reproducer`).
The other cells compare runs without a failure, or plan the job; their script carries the job
module's text and:

- ``diff:providers``: runs the job to its end on each state backend, failure-free, and compares
  the final tables (the last row of each KEY);
- ``diff:partitioning``: the same at parallelism 1 and 2;
- ``plan``: builds the job's graph and prints ``JOB FAILED`` with the exception when Flink fails.

It prints a ``KEY ...`` line per difference and exits 1 when it showed the finding, 0 when not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import HuntCell, Program

__all__ = ["write_differential_reproducer", "TEMPLATE"]

TEMPLATE = '''"""Standalone reproducer (pyflink only): {title}

Runs the job below without any failure in each configuration and compares the final tables (the
last row of each KEY). Exit 1: they differ (printed as KEY lines), 0: they agree.
"""
import json
import sys
import types

from pyflink.common import Configuration, Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

JOB = {job!r}
CONFIGS = {configs!r}  # name -> (state backend, parallelism)
PLAN_ONLY = {plan_only!r}

job = types.ModuleType("job")
exec(compile(JOB, "job.py", "exec"), job.__dict__)
KEY = [job.FIELDS.index(k) if isinstance(k, str) else k for k in job.KEY]


def streams(env, records):
    def stream(rows):
        n = len(rows)
        return env.from_collection(list(range(max(1, n))), type_info=Types.LONG()) \\
            .filter(lambda i: i < n).map(lambda i: rows[int(i)])
    if isinstance(records, dict):
        return {{name: stream(records.get(name) or []) for name in job.SOURCES}}
    return stream(records)


def run(backend, parallelism):
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    out = job.job(env, streams(env, job.records(0)))
    rows = out.map(lambda r: json.dumps(list(r)), output_type=Types.STRING())
    if PLAN_ONLY:
        rows.print()
        env.get_execution_plan()
        return {{}}
    table = {{}}
    with rows.execute_and_collect() as results:
        for text in results:
            row = json.loads(text)
            table[json.dumps([row[i] for i in KEY])] = row
    return table


def main():
    tables = {{}}
    for name, (backend, parallelism) in CONFIGS.items():
        try:
            tables[name] = run(backend, parallelism)
        except Exception as e:  # noqa: BLE001 - what Flink raised is the finding
            print(f"JOB FAILED ({{name}}): {{type(e).__name__}}: {{str(e).splitlines()[0][:300]}}")
            return 1
    if PLAN_ONLY:
        print("planned: no failure")
        return 0
    names = list(tables)
    first, shown = tables[names[0]], 0
    for other in names[1:]:
        for key in sorted(set(first) | set(tables[other])):
            if first.get(key) != tables[other].get(key):
                print(f"KEY {{key}}: {{names[0]}} ends with {{first.get(key)}}, {{other}} with {{tables[other].get(key)}}")
                shown += 1
    print(f"{{len(first)}} KEY(s) compared, {{shown}} difference(s)")
    return 1 if shown else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def write_differential_reproducer(program: Program, cell: HuntCell, dest: Path) -> Path:
    """Write the reproducer of ``cell`` (a ``plan`` or ``diff:*`` cell) of ``program`` to ``dest``."""
    check = str(cell.params.get("check") or "")
    compare = cell.params.get("compare") or {}
    if cell.params.get("kind") == "plan":
        configs, title = {"plan": ("hashmap", 2)}, f"{program.id}: Flink plans the job"
    elif check == "partitioning-differential":
        parts: list[dict[str, Any]] = list(compare.values())
        backend = str(parts[0]["params"]["backend"]) if parts else "hashmap"
        configs = {"parallelism 1": (backend, 1), "parallelism 2": (backend, 2)}
        title = f"{program.id}: the same final table at parallelism 1 and 2 ({backend})"
    else:
        configs = {name: (name, 2) for name in (compare or {"hashmap": 0, "rocksdb": 0})}
        title = f"{program.id}: the same final table on the state backends {', '.join(configs)}"
    text = TEMPLATE.format(title=title, job=program.text, configs=configs,
                           plan_only=cell.params.get("kind") == "plan")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    tmp.write_text(text)
    tmp.replace(dest)
    return dest
