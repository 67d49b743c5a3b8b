"""A ``foreachBatch`` sink that appends every batch to a ledger, read back as balances per user.

The way a downstream consumer reads an append-only ledger: ``read_output`` derives one row per
user (the sum of the user's ledger entries), so a batch that Spark hands the sink again after a
failure shows as a changed balance, not as a duplicated row. The sink does not deduplicate by
batch id, so it is at-least-once; this module does not say so (exactly-once, the default): under a
sink failure the replay is not conformant, and the matrix attributes it to the module, with Spark's
documentation of foreachBatch cited (``expected_by_engine``), from the trace's record of which batch
ids the sink was handed in which attempt. ``tests/test_sink_guarantee.py`` records it, and a copy
declaring ``SINK_GUARANTEE = "at-least-once"``, which is conformant.
"""

import json
import os
import random

SCHEMA = "user STRING, amount INT"
OUTPUT_MODE = "append"
KEY = ["user"]


def batches(seed):
    """Four batches of three payments by four users."""
    rng = random.Random(seed)
    return [[(rng.choice(["ann", "bob", "cy", "dee"]), rng.randrange(1, 50)) for _ in range(3)] for _ in range(4)]


def query(df):
    return df.select("user", "amount")


def sink(batch_df, batch_id, out_dir):
    with open(os.path.join(out_dir, "ledger.jsonl"), "a", encoding="utf-8") as f:
        for r in batch_df.collect():
            f.write(json.dumps({"user": r["user"], "amount": r["amount"]}) + "\n")


def read_output(out_dir):
    path = os.path.join(out_dir, "ledger.jsonl")
    balances = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    e = json.loads(line)
                    balances[e["user"]] = balances.get(e["user"], 0) + e["amount"]
    return [{"user": u, "balance": b} for u, b in sorted(balances.items())]
