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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.reader import read_events

__all__ = ["Check", "FlinkReplay", "read_flink_trace", "replay", "failure_free_output", "source_cut"]

CHECKS = ["failure-observed", "restore-latest-completed", "snapshot-consistent", "barrier-alignment",
          "output-exactly-once", "side-effect-duplicates"]


@dataclass
class Check:
    name: str
    ok: bool | None
    detail: str
    seq: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class FlinkReplay:
    checks: list[Check] = field(default_factory=list)
    truncated: bool = False

    @property
    def conformant(self) -> bool | None:
        fo = next((c for c in self.checks if c.name == "failure-observed"), None)
        if any(c.ok is False for c in self.checks):
            return False
        if fo is None or fo.ok is None:
            return None
        return True

    @property
    def first_offending_seq(self) -> int | None:
        seqs = [c.seq for c in self.checks if c.ok is False and c.seq is not None]
        return min(seqs) if seqs else None

    def as_dict(self) -> dict[str, Any]:
        return {"conformant": self.conformant, "truncated": self.truncated,
                "checks": [c.as_dict() for c in self.checks], "first_offending_seq": self.first_offending_seq}

    @property
    def exit_code(self) -> int:
        c = self.conformant
        return 0 if c is True else (1 if c is False else 3)


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


def replay(path: str | Path, *, tlc: Callable[[str | Path], Any] | None = None) -> FlinkReplay:
    """Run every check on a recorded Flink trace.

    ``tlc``, when given, validates the aligned barrier snapshots against the Chandy–Lamport
    model (:func:`rollcheck.flink_replay.tlc.validate_with_tlc` bound to a TLC runner); its
    verdict is part of ``barrier-alignment``.
    """
    header, events, truncated = read_flink_trace(path)
    cfg = header["config"]
    par = int(cfg["parallelism"])
    mode = cfg["checkpoints"]
    rep = FlinkReplay(truncated=truncated)
    failure = next((e for e in events if e["kind"] == "failure"), None)
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    completed = [e for e in events if e["kind"] == "flink.checkpoint_completed"]
    # failure-observed
    if failure is None:
        rep.checks.append(Check("failure-observed", None, "no failure event: nothing about recovery can be checked"))
    elif not restores:
        rep.checks.append(Check("failure-observed", None, "a failure was recorded but the job never restarted",
                                failure["seq"]))
    elif failure.get("failure") == "taskmanager" and not any(e["kind"] == "flink.taskmanager_lost" for e in events):
        rep.checks.append(Check("failure-observed", None, "a TaskManager kill was recorded but the JobManager "
                                "never reported a TaskManager lost", failure["seq"]))
    else:
        what = "TaskManager process killed" if failure.get("failure") == "taskmanager" else "task failure"
        rep.checks.append(Check("failure-observed", True, f"{what} at seq {failure['seq']} (record "
                                f"{failure.get('record')}), {len(restores)} operator restores after it"))
    # restore-latest-completed
    rep.checks.append(_restore_check(events, failure, restores, completed))
    rep.checks.append(_snapshot_check(events, completed, mode))
    barrier = _barrier_check(events, mode, par)
    if tlc is not None and mode == "aligned" and barrier.ok is not False:
        v = tlc(path)
        if v.accepted is False:
            barrier = Check(barrier.name, False, v.detail, v.seq)
        elif v.accepted is True:
            barrier.detail += f"; {v.detail}"
        else:
            barrier.detail += f"; TLC not run: {v.detail}"
    rep.checks.append(barrier)
    outs = {(e["sink"], e.get("generation")): e for e in events if e["kind"] == "flink.sink_output"}
    expected = failure_free_output(int(cfg["records"]), int(cfg["keys"]))
    tx = outs.get(("tx", None))
    if tx is None:
        rep.checks.append(Check("output-exactly-once", None, "no transactional sink output recorded"))
    else:
        got = Counter(tx["lines"])
        if got == expected:
            rep.checks.append(Check("output-exactly-once", True, f"{sum(got.values())} lines = failure-free output"))
        else:
            rep.checks.append(Check("output-exactly-once", False,
                                    f"duplicates: [{_fmt(got - expected)}]; missing: [{_fmt(expected - got)}]",
                                    tx["seq"]))
    rep.checks.append(_duplicates_check(outs, expected, restores, failure))
    return rep


def _restore_check(events, failure, restores, completed) -> Check:
    name = "restore-latest-completed"
    if failure is None or not restores:
        return Check(name, None, "no restore after a failure")
    ids = {e["checkpoint"] for e in restores}
    first = min(restores, key=lambda e: e["seq"])
    if len(ids) != 1:
        return Check(name, False, f"operators restored different checkpoints: {sorted(map(str, ids))}", first["seq"])
    rid = ids.pop()
    restart = next((e for e in events if e["kind"] == "flink.job_state" and e["state"] == "RESTARTING"), None)
    limit = restart["seq"] if restart is not None else first["seq"]
    before_restart = [e["checkpoint"] for e in completed if e["seq"] < limit]
    before_failure = [e["checkpoint"] for e in completed if e["seq"] < failure["seq"]]
    latest = max(before_restart) if before_restart else None
    if rid != latest or (before_failure and (rid is None or rid < max(before_failure))):
        return Check(name, False, f"restored checkpoint {rid}, but the latest completed before the restart was "
                     f"{latest} (before the failure: {max(before_failure) if before_failure else None})", first["seq"])
    return Check(name, True, f"restored checkpoint {rid} = latest completed before the restart "
                 f"({len(before_restart)} completed)")


def _snapshot_check(events, completed, mode) -> Check:
    name = "snapshot-consistent"
    snaps: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["kind"] == "flink.snapshot":
            snaps.setdefault(e["checkpoint"], []).append(e)
    done = sorted({e["checkpoint"] for e in completed})
    if not done:
        return Check(name, None, "no completed checkpoint")
    inflight_total = 0
    after_end = 0
    per_record: list[float] = []
    completed_by_id = {e["checkpoint"]: e for e in completed}
    for cid in done:
        group = snaps.get(cid, [])
        attempts = {e["attempt"] for e in group}
        keyed = [e for e in group if e["task"] == "keyed"]
        cut = source_cut(events, next(iter(attempts)), cid) if len(attempts) == 1 else None
        if cut is None or not keyed or len(attempts) != 1:
            seq = min((e["seq"] for e in group), default=None)
            return Check(name, False, f"checkpoint {cid} completed without snapshots of both tasks in one attempt "
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
                return Check(name, False, f"checkpoint {cid} (after the sources finished): key w{k} keyed state "
                             f"holds {state[k]} records, the sources emitted {offsets[k]}", seq)
            after_end += 1
            continue
        if mode == "aligned" and (any(diff) or inflight):
            k = next(i for i, d in enumerate(diff) if d) if any(diff) else 0
            return Check(name, False, f"checkpoint {cid}: key w{k} source offsets imply {offsets[k]} records, "
                         f"keyed state holds {state[k]} (inflight {inflight})", seq)
        if mode == "unaligned" and (any(d < 0 for d in diff) or sum(diff) != inflight):
            return Check(name, False, f"checkpoint {cid}: source offsets - keyed state = {sum(diff)} records, "
                         f"channel state holds {inflight}", seq)
        inflight_total += inflight
        # Flink's own count of the channel state it persisted must agree: none when aligned
        pb = completed_by_id[cid].get("persisted_bytes")
        if pb is not None:
            if (pb > 0) != (inflight > 0):
                return Check(name, False, f"checkpoint {cid}: {inflight} in-flight records, but Flink persisted "
                             f"{pb} bytes of channel state", seq)
            if inflight > 0:
                per_record.append(pb / inflight)
    if per_record:
        med = sorted(per_record)[len(per_record) // 2]
        bad = [r for r in per_record if not 0.6 * med <= r <= 1.5 * med]
        if len(bad) > max(1, len(per_record) // 10):
            return Check(name, False, f"channel-state bytes per in-flight record vary too much "
                         f"({min(per_record):.1f}..{max(per_record):.1f}, median {med:.1f})")
    # the restored state equals the snapshot it came from
    for e in events:
        if e["kind"] == "flink.restore" and e.get("checkpoint") is not None and e.get("attempt", 0) > 0:
            # (a restore at another parallelism is compared key by key in rescale_checks)
            orig = [s for s in snaps.get(e["checkpoint"], []) if s["task"] == e["task"] and s["subtask"] == e["subtask"]
                    and s.get("parallelism") == e.get("parallelism")]
            if orig and orig[0]["per_key"] != e["per_key"]:
                return Check(name, False, f"{e['task']}[{e['subtask']}] restored state {e['per_key']} differs "
                             f"from snapshot {e['checkpoint']}: {orig[0]['per_key']}", e["seq"])
    extra = ""
    if mode == "unaligned":
        extra = f", {inflight_total} in-flight records stored as channel state"
        if per_record:
            extra += f" (Flink persisted {sorted(per_record)[len(per_record) // 2]:.1f} bytes per record, median)"
    if after_end:
        extra += (f"; {after_end} more completed after every source had finished (downstream tasks only): "
                  "no orphan in their keyed state")
    return Check(name, True, f"{len(done) - after_end} completed checkpoints are consistent cuts{extra}")


def _barrier_check(events, mode, par) -> Check:
    """Aligned: a keyed subtask snapshots only after the barrier arrived on the channel of every
    source subtask that took the same checkpoint (channel i of a hash-partitioned input carries
    source subtask i; a source that already finished its input sends no barrier). Unaligned: the
    snapshot follows the first barrier or its announcement (an overtaking priority event)."""
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
                return Check(name, False, f"keyed[{e['subtask']}] snapshotted checkpoint {e['checkpoint']} before "
                             f"the barrier arrived on channel(s) {sorted(need - got)} (of {par})", e["seq"])
            if mode == "unaligned" and not got and key not in announced:
                return Check(name, False, f"keyed[{e['subtask']}] snapshotted checkpoint {e['checkpoint']} "
                             "before any barrier (or its announcement) arrived", e["seq"])
            checked += 1
    if n_barriers == 0:
        return Check(name, None, "no barrier arrivals recorded (Flink's DEBUG log was not captured)")
    what = ("after the barriers of every snapshotting source on their channels" if mode == "aligned"
            else "at or after the first barrier")
    return Check(name, True, f"{checked} keyed snapshots taken {what} ({n_barriers} barrier arrivals)")


def _duplicates_check(outs, expected, restores, failure) -> Check:
    name = "side-effect-duplicates"
    g0, g1 = outs.get(("naive", 0)), outs.get(("naive", 1))
    if g0 is None or g1 is None or failure is None or not restores:
        return Check(name, None, "no naive sink output or no restore")
    got = Counter(g0["lines"]) + Counter(g1["lines"])
    missing = expected - got
    if missing:
        return Check(name, False, f"the naive sink lost lines: [{_fmt(missing)}]", g1["seq"])
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
        return Check(name, True, f"{sum(dups.values())} duplicates = the records replayed since the restored checkpoint")
    return Check(name, False, f"duplicates not explained by the replay: [{_fmt(dups - replayed)}]; replayed but "
                 f"not duplicated: [{_fmt(replayed - dups)}]", g1["seq"])
