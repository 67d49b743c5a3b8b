"""Replay a recorded Flink trace against the coordinated-snapshot model.

Each check compares the run with something computed independently of Flink: the restore
against the JobManager's list of completed checkpoints, every snapshot of the keyed task
against the source offsets of the same checkpoint, barrier arrivals against the snapshot they
must precede, and the sinks' outputs against the failure-free output computed from the
deterministic input (values 1..N, key ``v mod keys``).

References
----------
Chandy and Lamport, "Distributed Snapshots", §3 (the marker rule).
Carbone et al., "Lightweight Asynchronous Snapshots for Distributed Dataflows", §4.2
(barrier alignment).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typing_extensions import override

from rollcheck.flink_replay.checks.event_shape import check_error
from rollcheck.flink_replay.checks.oracles import RECOVERY, recovery_check
from rollcheck.flink_replay.checks.rescale import (
    KEYED,
    OPERATOR,
    keyed_state_check,
    operator_state_check,
)
from rollcheck.flink_replay.checks.restores import restore_latest_completed
from rollcheck.flink_replay.checks.strike import (
    STRUCK,
    channel_check,
    strike_checks_for,
    struck_check,
)
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.api import check_trace_lines
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.traces.reader import TraceLines, read_events
from rollcheck.pyimpl.verdict import Check, Report

__all__ = ["FlinkEvents", "FlinkCheck", "BarrierTLC", "flink_plugins", "read_flink_trace", "replay",
           "failure_free_output", "source_cut", "check_flink_header"]

CHECKS = ["failure-observed", "restore-latest-completed", "snapshot-consistent", "barrier-alignment",
          "output-exactly-once", "side-effect-duplicates"]


def read_flink_trace(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
    """Read a Flink ``rollcheck.trace/1`` file: (header, events, truncated).

    The file is read by the one reader of the format
    (:func:`rollcheck.pyimpl.traces.reader.read_events`); this adds the Flink header's rules.

    Raises
    ------
    InvalidInputError
        Unreadable file, a header that is not a Flink trace, a malformed line or a ``seq`` gap.
    """
    lines, events = read_events(path)
    header = lines.header
    check_flink_header(header, str(path))
    return header, events, lines.truncated


def check_flink_header(header: dict[str, Any], source: str | None) -> None:
    """Refuse a header that is not a Flink trace's (``source`` ``flink`` with a ``config``)."""
    if header.get("source") != "flink" or not isinstance(header.get("config"), dict):
        raise InvalidInputError("not a Flink trace (header \"source\" must be \"flink\" with a \"config\")",
                                source=source, location="line 1")
    cfg = header["config"]
    for key in ("checkpoints", "parallelism", "records", "keys"):
        if key not in cfg:
            raise InvalidInputError(f"header config lacks \"{key}\"", source=source, location="line 1")
    if cfg["checkpoints"] not in ("aligned", "unaligned"):
        raise InvalidInputError(f"config.checkpoints: expected \"aligned\" or \"unaligned\", got "
                                f"{cfg['checkpoints']!r}", source=source, location="line 1")
    for key in ("parallelism", "records", "keys"):
        if type(cfg[key]) is not int or cfg[key] < 1:
            raise InvalidInputError(f"config.{key}: expected a positive integer, got {cfg[key]!r}",
                                    source=source, location="line 1")


def source_cut(events: list[dict[str, Any]], attempt: int, checkpoint: int) -> tuple[list[int], set[int]] | None:
    """Records per key that left the source before the barriers of ``checkpoint`` (all subtasks).

    A source subtask that reached the end of its input before the checkpoint takes no snapshot;
    its final counts (``flink.task_finished``) are its offsets. Returns (counts per key, the
    source subtasks that snapshotted) or None when no source subtask took part.
    """
    snaps = {e["subtask"]: e for e in events if e["kind"] == "flink.snapshot" and e["task"] == "source"
             and e["attempt"] == attempt and e["checkpoint"] == checkpoint}
    finished = {e["subtask"]: e for e in events if e["kind"] == "flink.task_finished" and e["task"] == "source"
                and e["attempt"] == attempt}
    if not snaps:
        # Every source subtask had reached the end of its input: a checkpoint may still complete with
        # the downstream tasks alone (Flink checkpoints after tasks finished); the offsets are then the
        # sources' final counts. Otherwise no source subtask took part: no cut.
        sources = {e["subtask"] for e in events if e["kind"] in ("flink.snapshot", "flink.task_finished")
                   and e["task"] == "source" and e["attempt"] == attempt}
        if not finished or set(finished) != sources:
            return None
    n = len(next(iter({**finished, **snaps}.values()))["per_key"])
    total = [0] * n
    for sub in set(snaps) | set(finished):
        e = snaps.get(sub) or finished[sub]
        for k in range(n):
            total[k] += e["per_key"][k]
    return total, set(snaps)



def _bad(name: str, detail: str, seq: int | None = None) -> Check:
    return Check.violated(name, detail, offending_seq=seq)


def failure_free_output(records: int, keys: int) -> Counter[str]:
    """The word-count sink lines of a run without failures, from the input alone.

    Examples
    --------
    >>> sorted(failure_free_output(5, 2).elements())
    ['w0,1', 'w0,2', 'w1,1', 'w1,2', 'w1,3']
    """
    n = [0] * keys
    out: Counter[str] = Counter()
    for v in range(1, records + 1):
        n[v % keys] += 1
        out[f"w{v % keys},{n[v % keys]}"] += 1
    return out


def _fmt(c: Counter[str], limit: int = 5) -> str:
    items = sorted(c.elements())
    s = ", ".join(items[:limit])
    return s + (f", ... ({len(items)} in all)" if len(items) > limit else "")


class FlinkEvents(TraceCheck):
    """Collects the Flink events the checks read (a collector: reports nothing itself)."""

    name = "flink-events"
    needs = ("flink.*", "failure")

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    @override
    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        k = obj["kind"]
        if not obj.get("derived") and (k.startswith("flink.") or k == "failure"):
            self.events.append(obj)

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> None:
        return None


class FlinkCheck(TraceCheck):
    """One Flink check as a plug-in: ``fn(header, events) -> Check`` over the collected events."""

    after = ("flink-events",)

    def __init__(self, name: str, header: dict[str, Any], collector: FlinkEvents,
                 fn: Callable[[dict[str, Any], list[dict[str, Any]]], Check]):
        self.name = name
        self.header = header
        self.collector = collector
        self.fn = fn

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        try:
            return self.fn(self.header, self.collector.events)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
            # events not as the recorder writes them: bad input; well-formed ones: rollcheck's bug
            raise check_error(self.name, e, self.header, self.collector.events,
                              getattr(v, "source", None)) from None


class _RecoveryPlugin(FlinkCheck):
    """``recovery-succeeded`` on the word count: the collected events and the trace's ``end``, if any."""

    def __init__(self, header: dict[str, Any], collector: FlinkEvents):
        super().__init__(RECOVERY, header, collector, recovery_check)
        self.end: dict[str, Any] | None = None

    def on_end(self, v: Any, seq: int) -> None:
        self.end = {"seq": seq, "kind": "end"}

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        events = self.collector.events + ([self.end] if self.end is not None else [])
        try:
            return recovery_check(self.header, events)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
            raise check_error(self.name, e, self.header, events, getattr(v, "source", None)) from None


class BarrierTLC(TraceCheck):
    """``barrier-alignment-tlc``: the aligned snapshots walked through the Chandy–Lamport model by TLC.

    Not applicable to unaligned checkpoints or parallelism other than 2 (what the model covers);
    *unchecked* when TLC could not run or decide (never a pass, and no claim of TLC validation).
    """

    name = "barrier-alignment-tlc"
    needs = ("flink.barrier", "flink.snapshot", "TLC")

    def __init__(self, header: dict[str, Any], path: str | Path, tlc: Callable[[str | Path], Any]):
        self.header = header
        self.path = path
        self.tlc = tlc

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        cfg = self.header["config"]
        if cfg["checkpoints"] != "aligned" or int(cfg["parallelism"]) != 2:
            return Check.not_applicable(self.name, "the Chandy–Lamport model covers aligned checkpoints at "
                                                   "parallelism 2 only")
        res = self.tlc(self.path)
        if res.accepted is True:
            return Check.held(self.name, res.detail)
        if res.accepted is False:
            return Check.violated(self.name, res.detail, offending_seq=res.seq)
        return Check.unchecked(self.name, f"TLC did not validate the snapshots: {res.detail}")


def flink_plugins(header: dict[str, Any], path: str | Path | None = None,
                  tlc: Callable[[str | Path], Any] | None = None) -> list[TraceCheck]:
    """Flink's check plug-ins (module docstring), in reporting order."""
    ev = FlinkEvents()
    plugins: list[TraceCheck] = [ev] + [FlinkCheck(name, header, ev, fn) for name, fn in (
        ("failure-observed", _failure_check), ("restore-latest-completed", _restore_of),
        ("snapshot-consistent", _snapshot_of), ("barrier-alignment", _barrier_of),
        ("output-exactly-once", _output_check), ("side-effect-duplicates", _duplicates_of),
        # key by key: every key of the restored checkpoint restored once, by its key group's owner
        (KEYED, keyed_state_check), (OPERATOR, operator_state_check))]
    # the failure struck where asked, the unaligned restore held data in flight (when the recording asks)
    plugins += [FlinkCheck(name, header, ev, struck_check if name == STRUCK else channel_check)
                for name in strike_checks_for(header)]
    # an oracle that does not trust the engine's failure-free run: the restart itself succeeded
    plugins.append(_RecoveryPlugin(header, ev))
    if tlc is not None and path is not None:
        plugins.insert(5, BarrierTLC(header, path, tlc))
    return plugins


def replay(path: str | Path, *, tlc: Callable[[str | Path], Any] | None = None) -> Report:
    """Run every check on a recorded Flink trace: the shared checker's generic checks and Flink's plug-ins.

    Parameters
    ----------
    path : str or Path
        The trace file.
    tlc : callable, optional
        Validates the aligned barrier snapshots against the Chandy–Lamport model
        (:func:`~rollcheck.flink_replay.checks.tlc.validate_with_tlc` bound to a TLC runner): the
        ``barrier-alignment-tlc`` check.
    """
    lines = TraceLines(path)
    check_flink_header(lines.header, str(path))
    report, _ = check_trace_lines(lines, extra=flink_plugins(lines.header, path, tlc))
    return report


def _failures(events: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]],
                                                     list[dict[str, Any]]]:
    failure = next((e for e in events if e["kind"] == "failure"), None)
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    completed = [e for e in events if e["kind"] == "flink.checkpoint_completed"]
    return failure, restores, completed


def _failure_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    name = "failure-observed"
    failure, restores, _ = _failures(events)
    if failure is None:
        return Check.unchecked(name, "no failure event: nothing about recovery can be checked")
    if not restores:
        return Check.unchecked(name, f"a failure was recorded (seq {failure['seq']}) but the job never restarted")
    if failure.get("failure") == "taskmanager" and not any(e["kind"] == "flink.taskmanager_lost" for e in events):
        return Check.unchecked(name, f"a TaskManager kill was recorded (seq {failure['seq']}) but the JobManager "
                                     "never reported a TaskManager lost")
    what = "TaskManager process killed" if failure.get("failure") == "taskmanager" else "task failure"
    return Check.held(name, f"{what} at seq {failure['seq']} (record {failure.get('record')}), {len(restores)} "
                            "operator restores after it")


def _restore_of(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    return restore_latest_completed(events)


def _snapshot_of(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    return _snapshot_check(events, _failures(events)[2], header["config"]["checkpoints"])


def _barrier_of(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    cfg = header["config"]
    return _barrier_check(events, cfg["checkpoints"], int(cfg["parallelism"]))


def _sink_outputs(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], dict[str, Any]]:
    return {(e["sink"], e.get("generation")): e for e in events if e["kind"] == "flink.sink_output"}


def _output_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    name = "output-exactly-once"
    cfg = header["config"]
    expected = failure_free_output(int(cfg["records"]), int(cfg["keys"]))
    tx = _sink_outputs(events).get(("tx", None))
    if tx is None:
        return Check.unchecked(name, "no transactional sink output recorded: exactly-once cannot be checked")
    got = Counter(tx["lines"])
    if got == expected:
        return Check.held(name, f"{sum(got.values())} lines = failure-free output")
    return Check.violated(name, f"duplicates: [{_fmt(got - expected)}]; missing: [{_fmt(expected - got)}]",
                          offending_seq=tx["seq"])


def _duplicates_of(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    cfg = header["config"]
    failure, restores, _ = _failures(events)
    expected = failure_free_output(int(cfg["records"]), int(cfg["keys"]))
    return _duplicates_check(_sink_outputs(events), expected, restores, failure)


def _snapshot_check(events, completed, mode) -> Check:
    name = "snapshot-consistent"
    snaps: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["kind"] == "flink.snapshot":
            snaps.setdefault(e["checkpoint"], []).append(e)
    done = sorted({e["checkpoint"] for e in completed})
    if not done:
        return Check.unchecked(name, "no completed checkpoint")
    inflight_total = 0
    after_end = 0
    per_record: list[float] = []
    completed_by_id = {e["checkpoint"]: e for e in completed}
    for cid in done:
        group = snaps.get(cid, [])
        # A checkpoint id may be taken twice: an attempt that failed while checkpoint ``cid`` was in
        # progress, and the restored job, which numbers its next checkpoint after the restored one
        # (a restore from checkpoint cid-1 reuses cid). The completed checkpoint is the one of the
        # latest attempt that snapshotted ``cid`` before the completion; the snapshots an aborted
        # attempt took for the same id belong to no completed checkpoint.
        if group:
            done_seq = completed_by_id[cid]["seq"]
            latest = max(e["attempt"] for e in ([e for e in group if e["seq"] < done_seq] or group))
            aborted = {e["attempt"] for e in group if e["attempt"] < latest}
            retaken = min(e["seq"] for e in group if e["attempt"] == latest)
            if aborted and any(c["checkpoint"] == cid and c["seq"] < retaken for c in completed):
                return _bad(name, f"checkpoint {cid} completed in attempt {sorted(aborted)}"
                             f" and was taken again in attempt {latest}", min(e["seq"] for e in group))
            group = [e for e in group if e["attempt"] == latest]
        attempts = {e["attempt"] for e in group}
        keyed = [e for e in group if e["task"] == "keyed"]
        cut = source_cut(events, next(iter(attempts)), cid) if len(attempts) == 1 else None
        if cut is None or not keyed or len(attempts) != 1:
            seq = min((e["seq"] for e in group), default=None)
            return _bad(name, f"checkpoint {cid} completed without snapshots of both tasks in one attempt "
                         f"({len(keyed)} keyed, attempts {sorted(attempts)})", seq)
        offsets = cut[0]
        n = len(offsets)
        state = [sum(e["per_key"][k] for e in keyed) for k in range(n)]
        inflight = sum(int(e.get("inflight_records", 0)) for e in keyed)
        diff = [o - s for o, s in zip(offsets, state, strict=True)]
        seq = max(e["seq"] for e in keyed)
        if not cut[1]:
            # Every source had finished its input: the checkpoint completed with the downstream tasks
            # alone, and what was still in the channels from the finished sources is not observable
            # by the taps. Only the no-orphan half of the cut is checkable: the keyed state reflects
            # no record the sources did not emit.
            if any(d < 0 for d in diff):
                k = next(i for i, d in enumerate(diff) if d < 0)
                return _bad(name, f"checkpoint {cid} (after the sources finished): key w{k} keyed state "
                             f"holds {state[k]} records, the sources emitted {offsets[k]}", seq)
            after_end += 1
            continue
        if mode == "aligned" and (any(diff) or inflight):
            k = next(i for i, d in enumerate(diff) if d) if any(diff) else 0
            return _bad(name, f"checkpoint {cid}: key w{k} source offsets imply {offsets[k]} records, "
                         f"keyed state holds {state[k]} (inflight {inflight})", seq)
        if mode == "unaligned" and (any(d < 0 for d in diff) or sum(diff) != inflight):
            return _bad(name, f"checkpoint {cid}: source offsets - keyed state = {sum(diff)} records, "
                         f"channel state holds {inflight}", seq)
        inflight_total += inflight
        # Flink's own count of the channel state it persisted must agree: none when aligned
        pb = completed_by_id[cid].get("persisted_bytes")
        if pb is not None:
            if (pb > 0) != (inflight > 0):
                return _bad(name, f"checkpoint {cid}: {inflight} in-flight records, but Flink persisted "
                             f"{pb} bytes of channel state", seq)
            if inflight > 0:
                per_record.append(pb / inflight)
    if per_record:
        med = sorted(per_record)[len(per_record) // 2]
        bad = [r for r in per_record if not 0.6 * med <= r <= 1.5 * med]
        if len(bad) > max(1, len(per_record) // 10):
            return _bad(name, f"channel-state bytes per in-flight record vary too much "
                         f"({min(per_record):.1f}..{max(per_record):.1f}, median {med:.1f})")
    # the restored state equals the snapshot it came from
    for e in events:
        if e["kind"] == "flink.restore" and e.get("checkpoint") is not None and e.get("attempt", 0) > 0:
            # (a restore at another parallelism is compared key by key in rescale.py)
            orig = [s for s in snaps.get(e["checkpoint"], []) if s["task"] == e["task"] and s["subtask"] == e["subtask"]
                    and s.get("parallelism") == e.get("parallelism")]
            if orig and orig[0]["per_key"] != e["per_key"]:
                return _bad(name, f"{e['task']}[{e['subtask']}] restored state {e['per_key']} differs "
                             f"from snapshot {e['checkpoint']}: {orig[0]['per_key']}", e["seq"])
    extra = ""
    if mode == "unaligned":
        extra = f", {inflight_total} in-flight records stored as channel state"
        if per_record:
            extra += f" (Flink persisted {sorted(per_record)[len(per_record) // 2]:.1f} bytes per record, median)"
    if after_end:
        extra += (f"; {after_end} more completed after every source had finished (downstream tasks only): "
                  "no orphan in their keyed state")
    return Check.held(name, f"{len(done) - after_end} completed checkpoints are consistent cuts{extra}")


def _barrier_check(events, mode, par) -> Check:
    """``barrier-alignment``: every keyed snapshot follows the barriers it must wait for.

    Aligned: a keyed subtask snapshots only after the barrier arrived on the channel of every source
    subtask that took the same checkpoint (channel i of a hash-partitioned input carries source subtask
    i; a source that already finished its input sends no barrier). Unaligned: the snapshot follows the
    first barrier or its announcement (an overtaking priority event).
    """
    name = "barrier-alignment"
    arrived: dict[tuple[int, int, int], set[int]] = {}
    announced: set[tuple[int, int, int]] = set()
    sources: dict[tuple[int, int], set[int]] = {}
    n_barriers = 0
    checked = 0
    for e in events:
        if e["kind"] == "flink.snapshot" and e["task"] == "source":
            sources.setdefault((e["attempt"], e["checkpoint"]), set()).add(e["subtask"])
    for e in events:
        if e["kind"] == "flink.barrier":
            n_barriers += 1
            arrived.setdefault((e["subtask"], e["attempt"], e["checkpoint"]), set()).add(e["channel"])
        elif e["kind"] == "flink.barrier_announcement":
            announced.add((e["subtask"], e["attempt"], e["checkpoint"]))
        elif e["kind"] == "flink.snapshot" and e["task"] == "keyed":
            key = (e["subtask"], e["attempt"], e["checkpoint"])
            got = arrived.get(key, set())
            need = sources.get((e["attempt"], e["checkpoint"]), set())
            if not need:
                continue  # every source had finished: no barrier travels
            if mode == "aligned" and not need <= got:
                return _bad(name, f"keyed[{e['subtask']}] snapshotted checkpoint {e['checkpoint']} before "
                             f"the barrier arrived on channel(s) {sorted(need - got)} (of {par})", e["seq"])
            if mode == "unaligned" and not got and key not in announced:
                return _bad(name, f"keyed[{e['subtask']}] snapshotted checkpoint {e['checkpoint']} "
                             "before any barrier (or its announcement) arrived", e["seq"])
            checked += 1
    if n_barriers == 0:
        return Check.unchecked(name, "no barrier arrivals recorded (Flink's DEBUG log was not captured)")
    what = ("after the barriers of every snapshotting source on their channels" if mode == "aligned"
            else "at or after the first barrier")
    return Check.held(name, f"{checked} keyed snapshots taken {what} ({n_barriers} barrier arrivals)")


def _duplicates_check(outs, expected, restores, failure) -> Check:
    name = "side-effect-duplicates"
    g0, g1 = outs.get(("naive", 0)), outs.get(("naive", 1))
    if g0 is None or g1 is None or failure is None or not restores:
        return Check.unchecked(name, "no naive sink output or no restore")
    got = Counter(g0["lines"]) + Counter(g1["lines"])
    missing = expected - got
    if missing:
        return _bad(name, f"the naive sink lost lines: [{_fmt(missing)}]", g1["seq"])
    dups = got - expected
    # the records replayed since the restored checkpoint: per key, the counts after the restored
    # keyed state up to the highest count the first attempt reached
    restored: dict[int, int] = {}
    for e in restores:
        if e["task"] == "keyed":
            for k, c in enumerate(e["per_key"]):
                restored[k] = max(restored.get(k, 0), c)
    reached: dict[int, int] = {}
    for line in g0["lines"]:
        w, c = line.split(",")
        reached[int(w[1:])] = max(reached.get(int(w[1:]), 0), int(c))
    replayed: Counter[str] = Counter()
    for k, top in reached.items():
        for c in range(restored.get(k, 0) + 1, top + 1):
            replayed[f"w{k},{c}"] += 1
    if dups == replayed:
        return Check.held(name, f"{sum(dups.values())} duplicates = the records replayed since the restored checkpoint")
    return _bad(name, f"duplicates not explained by the replay: [{_fmt(dups - replayed)}]; replayed but "
                 f"not duplicated: [{_fmt(replayed - dups)}]", g1["seq"])
