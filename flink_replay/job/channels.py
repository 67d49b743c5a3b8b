"""The channel state of a retained checkpoint, read from its ``_metadata`` through Flink's own loader.

An unaligned checkpoint stores the data in flight with the operators' state: per subtask, the
input channels' buffers (``getInputChannelState``) and the output subpartitions' buffers
(``getResultSubpartitionState``). :func:`channel_state` loads the checkpoint's metadata with
``org.apache.flink.runtime.checkpoint.Checkpoints.loadCheckpointMetadata`` in the job process's
JVM (through PyFlink's gateway) and sums those handles' sizes per operator and subtask: the trace
then proves whether the restored checkpoint held data in flight at all.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``main.py``; like it, it
imports only the standard library and ``pyflink``.
"""

from __future__ import annotations

import os

__all__ = ["channel_state", "local_path"]


def local_path(pointer: str) -> str:
    """The local folder of a checkpoint pointer (``file:/a/chk-3`` or ``file:///a/chk-3``).

    Examples
    --------
    >>> local_path("file:///tmp/x/chk-3"), local_path("file:/tmp/x/chk-3"), local_path("/tmp/x")
    ('/tmp/x/chk-3', '/tmp/x/chk-3', '/tmp/x')
    """
    if pointer.startswith("file:"):
        rest = pointer[len("file:"):]
        return "/" + rest.lstrip("/")
    return pointer


def _each(collection):
    """The elements of a Java collection (through its iterator)."""
    it = collection.iterator()
    while it.hasNext():
        yield it.next()


def _sizes(collection) -> tuple[int, int]:
    """(bytes, handles) of a collection of channel state handles."""
    total = count = 0
    for h in _each(collection):
        total += int(h.getStateSize())
        count += 1
    return total, count


def channel_state(pointer: str, checkpoint: int | None) -> dict:
    """The channel state the checkpoint at ``pointer`` holds, per operator subtask.

    Parameters
    ----------
    pointer : str
        The retained checkpoint's external pointer (its folder).
    checkpoint : int or None
        Its id, recorded beside the result.

    Returns
    -------
    dict
        Every operator subtask with in-flight data (``input_bytes``/``output_bytes`` and their handle
        counts), the totals, the operators' parallelism; ``error`` (one line) when the metadata could
        not be read.
    """
    from pyflink.java_gateway import get_gateway

    path = os.path.join(local_path(pointer), "_metadata")
    out: dict = {"checkpoint": checkpoint, "path": pointer, "input_bytes": 0, "output_bytes": 0, "holders": [],
                 "parallelism": None}
    try:
        jvm = get_gateway().jvm
        stream = jvm.java.io.DataInputStream(jvm.java.io.FileInputStream(path))
        try:
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            meta = jvm.org.apache.flink.runtime.checkpoint.Checkpoints.loadCheckpointMetadata(stream, loader, pointer)
        finally:
            stream.close()
        out["checkpoint"] = int(meta.getCheckpointId())
        pars = set()
        for op in _each(meta.getOperatorStates()):
            states = op.getSubtaskStates()
            for idx in _each(states.keySet()):
                st = states.get(idx)
                ib, ih = _sizes(st.getInputChannelState())
                ob, oh = _sizes(st.getResultSubpartitionState())
                if ib or ob:
                    pars.add(int(op.getParallelism()))
                    out["input_bytes"] += ib
                    out["output_bytes"] += ob
                    out["holders"].append(f"{op.getOperatorID().toHexString()}/{int(idx)} of {int(op.getParallelism())}: "
                                          f"in {ib} B ({ih} handles), out {ob} B ({oh} handles)")
        out["parallelism"] = max(pars) if pars else None
    except Exception as e:  # noqa: BLE001 - the reason goes into the trace: the check is then unchecked
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    return out
