"""Elastic upstream backup (SPATE): elastic data slices, two-level ACK trimming, scaling, recovery.

Source: Wei, Zhuang, Li, Liu, *Reliable stream data processing for elastic distributed stream
processing systems*, Cluster Computing 2019, §4–§5. Definitions and theorems in our own words:
``specs/elastic.md``. Modules:

* :mod:`rollcheck.pyimpl.elastic.slices` — events, slices ``{k, su, sd}``, split/merge, output queues;
* :mod:`rollcheck.pyimpl.elastic.partition` — key partitions and the split/merge of keyed status;
* :mod:`rollcheck.pyimpl.elastic.operators` — the deterministic keyed operators;
* :mod:`rollcheck.pyimpl.elastic.config` — pipeline, workload, scaling events and the failure;
* :mod:`rollcheck.pyimpl.elastic.rules` — the protocol's replaceable rules and checkpoints;
* :mod:`rollcheck.pyimpl.elastic.reference` — the failure-free oracle and the queue bound;
* :mod:`rollcheck.pyimpl.elastic.simulator` — the seeded simulator (QTP, OAP, Algorithm 1, dedup);
* :mod:`rollcheck.pyimpl.elastic.sweep` — every task failed at every step;
* :mod:`rollcheck.pyimpl.elastic.configio` — the ``rollcheck.elastic/1`` document.
"""

from rollcheck.pyimpl.elastic.config import Config, Failure, ScaleEvent, random_config
from rollcheck.pyimpl.elastic.configio import FORMAT, config_from_dict, config_to_dict, load_config
from rollcheck.pyimpl.elastic.operators import KINDS, apply_operator
from rollcheck.pyimpl.elastic.partition import Partition, contiguous_ranges, repartition_keyed
from rollcheck.pyimpl.elastic.reference import (
    queue_bound,
    reference_output,
    reference_streams,
    retention_rounds,
    source_events,
)
from rollcheck.pyimpl.elastic.rules import (
    REFERENCE_RULES,
    Checkpoint,
    Rules,
    checkpoint_buffer,
    is_duplicate,
    l1_ready,
    split_checkpoint,
)
from rollcheck.pyimpl.elastic.simulator import RunResult, Simulator, simulate
from rollcheck.pyimpl.elastic.slices import (
    Event,
    OutputQueue,
    Slice,
    SliceRecord,
    last_seq,
    merge_records,
    merge_slices,
    split_records,
    split_slice,
)
from rollcheck.pyimpl.elastic.sweep import SweepResult, failure_sweep, representative_keys

__all__ = [
    "Config", "Failure", "ScaleEvent", "random_config",
    "FORMAT", "config_from_dict", "config_to_dict", "load_config",
    "KINDS", "apply_operator", "Partition", "contiguous_ranges", "repartition_keyed",
    "queue_bound", "reference_output", "reference_streams", "retention_rounds", "source_events",
    "REFERENCE_RULES", "Checkpoint", "Rules", "checkpoint_buffer", "is_duplicate", "l1_ready",
    "split_checkpoint", "RunResult", "Simulator", "simulate",
    "Event", "OutputQueue", "Slice", "SliceRecord", "last_seq", "merge_records", "merge_slices",
    "split_records", "split_slice", "SweepResult", "failure_sweep", "representative_keys",
]
