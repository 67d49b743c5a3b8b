"""Elastic upstream backup (SPATE): elastic data slices, two-level ACK trimming, scaling, recovery.

Source: Wei, Zhuang, Li, Liu, *Reliable stream data processing for elastic distributed stream
processing systems*, Cluster Computing 2019, §4–§5. Definitions and theorems in our own words:
``specs/elastic.md``. Modules:

* :mod:`pyimpl.elastic.slices` — events, slices ``{k, su, sd}``, split/merge, output queues;
* :mod:`pyimpl.elastic.partition` — key partitions and the split/merge of keyed status;
* :mod:`pyimpl.elastic.operators` — the deterministic keyed operators;
* :mod:`pyimpl.elastic.configio` — the ``rollcheck.elastic/1`` document;
* :mod:`pyimpl.elastic.simulator` — the seeded simulator (QTP, OAP, Algorithm 1, dedup) and the
  failure-free oracle.
"""

from pyimpl.elastic.configio import FORMAT, config_from_dict, config_to_dict, load_config
from pyimpl.elastic.operators import KINDS, apply_operator
from pyimpl.elastic.partition import Partition, contiguous_ranges, repartition_keyed
from pyimpl.elastic.simulator import (
    REFERENCE_RULES,
    Checkpoint,
    Config,
    Failure,
    Rules,
    RunResult,
    ScaleEvent,
    Simulator,
    SweepResult,
    checkpoint_buffer,
    failure_sweep,
    is_duplicate,
    l1_ready,
    queue_bound,
    random_config,
    reference_output,
    reference_streams,
    representative_keys,
    retention_rounds,
    simulate,
    source_events,
    split_checkpoint,
)
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

__all__ = [
    "FORMAT", "config_from_dict", "config_to_dict", "load_config",
    "KINDS", "apply_operator", "Partition", "contiguous_ranges", "repartition_keyed",
    "REFERENCE_RULES", "Checkpoint", "Config", "Failure", "Rules", "RunResult", "ScaleEvent",
    "Simulator", "SweepResult", "failure_sweep", "representative_keys", "checkpoint_buffer", "is_duplicate", "l1_ready", "queue_bound", "random_config",
    "reference_output", "reference_streams", "retention_rounds", "simulate", "source_events", "split_checkpoint",
    "Event", "OutputQueue", "Slice", "SliceRecord", "last_seq", "merge_records", "merge_slices",
    "split_records", "split_slice",
]
