"""A ledger ``foreachBatch`` sink declared at-least-once that appends a re-run batch three times.

Every batch's payments are appended to a ledger; a batch id the sink has seen before (Spark runs the
batch again after a failure) is appended three times. ``read_output`` reads the ledger back as one
balance per user, so no output row is a copy: the extra copies show only as changed balances.
At-least-once allows one more copy per re-delivery after a failure, not three: the replay must find
the output outside the at-least-once envelope (``tests/test_seams_envelope.py``).
"""

import json
import os
import random

SCHEMA = "user STRING, amount INT"
OUTPUT_MODE = "append"
KEY = ["user"]
SINK_GUARANTEE = "at-least-once"


def batches(seed):
    """Four batches of three payments by four users."""
    rng = random.Random(seed)
    return [[(rng.choice(["ann", "bob", "cy", "dee"]), rng.randrange(1, 50)) for _ in range(3)] for _ in range(4)]


def query(df):
    return df.select("user", "amount")


def sink(batch_df, batch_id, out_dir):
    seen_path = os.path.join(out_dir, "seen.txt")
    seen = set()
    if os.path.exists(seen_path):
        with open(seen_path, encoding="utf-8") as f:
            seen = {int(x) for x in f.read().split()}
    times = 3 if batch_id in seen else 1  # the bug: a re-run batch is appended three times
    rows = [{"user": r["user"], "amount": r["amount"]} for r in batch_df.collect()]
    with open(os.path.join(out_dir, "ledger.jsonl"), "a", encoding="utf-8") as f:
        for _ in range(times):
            for r in rows:
                f.write(json.dumps(r) + "\n")
    with open(seen_path, "a", encoding="utf-8") as f:
        f.write(f"{batch_id}\n")


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
