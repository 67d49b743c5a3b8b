"""State restored after a failure, key by key: nothing lost, nothing duplicated, the right owner.

A Flink restore hands keyed state out by key group: after a restore at parallelism P2 (the same as
before the failure, or another one: rescaling), every key of the restored checkpoint must be
restored exactly once, with its value in the checkpoint, by the subtask that owns its key group at
P2. Operator (non-keyed) list state is redistributed round-robin instead: its entries, summed over
the subtasks, must equal the checkpoint's. Checks (all :class:`rollcheck.pyimpl.verdict.Check`):
``keyed-state-restored-once`` (rollcheck's keyed tap), ``operator-state-restored`` (the source
tap's records per key), ``user-state-restored-once`` (the keyed state of the user's operators).

See docs/internals/flink-checks.md#rescale for what is logged, the key groups recomputed and the
attempts a second failure cut short.

References
----------
Carbone et al., "State Management in Apache Flink", VLDB 2017, §3.3 (key groups, rescaling);
Apache Flink documentation, "Working with State" (operator list state redistribution on rescale).
"""

from __future__ import annotations

from typing import Any

from rollcheck.flink_replay.checks.keygroups import operator_index
from rollcheck.flink_replay.checks.rescale_keys import (
    KEYED,
    OPERATOR,
    USER,
    Tally,
    expected_subtasks,
    keyed_restore,
    keyed_snapshots,
    owner_of,
    user_restore,
    user_snapshots,
)
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["abandoned_state", "cut_attempts", "keyed_state_check", "operator_state_check", "user_state_check", "rescale_checks", "restore_attempts",
           "KeyedStateRestored", "OperatorStateRestored", "UserStateRestored", "PLUGINS", "KEYED", "OPERATOR", "USER"]

def restore_attempts(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Restores after a failure (attempt > 0), grouped by attempt."""
    out: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0:
            out.setdefault(e["attempt"], []).append(e)
    return out


def cut_attempts(events: list[dict[str, Any]]) -> set[int]:
    """Attempts that a second failure (``twice``, ``during-restore``) struck.

    Their restores may be incomplete: a subtask that had not restored yet when the attempt was
    cancelled logs none.

    Examples
    --------
    >>> cut_attempts([{"kind": "failure"}, {"kind": "failure", "second": "twice", "in_attempt": 1}])
    {1}
    """
    return {int(e["in_attempt"]) for e in events if e["kind"] == "failure" and isinstance(e.get("in_attempt"), int)}


def keyed_state_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``keyed-state-restored-once`` (see the module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.
    """
    cfg = header.get("config", {})
    rescaled = bool(cfg.get("rescale"))
    attempts = restore_attempts(events)
    if not attempts:
        if rescaled or any(e["kind"] == "failure" for e in events):
            return Check.unchecked(KEYED, "no restore after the failure: nothing to compare")
        return Check.not_applicable(KEYED, "no failure in the run, so no restore")
    keyed_restores = [e for es in attempts.values() for e in es if e["task"] == "keyed"]
    if not keyed_restores:
        return Check.unchecked(KEYED, "no keyed subtask completed a restore after the failure")
    if any("keys" not in e for e in keyed_restores):
        why = "the trace has no key-by-key keyed state (recorded before the keyed tap existed)"
        return Check.unchecked(KEYED, why) if rescaled else Check.not_applicable(KEYED, why)
    tally = Tally()
    cut = cut_attempts(events)
    for attempt, restores in sorted(attempts.items()):
        bad = _keyed_attempt(header, events, attempt, restores, attempt in cut, tally)
        if bad is not None:
            return bad
    if tally.examined == 0:
        return Check.unchecked(KEYED, "the restored checkpoint held no keyed state: nothing to compare")
    where = (f"rescaled {cfg['rescale'][0]} -> {cfg['rescale'][1]}, {tally.moved} keys changed subtask"
             if rescaled else f"{tally.moved} keys changed subtask")
    return Check.held(KEYED, f"{tally.examined} keys restored exactly once, with their checkpointed values, by "
                      f"the owner of their key group ({where})", examined=tally.examined)


def _keyed_attempt(header: dict[str, Any], events: list[dict[str, Any]], attempt: int,
                   restores: list[dict[str, Any]], partial: bool, tally: Tally) -> Check | None:
    """Check the keyed subtasks' restores of one attempt against their checkpoint; None if they hold.

    ``partial``: a second failure cancelled the attempt.
    """
    keyed = [e for e in restores if e["task"] == "keyed"]
    if not keyed:
        if partial:
            return None  # cancelled before any keyed subtask restored
        return Check.violated(KEYED, f"attempt {attempt}: no keyed subtask restored (its source subtasks did)",
                              offending_seq=max(e["seq"] for e in restores))
    cids = {e["checkpoint"] for e in keyed}
    if len(cids) != 1:
        return Check.violated(KEYED, f"attempt {attempt}: keyed subtasks restored different checkpoints "
                              f"{sorted(map(str, cids))}", offending_seq=min(e["seq"] for e in keyed))
    cid = cids.pop()
    par = keyed[0].get("parallelism")
    maxp = keyed[0].get("max_parallelism")
    if not isinstance(par, int) or not isinstance(maxp, int):
        return Check.unchecked(KEYED, f"attempt {attempt}: the restores do not say their parallelism")
    subtasks = sorted(e["subtask"] for e in keyed)
    expected = expected_subtasks(subtasks, par, partial)
    if expected is not None:
        return Check.violated(KEYED, f"attempt {attempt}: keyed subtasks {subtasks} restored, expected {expected}",
                              offending_seq=max(e["seq"] for e in keyed))
    if cid is None:
        if any(e["keys"] for e in keyed):
            e = next(e for e in keyed if e["keys"])
            return Check.violated(KEYED, f"attempt {attempt}: no checkpoint restored, yet keyed[{e['subtask']}] "
                                  f"holds {len(e['keys'])} keys", offending_seq=e["seq"])
        return None
    before = keyed_snapshots(events, attempt, cid)
    if isinstance(before, Check):
        return before
    seen: dict[str, dict[str, Any]] = {}
    for e in sorted(keyed, key=lambda x: x["seq"]):
        bad = keyed_restore(header, attempt, cid, e, par, maxp, before, seen, tally)
        if bad is not None:
            return bad
    restored_by = set(subtasks)
    lost = sorted(k for k in set(before) - set(seen) if not partial or owner_of(header, k, par, maxp) in restored_by)
    if lost:
        last = max(e["seq"] for e in keyed)
        return Check.violated(KEYED, f"attempt {attempt}: {len(lost)} keys of checkpoint {cid} restored by no "
                              f"subtask (lost state), e.g. {lost[0]} = {before[lost[0]][0]}", offending_seq=last)
    return None


def _bucket(header: dict[str, Any], k: int) -> str:
    """What bucket ``k`` of the source tap counts: a source's records, or a key bucket.

    A source, for a job with several input streams (the header's ``sources``).
    """
    names = (header.get("sources") or {}).get("names") if isinstance(header.get("sources"), dict) else None
    if isinstance(names, list) and 0 <= k < len(names):
        return f"source {names[k]!r}"
    return f"bucket {k}"


def operator_state_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``operator-state-restored``: the source tap's list state survives redistribution.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.
    """
    attempts = restore_attempts(events)
    if not attempts:
        if any(e["kind"] == "failure" for e in events):
            return Check.unchecked(OPERATOR, "no restore after the failure")
        return Check.not_applicable(OPERATOR, "no failure in the run, so no restore")
    examined = 0
    per_source: str | None = None
    cut = cut_attempts(events)
    for attempt, restores in sorted(attempts.items()):
        src = [e for e in restores if e["task"] == "source"]
        cids = {e["checkpoint"] for e in src}
        if not src or len(cids) != 1 or None in cids:
            continue
        if attempt in cut and len(src) != src[0].get("parallelism", len(src)):
            continue  # cancelled by a second failure before every source subtask restored: a partial sum
        cid = cids.pop()
        snaps = [e for e in events if e["kind"] == "flink.snapshot" and e["task"] == "source"
                 and e["checkpoint"] == cid]
        if not snaps or len(snaps) != snaps[0].get("parallelism", len(snaps)):
            continue  # a source subtask had finished before the checkpoint: not comparable
        n = len(snaps[0]["per_key"])
        want = [sum(s["per_key"][k] for s in snaps) for k in range(n)]
        got = [sum(e["per_key"][k] for e in src) for k in range(n)]
        if got != want:
            k = next(i for i in range(n) if got[i] != want[i])
            what = "lost" if got[k] < want[k] else "duplicated"
            return Check.violated(OPERATOR, f"attempt {attempt}: the source subtasks restored {got[k]} records of "
                                  f"{_bucket(header, k)}, checkpoint {cid} holds {want[k]} ({what} operator "
                                  "state)", offending_seq=max(e["seq"] for e in src))
        examined += len(src)
        per_source = ", ".join(f"{_bucket(header, k)[len('source '):]} {want[k]}" for k in range(n)) \
            if _bucket(header, 0).startswith("source ") else None
    if examined == 0:
        return Check.unchecked(OPERATOR, "no source restore from a checkpoint to compare")
    return Check.held(OPERATOR, f"{examined} source subtask restores sum to their checkpoint's operator state"
                      + (f" (records per source at the last restored checkpoint: {per_source})" if per_source else ""),
                      examined=examined)


def abandoned_state(logged: list[dict[str, Any]], op: str, attempt: int,
                    restores: list[dict[str, Any]]) -> tuple[str, int] | None:
    """A restored state that the operator abandoned after the restore, as ``(words, seq)``; None if none.

    Restored state must be *read* again, not only handed back: an operator whose state name changes
    between runs (PyFlink's ``KeyedStream.reduce`` names its state ``_reduce_state`` plus a random
    UUID in ``open()``) finds nothing under the new name after a restore, so its keys start over
    while the restored state lies unread in the backend. Seen in the snapshots after the restore: a
    state name that no snapshot or restore of the operator held before this attempt receives keys
    of a restored state, and the restored state's values for those keys stay as restored.

    Parameters
    ----------
    logged : list of dict
        The trace's ``flink.user_state`` events.
    op : str
        The user operator's id.
    attempt : int
        The attempt that restored.
    restores : list of dict
        The operator's restore events in that attempt.

    Returns
    -------
    tuple of (str, int) or None
        What was abandoned, in words, and the ``seq`` of the snapshot that shows it.

    Examples
    --------
    >>> rs = [{"states": {"s-1": {"rs:a": [3, "v1"]}}}]
    >>> snap = {"kind": "flink.user_state", "phase": "snapshot", "operator": "op", "attempt": 1, "seq": 9,
    ...         "states": {"s-1": {"rs:a": [3, "v1"]}, "s-2": {"rs:a": [3, "v0"]}}}
    >>> abandoned_state([snap], "op", 1, rs)[1]
    9
    >>> abandoned_state([dict(snap, states={"s-1": {"rs:a": [3, "v2"]}})], "op", 1, rs) is None
    True
    """
    restored: dict[str, dict[str, Any]] = {}
    for e in restores:
        for state, keys in e["states"].items():
            restored.setdefault(state, {}).update({k: gv[1] for k, gv in keys.items()})
    if not any(restored.values()):
        return None
    earlier = {state for e in logged if e["operator"] == op and e["attempt"] < attempt for state in e["states"]}
    earlier |= set(restored)
    after = sorted((e for e in logged if e["operator"] == op and e["attempt"] == attempt
                    and e["phase"] == "snapshot"), key=lambda e: e["seq"])
    for sn in after:
        for new, keys in sorted(sn["states"].items()):
            if new in earlier:
                continue
            for old, values in sorted(restored.items()):
                common = sorted(set(keys) & set(values))
                frozen = [k for k in common if k not in sn["states"].get(old, {})
                          or sn["states"][old][k][1] == values[k]]
                if common and len(frozen) == len(common):
                    k = common[0]
                    return (f"restored its state {old!r} ({len(values)} keys), but after the restore it kept the same "
                            f"keys in a state that did not exist before, {new!r} (e.g. key {k}), and never updated "
                            f"the restored one: the restored state was abandoned, its keys started over",
                            int(sn["seq"]))
    return None


def user_state_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``user-state-restored-once`` (see the module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.
    """
    if header.get("job") != "module":
        return Check.not_applicable(USER, "not a user's job (the word count's keyed state is checked by "
                                    f"{KEYED})")
    err = next((e for e in events if e["kind"] == "flink.user_state_error"), None)
    if err is not None:
        return Check.unchecked(USER, f"reading the user's keyed state failed: {err['error']}")
    logged = [e for e in events if e["kind"] == "flink.user_state"]
    restores = [e for e in logged if e["phase"] == "restore" and e["attempt"] > 0]
    early = _user_preconditions(header, events, logged, restores)
    if early is not None:
        return early
    tally = Tally()
    cut = cut_attempts(events)
    ops: set[str] = set()
    by_attempt: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for e in restores:
        by_attempt.setdefault((e["attempt"], e["operator"]), []).append(e)
    for (attempt, op), rs in sorted(by_attempt.items()):
        name = f"{rs[0]['name']} ({op[:8]})"
        bad = _user_attempt(logged, attempt, op, name, rs, attempt in cut, tally)
        if bad is not None:
            return bad
        ops.add(name)
    if tally.examined == 0:
        if not any(keys for e in logged for keys in e["states"].values()):
            # e.g. state kept outside Flink, or a keyed operator without state: nothing of it to restore
            return Check.not_applicable(USER, "the user's keyed operators never held keyed state in this run")
        return Check.unchecked(USER, "the restored checkpoint held no keyed state of the user's operators")
    cfg = header.get("config", {})
    how = (f"rescaled {cfg['rescale'][0]} -> {cfg['rescale'][1]}" if cfg.get("rescale") else "same parallelism")
    examined, recomputed = tally.examined, tally.recomputed
    return Check.held(USER, f"{examined} keys of {len(ops)} user operators ({', '.join(sorted(ops))}) restored "
                      f"exactly once, with their checkpointed state, by the owner of their key group ({how}, "
                      f"{tally.moved} changed subtask; key group recomputed from the key for {recomputed}, "
                      f"Flink's for the other {examined - recomputed}: keys of a type rollcheck does not hash)",
                      examined=examined)


def _user_preconditions(header: dict[str, Any], events: list[dict[str, Any]],
                        logged: list[dict[str, Any]], restores: list[dict[str, Any]]) -> Check | None:
    """Why the user state check does not apply to a user's job or cannot run on its trace; None if it can.

    No failure, no log, no restore logged.
    """
    if not any(e["kind"] == "failure" for e in events):
        return Check.not_applicable(USER, "no failure in the run, so no restore")
    if not logged and not header.get("user_state_log"):
        return Check.not_applicable(USER, "the trace was recorded without the log of the user operators' keyed "
                                    "state (recorded before it existed)")
    if not logged:
        return Check.not_applicable(USER, "the job has no keyed operator whose state rollcheck reads (PyFlink's "
                                    "KeyedStream process/map/reduce, windows, connected keyed streams)")
    if not restores:
        return Check.unchecked(USER, "the user's keyed operators logged no restore after the failure")
    return None


def _user_attempt(logged: list[dict[str, Any]], attempt: int, op: str, name: str,
                  rs: list[dict[str, Any]], partial: bool, tally: Tally) -> Check | None:
    """Check user operator ``op``'s restores ``rs`` of one attempt against their checkpoint.

    ``partial``: a second failure cancelled the attempt. None if they hold.
    """
    cids = {e["checkpoint"] for e in rs}
    if len(cids) != 1:
        return Check.violated(USER, f"attempt {attempt}: subtasks of {name} restored different checkpoints "
                              f"{sorted(map(str, cids))}", offending_seq=min(e["seq"] for e in rs))
    cid = cids.pop()
    par, maxp = rs[0]["parallelism"], rs[0]["max_parallelism"]
    subtasks = sorted(e["subtask"] for e in rs)
    expected = expected_subtasks(subtasks, par, partial)
    if expected is not None:
        return Check.violated(USER, f"attempt {attempt}: subtasks {subtasks} of {name} restored, expected {expected}",
                              offending_seq=max(e["seq"] for e in rs))
    if cid is None:
        held = next((e for e in rs if any(e["states"].values())), None)
        if held is not None:
            return Check.violated(USER, f"attempt {attempt}: no checkpoint restored, yet {name}[{held['subtask']}]"
                                  " holds keyed state", offending_seq=held["seq"])
        return None
    before = user_snapshots(logged, op, name, attempt, cid)
    if isinstance(before, Check):
        return before
    seen: dict[tuple[str, str], int] = {}
    for e in sorted(rs, key=lambda x: x["seq"]):
        bad = user_restore(attempt, name, cid, e, par, maxp, before, seen, tally)
        if bad is not None:
            return bad
    lost = sorted(sk for sk in set(before) - set(seen)
                  if not partial or operator_index(before[sk][0], par, maxp) in set(subtasks))
    if lost:
        st, k = lost[0]
        g, v, _ = before[st, k]
        return Check.violated(USER, f"attempt {attempt}: {len(lost)} keys of {name} in checkpoint {cid} restored "
                              f"by no subtask (lost state), e.g. {st} key {k} (key group {g}) = {v}",
                              offending_seq=max(e["seq"] for e in rs))
    abandoned = abandoned_state(logged, op, attempt, rs)
    if abandoned is not None:
        return Check.violated(USER, f"attempt {attempt}: {name} {abandoned[0]}", offending_seq=abandoned[1])
    return None


def rescale_checks(header: dict[str, Any], events: list[dict[str, Any]]) -> list[Check]:
    """The three checks, for any Flink trace (a restore at the same parallelism included).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.
    """
    return [keyed_state_check(header, events), operator_state_check(header, events),
            user_state_check(header, events)]


class _FlinkEvents(TraceCheck):
    """A plug-in of the shared trace checker that keeps the Flink events it needs.

    Restores and snapshots of the taps, the failure; it decides in :meth:`finish`.
    """

    needs = ("flink.restore", "flink.snapshot", "failure", "flink.user_state", "flink.user_state_error")
    fn: Any = None

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        if obj.get("kind") in self.needs:
            self.events.append(obj)

    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        return type(self).fn(v.header, self.events)


class KeyedStateRestored(_FlinkEvents):
    """``keyed-state-restored-once`` as a trace-checker plug-in."""

    name = KEYED
    fn = staticmethod(keyed_state_check)


class OperatorStateRestored(_FlinkEvents):
    """``operator-state-restored`` as a trace-checker plug-in."""

    name = OPERATOR
    fn = staticmethod(operator_state_check)


class UserStateRestored(_FlinkEvents):
    """``user-state-restored-once`` as a trace-checker plug-in."""

    name = USER
    fn = staticmethod(user_state_check)


#: the plug-ins of this module, for the shared trace checker (``RunView(header, [cls() for cls in PLUGINS])``)
PLUGINS = (KeyedStateRestored, OperatorStateRestored, UserStateRestored)
