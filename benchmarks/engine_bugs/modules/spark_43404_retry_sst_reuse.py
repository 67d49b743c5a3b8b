"""Page views counted per page (update mode), a plain streaming aggregation kept in the RocksDB
state store. Zoo entry SPARK-43404.

Nothing in the query is unusual: the bug is in how the RocksDB state store uploads its files when
a task is retried on the same executor after its state store committed. The first attempt uploads
the new SST file under a fresh name and remembers it for that version; the retried attempt writes
an SST file of the same local name and size (same data) but another RocksDB unique id, and the
store reused the first attempt's uploaded file for it. The checkpoint of that version then pairs a
MANIFEST with an SST file of another id, and the next load of that version from the checkpoint (a
new driver, a restarted query) fails with "Mismatch in unique ID on table file". Without a task
retry nothing shows, and on the HDFS-backed store nothing shows at all.
"""

import random

SCHEMA = "page STRING, user STRING"
OUTPUT_MODE = "update"
KEY = ["page"]

PAGES = ["home", "search", "cart", "checkout"]


def batches(seed):
    """Five batches of 12 page views each, pages and users drawn from ``seed``."""
    rng = random.Random(seed)
    return [[(rng.choice(PAGES), f"u{rng.randrange(20)}") for _ in range(12)] for _ in range(5)]


def query(df):
    from pyspark.sql import functions as F

    return df.groupBy("page").agg(F.count("*").alias("views"), F.approx_count_distinct("user").alias("users"))
