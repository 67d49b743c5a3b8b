"""How many hunt programs Spark accepts: each run once in one local session, counted by outcome.

:func:`try_program` writes a program's module, loads it with
:func:`~rollcheck.spark_replay.query.module.load_query` (its contract checks), starts its query on
file streams with a ``foreachBatch`` sink that collects each micro-batch (so every batch really
runs), feeds its batches one micro-batch at a time as a recording does, and stops it. The outcome
is ``accepted``, ``rejected`` (Spark's analyser refused the plan when the query started) or
``failed`` (it started and a micro-batch raised), with the exception's class and first line.

``python -m rollcheck.spark_replay.hunt.accept --release 3.5.3 --programs 100 --seed 1`` prints
the counts (and one JSON line per program with ``--json``).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import Program
from rollcheck.spark_replay.query.drive import register_by_value
from rollcheck.spark_replay.query.files import json_value
from rollcheck.spark_replay.query.module import load_query

__all__ = ["try_program", "main"]


def _write(folder: Path, b: int, rows: list[tuple[Any, ...]], cols: list[str]) -> None:
    tmp = folder / f".batch-{b:05d}.tmp"
    tmp.write_text("".join(json.dumps(dict(zip(cols, map(json_value, r), strict=True))) + "\n" for r in rows),
                   encoding="utf-8")
    tmp.rename(folder / f"batch-{b:05d}.json")


def try_program(spark: Any, program: Program, workdir: Path) -> dict[str, Any]:
    """Run ``program`` once; ``{"id", "outcome", "exception", "message", "stateful", "seconds"}``."""
    t0 = time.monotonic()
    work = workdir / program.id
    work.mkdir(parents=True)
    module = work / f"{program.id}.py"
    module.write_text(program.text, encoding="utf-8")
    uq = load_query(str(module))
    register_by_value(uq)  # applyInPandasWithState's function reaches the Python workers
    data = uq.batches(0)
    out: dict[str, Any] = {"id": program.id, "outcome": "accepted", "exception": None, "message": "",
                           "stateful": sum(1 for k in program.operators if _stateful(k))}
    for n in uq.sources:
        (work / "in" / n).mkdir(parents=True)
    dfs = {n: (spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1)
               .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").option("mode", "FAILFAST")
               .json(str(work / "in" / n))) for n, ddl in uq.sources.items()}
    q = None
    try:
        df = uq.run_query(dfs)
        q = (df.writeStream.outputMode(uq.output_mode).option("checkpointLocation", str(work / "cp"))
             .foreachBatch(lambda d, _bid: d.collect()).start())
    except Exception as e:  # noqa: BLE001 - Spark's refusal is the measurement
        out.update(outcome="rejected", exception=type(e).__name__, message=_why(e))
    if q is not None:
        try:
            first = next(iter(uq.sources))
            for b, batch in enumerate(data):
                for n, rows in (batch or {first: []}).items():
                    _write(work / "in" / n, b, rows, uq.source_columns(n))
                q.processAllAvailable()
        except Exception as e:  # noqa: BLE001 - a failed micro-batch is the measurement
            out.update(outcome="failed", exception=type(e).__name__,
                       message=_why(e))
        finally:
            q.stop()
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


_CAUSE = re.compile(r"([\w.]+(?:Exception|Error)): (.+)")
_WRAPPERS = ("STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR", "StreamingQueryException")


def _why(e: BaseException) -> str:
    """The innermost cause named in an exception's text (Spark wraps a batch's failure twice)."""
    text = str(e).strip()
    causes = [m.group(1).rsplit(".", 1)[-1] + ": " + m.group(2) for line in text.splitlines()
              if (m := _CAUSE.search(line)) and not any(w in line for w in _WRAPPERS)]
    return (causes[-1] if causes else (text.splitlines() or [""])[0])[:300]


def _stateful(kind: str) -> bool:
    return kind.startswith(("window-", "join-", "dedup", "pandas")) and kind != "join-static" or kind == "group-by"


def main(argv: list[str] | None = None) -> int:
    """Measure the acceptance of ``--programs`` programs of ``--release`` rules (``--seed``)."""
    from rollcheck.spark_replay.hunt.grammar import program
    from rollcheck.spark_replay.session import spark_session

    ap = argparse.ArgumentParser(prog="hunt_accept")
    ap.add_argument("--release", default="3.5.3")
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    counts: collections.Counter[str] = collections.Counter()
    why: collections.Counter[str] = collections.Counter()
    multi = 0
    with spark_session(conf={"spark.sql.session.timeZone": "UTC"}) as spark, \
            tempfile.TemporaryDirectory(prefix="hunt-accept-") as tmp:
        cov: collections.Counter[str] = collections.Counter()
        for i in range(a.start + a.programs):  # the programs before --start steer as in a hunt
            p = program(a.seed, i, cov, a.release)
            cov.update(set(p.operators) | set(p.pairs))
            if i < a.start:
                continue
            r = try_program(spark, p, Path(tmp))
            counts[r["outcome"]] += 1
            multi += r["outcome"] == "accepted" and r["stateful"] >= 2
            if r["outcome"] != "accepted":
                why[f"{r['exception']}: {r['message'][:120]}"] += 1
            if a.json:
                print(json.dumps(dict(r, operators=list(p.operators))), flush=True)
    print(json.dumps({"release": a.release, "seed": a.seed, "programs": a.programs, **counts,
                      "accepted_with_2_stateful": multi, "why": dict(why.most_common())}, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
