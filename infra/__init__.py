"""rollcheck's infrastructure layer: what runs engines and children, not what judges them.

The oracle (:mod:`rollcheck.pyimpl`) imports nothing of ours; this layer imports only the oracle,
and the engine adapters (:mod:`rollcheck.spark_replay`, :mod:`rollcheck.flink_replay`) build on
both. It holds the engine-neutral matrix core (:mod:`rollcheck.infra.matrix`), the hunt core
(:mod:`rollcheck.infra.hunt`), child processes that die with rollcheck
(:mod:`rollcheck.infra.children`), bounded calls into user code (:mod:`rollcheck.infra.calllimit`),
files that are never left half-written (:mod:`rollcheck.infra.partialfile`) and the engine release
environments (:mod:`rollcheck.infra.release_envs`).
"""
