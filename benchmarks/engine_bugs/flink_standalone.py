"""Standalone reproducer for a zoo job module: PyFlink only, no rollcheck import.

Runs a job module of the ordinary contract (``records(seed)``, ``job(env, source)``, ``KEY``,
optional ``FIELDS``) on whatever apache-flink the interpreter running this script has, and prints
one JSON line: the Flink version, whether the restore from the checkpoint succeeded, the final
output table (the last row per ``KEY``) and the engine's exception if a phase failed::

    python flink_standalone.py MODULE.py [--seed S] [--checkpoints aligned|unaligned]
                               [--forced] [--backend hashmap|rocksdb] [--rescale P1:P2]
                               [--fail-at-record K | --no-failure] [--workdir DIR]

Phase 1 runs the job at parallelism ``P1`` with checkpoints every 200 ms retained on failure and
no restarts; the source (``NumberSequenceSource`` over the record indices, paced) raises at the
first record from ``K`` on that arrives after two checkpoints completed. Phase 2 starts the job again at parallelism ``P2`` from the
latest completed checkpoint of phase 1 and runs it to the end; its output is the table printed.
Each phase is its own process (its own JVM and MiniCluster). With ``--no-failure`` phase 1 runs
the whole input without a failure and its output is the table printed (for a bug that shows with
or without a failure: the table then holds every KEY, not only those updated after a restore).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _config(a: Any, parallelism: int, restore: str | None) -> Any:
    from pyflink.common import Configuration

    c = Configuration()
    cp = Path(a.workdir, "checkpoints").as_uri()
    pairs = {
        "parallelism.default": str(parallelism),
        "execution.checkpointing.interval": "200ms",
        "execution.checkpointing.min-pause": "0ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.unaligned": str(a.checkpoints == "unaligned").lower(),
        "execution.checkpointing.unaligned.enabled": str(a.checkpoints == "unaligned").lower(),
        "execution.checkpointing.aligned-checkpoint-timeout": "0ms",
        "execution.checkpointing.unaligned.forced": str(a.forced).lower(),
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "state.checkpoints.dir": cp,
        "execution.checkpointing.dir": cp,
        "state.backend.type": a.backend,
        "state.backend.incremental": "true",
        "restart-strategy.type": "none",
        "python.fn-execution.bundle.size": "10",
        "python.fn-execution.bundle.time": "20",
        "taskmanager.numberOfTaskSlots": "8",
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "rest.bind-address": "127.0.0.1",
        "rest.address": "127.0.0.1",
    }
    if restore:
        pairs["execution.savepoint.path"] = restore
        pairs["execution.state-recovery.path"] = restore
    for k, v in pairs.items():
        c.set_string(k, v)
    return c


def _phase(a: Any) -> int:
    from pyflink.common import Types
    from pyflink.common.watermark_strategy import WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import MapFunction

    mod = _load(a.module)
    recs = list(mod.records(a.seed))
    p1, p2 = (int(x) for x in a.rescale.split(":"))
    first = a.phase == 1
    env = StreamExecutionEnvironment.get_execution_environment(
        _config(a, p1 if first else p2, None if first else a.restore))
    fail_at = a.fail_at_record if first else -1
    cps = Path(a.workdir, "checkpoints")

    def to_record(i: int) -> Any:
        time.sleep(a.pace)  # paced, so checkpoints complete while the input flows
        # the first record from K on that arrives after two checkpoints completed raises
        if 0 <= fail_at <= i and len(list(cps.glob("*/chk-*/_metadata"))) >= 2:
            raise RuntimeError(f"zoo reproducer: injected failure at record {i}")
        return recs[i]

    source = (env.from_source(NumberSequenceSource(0, len(recs) - 1), WatermarkStrategy.no_watermarks(),
                              "records").map(to_record))
    folder = Path(a.workdir, f"out-{a.phase}")
    folder.mkdir(parents=True, exist_ok=True)

    class WriteLine(MapFunction):
        """Appends each output row to this subtask's file (read back when the phase ends)."""

        def open(self, ctx: Any) -> None:
            self.fh = open(folder / f"part-{ctx.get_index_of_this_subtask()}.jsonl", "a", encoding="utf-8")

        def map(self, r: Any) -> bool:
            self.fh.write(json.dumps(list(r), default=str) + "\n")
            self.fh.flush()
            return False

        def close(self) -> None:
            self.fh.close()

    try:  # building the graph can fail in the engine too (a Table API planner error)
        mod.job(env, source).map(WriteLine(), Types.BOOLEAN()).filter(lambda x: x).print()
        env.execute(f"zoo-phase-{a.phase}")
        error = None
    except Exception as e:  # the engine's exception is the observation
        error = _summary(str(e))
        Path(a.workdir, f"phase-{a.phase}-error.txt").write_text(str(e), encoding="utf-8")
    rows = [json.loads(line) for f in sorted(folder.glob("part-*.jsonl"))
            for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    print("RESULT " + json.dumps({"rows": rows, "error": error}), flush=True)
    return 0


_WRAPPERS = ("JobExecutionException", "Py4JJavaError", "RuntimeException", "ExecutionException",
             "CompletionException", "JobInitializationException", "FlinkRuntimeException",
             "RuntimeError", "Exception")


def _summary(text: str) -> str:
    """The innermost engine exception named in ``text`` that is not a wrapper, else the first line."""
    found = re.findall(r"((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))(?::[ \t]*([^\n]*))?", text)
    inner = [(n, m) for n, m in found if n.rsplit(".", 1)[-1] not in _WRAPPERS]
    if inner:
        causes = [(n, m) for n, m in inner if "zoo reproducer" not in m]
        n, m = (causes or inner)[-1]
        return f"{n}: {m.strip()[:300]}"
    return text.strip().splitlines()[0][:400] if text.strip() else "error"


def _table(mod: Any, rows: list[Any]) -> list[Any]:
    """The final output table: the last row per ``KEY`` (indices or ``FIELDS`` names), sorted."""
    names = list(getattr(mod, "FIELDS", []))
    idx = [names.index(k) if isinstance(k, str) else k for k in mod.KEY]
    last: dict[str, Any] = {}
    for r in rows:
        last[json.dumps([r[i] for i in idx], default=str)] = r
    return sorted(last.values(), key=lambda r: json.dumps(r, default=str))


def _latest_checkpoint(folder: Path) -> str | None:
    best = None
    for meta in folder.glob("*/chk-*/_metadata"):
        n = int(meta.parent.name.split("-")[1])
        if best is None or n > best[0]:
            best = (n, meta.parent)
    return str(best[1]) if best else None


def _run_phase(a: Any, phase: int, restore: str | None) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), a.module, "--phase", str(phase), "--seed", str(a.seed),
           "--checkpoints", a.checkpoints, *(["--forced"] if a.forced else []), "--backend", a.backend, "--rescale", a.rescale,
           "--fail-at-record", str(a.fail_at_record), "--workdir", a.workdir, "--pace", str(a.pace)]
    if restore:
        cmd += ["--restore", restore]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    return {"rows": [], "error": _summary(p.stderr[-4000:]) or f"phase {phase} exited {p.returncode}"}


def main(argv: list[str] | None = None) -> int:
    """Run both phases, print one JSON line; exit 0 whether or not a phase failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoints", default="unaligned", choices=["aligned", "unaligned"])
    ap.add_argument("--forced", action="store_true",
                    help="unaligned checkpoints forced (also on edges Flink would align)")
    ap.add_argument("--backend", default="hashmap", choices=["hashmap", "rocksdb"])
    ap.add_argument("--rescale", default="2:2", metavar="P1:P2")
    ap.add_argument("--fail-at-record", type=int, default=None)
    ap.add_argument("--no-failure", action="store_true",
                    help="one run over the whole input, no failure, no restore: its output is the table")
    ap.add_argument("--pace", type=float, default=0.03, help="seconds per record in the source map")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--phase", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--restore", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    mod = _load(a.module)
    if a.no_failure:
        a.fail_at_record = -1
    elif a.fail_at_record is None:
        a.fail_at_record = len(list(mod.records(a.seed))) // 2
    if a.phase:
        return _phase(a)
    import pyflink.version

    own = a.workdir is None
    a.workdir = a.workdir or tempfile.mkdtemp(prefix="zoo-flink-")
    t0 = time.time()
    one = _run_phase(a, 1, None)
    chk = _latest_checkpoint(Path(a.workdir, "checkpoints"))
    result: dict[str, Any] = {"engine": "flink", "version": pyflink.version.__version__,
                              "checkpoints": a.checkpoints, "forced": a.forced, "backend": a.backend, "rescale": a.rescale,
                              "no_failure": a.no_failure, "phase1_error": one["error"], "restored_from": chk}
    if a.no_failure:
        result.update(restore_ok=None, restored_from=None, error=one["error"], rows=_table(mod, one["rows"]))
    elif chk is None:
        result.update(restore_ok=None, rows=[], error="no completed checkpoint before the failure")
    else:
        two = _run_phase(a, 2, chk)
        result.update(restore_ok=two["error"] is None, error=two["error"], rows=_table(mod, two["rows"]))
    result["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(result, sort_keys=True))
    if own:
        shutil.rmtree(a.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
