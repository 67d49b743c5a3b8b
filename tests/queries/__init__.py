"""Real Structured Streaming queries written only against rollcheck's query contract.

Each module defines ``SCHEMA``, ``batches(seed)``, ``query(df)``, ``OUTPUT_MODE`` and ``KEY`` (and
optionally ``sink``/``read_output``); ``tests/test_spark_query.py`` chaos-tests each of them under
task, sink and kill failures (see ``docs/your-query.md``).
"""
