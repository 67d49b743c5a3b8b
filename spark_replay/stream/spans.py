"""The span model of a streaming restart: batch ids as logical times (Falkirk Wheel §3).

:func:`streaming_span_system` builds the ``rollcheck.spans/1`` instance of a restart; its greatest
solution (:func:`predict_resume`) is the batch the query must resume at and the version each state
store must restore. The ``resume-prediction`` check of ``rollcheck spark replay`` compares Spark's
observed values with it.

References
----------
Falkirk Wheel paper §3 (spans, the resume point of a restart).
"""

from __future__ import annotations

from typing import Any

__all__ = ["streaming_span_system", "predict_resume"]


def streaming_span_system(partitions: int | list[str], planned: set[int], committed: set[int],
                          versions: dict[Any, set[int]]) -> dict[str, Any]:
    """The ``rollcheck.spans/1`` instance of a streaming restart, epochs as logical times.

    Processors: ``source`` (the offset log: span c_k = epochs 0..k-1 planned), ``state<s>`` per
    state store instance ``s`` (an int partition, or a :func:`~rollcheck.spark_replay.checkpoint.watcher.state_key`;
    c_v = epochs folded into state version v, for the versions written whose batch committed:
    Spark treats version v as final only once ``commits/v-1`` exists) and ``sink`` (c_k = the
    committed batches 0..k-1). The driver restart fails every processor (no ⊤).
    Edges: ``source → state<s>``: the file source is replayable, so it discards nothing
    (T_D = ∅) and φ(c_k) = epochs < k; ``state<s> → sink``: once a state version v is final the
    outputs of the epochs < v are never produced again (T_D(c_v) = φ(c_v) = epochs < v).
    The solution's ``sink`` index is the resume batch, ``state<s>``'s the restored version.

    Parameters
    ----------
    partitions : int or list of str
        The state store instances (a count or their keys).
    planned : set of int
        The planned batches.
    committed : set of int
        The committed batches.
    versions : dict
        State instance -> the state versions written.

    Returns
    -------
    dict
        The ``rollcheck.spans/1`` document.

    Examples
    --------
    >>> from rollcheck.pyimpl.spans import solve, system_from_dict
    >>> s = streaming_span_system(1, {0, 1, 2}, {0, 1}, {0: {1, 2, 3}})
    >>> solve(system_from_dict(s))
    {'source': 3, 'state0': 2, 'sink': 2}

    References
    ----------
    Falkirk Wheel paper §3 (span systems and their greatest solution).
    """
    def ep(k: int) -> list[str]:
        return [f"b{i}" for i in range(k)]

    keys: list[Any] = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    n_planned = 0
    while n_planned in planned:
        n_planned += 1
    n_comm = 0
    while n_comm in committed:
        n_comm += 1
    procs: dict[str, Any] = {"source": {"chain": [ep(k) for k in range(n_planned + 1)]}}
    edges: list[dict[str, Any]] = []
    for p in keys:
        have = versions.get(p, set())
        top = 0
        while top + 1 <= n_comm and top + 1 in have:
            top += 1
        procs[f"state{p}"] = {"chain": [ep(v) for v in range(top + 1)]}
        edges.append({"name": f"in{p}", "src": "source", "dst": f"state{p}",
                      "discarded": [[] for _ in range(n_planned + 1)],
                      "processed": ep(n_planned), "phi": [ep(k) for k in range(n_planned + 1)]})
        edges.append({"name": f"out{p}", "src": f"state{p}", "dst": "sink",
                      "discarded": [ep(v) for v in range(top + 1)],
                      "processed": ep(n_comm), "phi": [ep(v) for v in range(top + 1)]})
    procs["sink"] = {"chain": [ep(k) for k in range(n_comm + 1)]}
    return {"format": "rollcheck.spans/1", "processors": procs, "edges": edges}


def predict_resume(keys: list[str], planned: set[int], committed: set[int],
             versions: dict[str, set[int]]) -> tuple[int, dict[str, int]]:
    """The span model's resume batch and restored state version per state store ``keys``.

    Parameters
    ----------
    keys : list of str
        The state store instances.
    planned : set of int
        The planned batches.
    committed : set of int
        The committed batches.
    versions : dict
        State instance -> the state versions written.

    Returns
    -------
    tuple of (int, dict)
        The resume batch; instance -> restored state version.
    """
    from rollcheck.pyimpl.spans import solve, system_from_dict

    sol = solve(system_from_dict(streaming_span_system(keys, planned, committed, versions)))
    return int(sol["sink"]), {k: int(sol[f"state{k}"]) for k in keys}
