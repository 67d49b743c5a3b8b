"""A deliberately broken ``foreachBatch`` sink (a test fixture, not part of the query library): it
*loses* rows of a batch that Spark runs again after a failure.

The sink tries to be exactly-once by deduplicating on the event id rather than on the batch id: it
drops every row whose id it has already written (the ids are kept in ``seen.txt``), then
*replaces* the batch's file ``batch-<id>.json``. When Spark hands it the same batch again (the sink
failed after it wrote, or the driver died after the sink wrote and before ``commits/K``), every row
of the batch is already "seen", and the replaced file is empty: the batch's rows are lost. Spark
documents at-least-once for ``foreachBatch``, so a duplicate would be expected; a lost row is not,
and the matrix must report it as a *finding*, minimise it and write a reproducer
(``tests/test_spark_matrix_finding.py``).

The query is stateless (a projection), so that every run of it is as short as Spark allows.
"""

import json
import os

SCHEMA = "id INT, v STRING"
OUTPUT_MODE = "append"
KEY = ["id"]


def batches(seed):
    """Three batches of two events (ids unique across batches)."""
    return [[(3 * b + i + seed, f"v{b}{i}") for i in range(2)] for b in range(3)]


def query(df):
    return df.select("id", "v")


def sink(batch_df, batch_id, out_dir):
    seen_path = os.path.join(out_dir, "seen.txt")
    seen = set()
    if os.path.exists(seen_path):
        with open(seen_path, encoding="utf-8") as f:
            seen = {int(x) for x in f.read().split()}
    rows = [r.asDict() for r in batch_df.collect() if r["id"] not in seen]  # the bug: dedup by id
    with open(seen_path, "a", encoding="utf-8") as f:
        f.write("".join(f"{r['id']}\n" for r in rows))
    tmp = os.path.join(out_dir, f".batch-{batch_id:05d}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(sorted(rows, key=lambda r: r["id"]), f)
    os.replace(tmp, os.path.join(out_dir, f"batch-{batch_id:05d}.json"))


def read_output(out_dir):
    rows = []
    for name in sorted(os.listdir(out_dir)):
        if name.startswith("batch-"):
            with open(os.path.join(out_dir, name), encoding="utf-8") as f:
                rows += json.load(f)
    return rows
