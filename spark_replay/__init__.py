"""Spark record and replay: PySpark jobs and a user's query recorded with injected failures.

The recordings are replayed against the models (``rollcheck spark ...``). One subpackage per
concept:

- :mod:`~rollcheck.spark_replay.checkpoint`: the checkpoint folder, read, validated and watched;
- :mod:`~rollcheck.spark_replay.faults`: the injected failures (kill points, retries, cluster faults);
- :mod:`~rollcheck.spark_replay.stream`: the checks every streaming trace gets;
- :mod:`~rollcheck.spark_replay.jobs`: rollcheck's own jobs (word count, message passing, sweeps);
- :mod:`~rollcheck.spark_replay.oracles`: the oracles that distrust the engine;
- :mod:`~rollcheck.spark_replay.query`: a user's query, loaded, recorded and checked;
- :mod:`~rollcheck.spark_replay.replay`: the conformance replay of recorded traces;
- :mod:`~rollcheck.spark_replay.matrix`: the chaos matrix;
- :mod:`~rollcheck.spark_replay.hunt`: Spark's side of the hunt.

The modules at the top serve them all: the trace format, the Spark session, driver supervision,
the standalone cluster, the release environments, the shared reference and the tampered traces.
"""
