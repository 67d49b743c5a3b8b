"""Elastic upstream backup (SPATE): elastic data slices, two-level ACK trimming, scaling, recovery.

Source: Wei, Zhuang, Li, Liu, *Reliable stream data processing for elastic distributed stream
processing systems*, Cluster Computing 2019, §4–§5. Definitions and theorems in our own words:
``specs/elastic.md``. Modules:

* :mod:`pyimpl.elastic.slices` — events, slices ``{k, su, sd}``, split/merge, output queues;
* :mod:`pyimpl.elastic.partition` — key partitions and the split/merge of keyed status;
* :mod:`pyimpl.elastic.operators` — the deterministic keyed operators;
* :mod:`pyimpl.elastic.config` — pipeline, workload, scaling events and the failure;
* :mod:`pyimpl.elastic.rules` — the protocol's replaceable rules and checkpoints;
* :mod:`pyimpl.elastic.reference` — the failure-free oracle and the queue bound;
* :mod:`pyimpl.elastic.simulator` — the seeded simulator (QTP, OAP, Algorithm 1, dedup);
* :mod:`pyimpl.elastic.sweep` — every task failed at every step;
* :mod:`pyimpl.elastic.configio` — the ``rollcheck.elastic/1`` document.
"""

from pyimpl.elastic.config import Config, Failure, ScaleEvent, random_config
from pyimpl.elastic.configio import FORMAT, config_from_dict, config_to_dict, load_config
from pyimpl.elastic.operators import KINDS, apply_operator
from pyimpl.elastic.partition import Partition, contiguous_ranges, repartition_keyed
from pyimpl.elastic.reference import (
    queue_bound,
    reference_output,
    reference_streams,
    retention_rounds,
    source_events,
)
from pyimpl.elastic.rules import (
    REFERENCE_RULES,
    Checkpoint,
    Rules,
    checkpoint_buffer,
    is_duplicate,
    l1_ready,
    split_checkpoint,
)
from pyimpl.elastic.simulator import RunResult, Simulator, simulate
from pyimpl.elastic.slices import (
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
from pyimpl.elastic.sweep import SweepResult, failure_sweep, representative_keys

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
