"""One pass over a Spark streaming trace: :class:`StreamView`, what every streaming check reads.

The view is fed event by event (planned and committed batches, state versions, sink writes,
failures, restarts, progress and the end-of-run records) and notes the first commit-protocol and
resume problems found while reading; :func:`check_verdict` turns a decided check into a
:class:`~rollcheck.pyimpl.verdict.Check`, :func:`canon_row` is a row's canonical text (rows are
compared as text). Event kinds are read with or without the ``spark.`` prefix (older traces have
none).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.checkpoint.watcher import base_kind, state_key
from rollcheck.spark_replay.stream.spans import predict_resume

__all__ = ["StreamView", "END_KINDS", "check_verdict", "canon_row"]


#: The kinds of the end-of-run records a streaming trace closes with.
END_KINDS = ("final_state", "sink_final", "side_channel", "state_crosscheck", "reference", "output_final",
         "state_final", "sink_envelope", "input_files", "end")


def _field(e: dict[str, Any], name: str, typ: type | tuple[type, ...], source: str | None) -> Any:
    v = e.get(name)
    if not isinstance(v, typ) or isinstance(v, bool) and typ is int:
        raise InvalidInputError(f"event seq {e['seq']} ({e['kind']}): field {name!r} missing or mistyped",
                                source=source, location=f"line {e.get('_line')} (seq {e['seq']})")
    return v


@dataclass
class StreamView:
    """One pass over a streaming trace, fed event by event.

    What every check needs, with the first problems found while reading (a check reports them).
    """

    header: dict[str, Any]
    source: str | None
    n_batches: int
    requested: tuple[str, int] | None
    partitions: list[str] | None
    planned: dict[int, list[str]] = field(default_factory=dict)
    planned_seq: dict[int, int] = field(default_factory=dict)
    committed: list[int] = field(default_factory=list)
    versions: dict[str, set[int]] = field(default_factory=dict)
    sink_writes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    restarts: list[dict[str, Any]] = field(default_factory=list)
    #: restarts that failed before a batch reached the sink (``failed``: the engine's exception;
    #: nothing restored to compare with the span model, ``oracles.recovery_succeeded`` judges them)
    failed_restarts: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    ends: dict[str, dict[str, Any]] = field(default_factory=dict)
    commit_bad: tuple[int, str] | None = None
    resume_bad: tuple[int, str] | None = None
    last_seq: int = 0
    _sink_in_attempt: set[tuple[int, int]] = field(default_factory=set)
    _snapshot: tuple[set[int], set[int], dict[str, set[int]]] | None = None

    @property
    def ended(self) -> bool:
        """Whether the trace reached its ``end`` record."""
        return "end" in self.ends

    def _fail_commit(self, e: dict[str, Any], msg: str) -> None:
        if self.commit_bad is None:
            self.commit_bad = (e["seq"], msg)

    def feed(self, e: dict[str, Any]) -> None:
        """Read one event (derived core events of the adapter are skipped)."""
        if e.get("derived"):
            return
        self.last_seq = e["seq"]
        k = base_kind(e["kind"])
        src = self.source
        if k == "batch_planned":
            b = _field(e, "batch", int, src)
            if b in self.planned:
                self._fail_commit(e, f"batch {b} planned twice")
            elif b != len(self.planned):
                self._fail_commit(e, f"batch {b} planned, expected batch {len(self.planned)}")
            elif b > 0 and (b - 1) not in self.committed:
                self._fail_commit(e, f"batch {b} planned while batch {b - 1} is not committed")
            self.planned[b] = list(e.get("files", []))
            self.planned_seq[b] = e["seq"]
        elif k == "state_committed":
            _field(e, "partition", int, src)
            self.versions.setdefault(state_key(e), set()).add(_field(e, "version", int, src))
        elif k == "sink_written":
            b = _field(e, "batch", int, src)
            if b not in self.planned:
                self._fail_commit(e, f"sink written for batch {b}, which was never planned")
            elif b in self.committed:
                self._fail_commit(e, f"sink written again for committed batch {b}")
            self._sink_in_attempt.add((b, e.get("attempt", 1)))
            self.sink_writes.append(e)
        elif k == "batch_committed":
            b = _field(e, "batch", int, src)
            if b != len(self.committed):
                self._fail_commit(e, f"batch {b} committed, expected batch {len(self.committed)}")
            elif (b, e.get("attempt", 1)) not in self._sink_in_attempt:
                self._fail_commit(e, f"batch {b} committed without a sink write in attempt {e.get('attempt', 1)}")
            self.committed.append(b)
        elif k == "failure":
            self.failures.append(e)
        elif k == "attempt_start":
            self._snapshot = (set(self.planned), set(self.committed), {p: set(x) for p, x in self.versions.items()})
        elif k == "restart" and e.get("failed"):
            self.failed_restarts.append(e)
        elif k == "restart":
            self.restarts.append(e)
            if self._snapshot is None:
                if self.resume_bad is None:
                    self.resume_bad = (e["seq"], "restart without an attempt start")
                return
            got_v = {str(p): x for p, x in (e.get("restored_versions") or {}).items()}
            keys = self.partitions if self.partitions is not None else sorted(set(self._snapshot[2]) | set(got_v))
            pb, pv = predict_resume(keys, *self._snapshot)
            got_b = e.get("resume_batch")
            if (got_b != pb or got_v != pv) and self.resume_bad is None:
                self.resume_bad = (e["seq"], f"span model predicts resume at batch {pb} with state "
                                             f"versions {pv}; Spark resumed at {got_b} with {got_v}")
        elif k == "progress":
            self.progress.append(e)
        elif k in END_KINDS:
            self.ends[k] = e

    def close(self) -> StreamView:
        """After the last event: at the end of the run every batch must be committed."""
        if self.ended and self.commit_bad is None:
            want = list(range(self.n_batches)) if self.n_batches >= 0 else sorted(self.planned)
            if sorted(self.committed) != want:
                self.commit_bad = (self.ends["end"]["seq"], f"run ended with committed batches {self.committed}, "
                                                            f"expected {want}")
        return self

    @classmethod
    def read(cls, header: dict[str, Any], events: list[dict[str, Any]], n_batches: int | None,
             requested: tuple[str, int] | None, partitions: list[str] | None,
             source: str | None = None) -> StreamView:
        """Read a list of events; ``partitions`` fixes the state instances of the span model.

        None: those seen in the trace. ``n_batches`` None: every planned batch must commit.

        Parameters
        ----------
        header : dict
            The trace's header.
        events : list of dict
            The events.
        n_batches : int or None
            The input batches; None when every planned batch must commit.
        requested : tuple of (str, int) or None
            The requested failure and its batch.
        partitions : list of str or None
            The state instances; None for those seen in the trace.
        source : str, optional
            The trace file, named by errors.

        Returns
        -------
        StreamView
            The closed view.
        """
        v = cls(header, source, -1 if n_batches is None else n_batches, requested, partitions)
        for e in events:
            v.feed(e)
        return v.close()


def check_verdict(name: str, ok: bool | None, detail: str, seq: int | None = None) -> Check:
    """A check that held (``ok`` true) or was violated (false, at ``seq``); None is refused here.

    Say why with ``Check.unchecked`` / ``Check.not_applicable``.

    Parameters
    ----------
    name : str
        The check's name.
    ok : bool or None
        Held (True) or violated (False); None raises ``ValueError``.
    detail : str
        Why.
    seq : int, optional
        The offending event of a violation.

    Returns
    -------
    Check
        Held or violated.
    """
    if ok is None:
        raise ValueError(f"{name}: an undecided check must be unchecked or not applicable")
    return Check.held(name, detail) if ok else Check.violated(name, detail, offending_seq=seq)


def canon_row(row: Any) -> str:
    """A row's canonical JSON text (sorted keys, no spaces)."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)
