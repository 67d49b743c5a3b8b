"""One restore against its checkpoint, key by key: the comparisons of the keyed and user state checks.

The checks are in :mod:`rollcheck.flink_replay.checks.rescale`. A restore must hold exactly the
keys of the restored checkpoint's snapshots, with their values, each in the key group Flink gave
the subtask and owned by it at the new parallelism. The functions here return the first
:class:`~rollcheck.pyimpl.verdict.Check` that says otherwise, or None.

References
----------
Carbone et al., "State Management in Apache Flink", VLDB 2017, §3.3 (key groups, rescaling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcheck.flink_replay.checks.keygroups import (
    key_group,
    key_group_range,
    operator_index,
    owner,
)
from rollcheck.pyimpl.verdict import Check

__all__ = ["KEYED", "OPERATOR", "USER", "Tally", "expected_subtasks", "key_of", "owner_of",
           "recomputed_group", "keyed_snapshots", "keyed_restore", "user_snapshots", "user_restore"]

KEYED = "keyed-state-restored-once"
OPERATOR = "operator-state-restored"
USER = "user-state-restored-once"


@dataclass
class Tally:
    """Keys examined, keys that changed subtask, keys whose group was recomputed from the key."""

    examined: int = 0
    moved: int = 0
    recomputed: int = 0


def expected_subtasks(subtasks: list[int], par: int, partial: bool) -> str | None:
    """What should have restored, if the sorted ``subtasks`` are not that; None if they are.

    All of ``0..par-1`` once each, or (``partial``: an attempt a second failure cancelled) each
    of them at most once.

    Parameters
    ----------
    subtasks : list of int
        The subtasks that restored, sorted.
    par : int
        The parallelism restored at.
    partial : bool
        Whether a second failure cancelled the attempt.

    Returns
    -------
    str or None
        The subtasks that should have restored, in words; None if these are right.

    Examples
    --------
    >>> expected_subtasks([0, 1], 2, False) is None
    True
    >>> expected_subtasks([1, 1], 2, True)
    'each of 0..1 at parallelism 2 at most once (an attempt a second failure cancelled)'
    """
    if partial:
        bad = sorted(set(subtasks)) != subtasks or not set(subtasks) <= set(range(par))
    else:
        bad = subtasks != list(range(par))
    if not bad:
        return None
    return (f"{'each of ' if partial else ''}0..{par - 1} at parallelism {par}"
            f"{' at most once (an attempt a second failure cancelled)' if partial else ''}")


def key_of(header: dict[str, Any], text: str) -> tuple[int | str, bool]:
    """The Java key behind a logged key.

    Row(Long) for the word count (PyFlink's key_by), a String for a user's job (rollcheck's own keyBy
    on KEY).

    Parameters
    ----------
    header : dict
        The trace's header (``job`` tells the word count from a user's job).
    text : str
        The key as logged.

    Returns
    -------
    tuple
        ``(key, wrapped in a Row)``.
    """
    if header.get("job", "wordcount") == "wordcount":
        return int(text), True
    return text, False


def owner_of(header: dict[str, Any], text: str, par: int, maxp: int) -> int:
    """The subtask owning logged key ``text`` at parallelism ``par``.

    Parameters
    ----------
    header : dict
        The trace's header.
    text : str
        The key as logged.
    par : int
        The parallelism.
    maxp : int
        The maximum parallelism (the number of key groups).

    Returns
    -------
    int
        The owning subtask's index.
    """
    jkey, row = key_of(header, text)
    return owner(jkey, par, maxp, row=row)


def recomputed_group(key: str, maxp: int) -> int | None:
    """The key group of a logged key, recomputed here.

    "rs:"/"rl:"/"rb:" are a one-field Row of a String, Long or byte array, "s:"/"l:" a plain
    String/Long; None for another key type (Flink's own value is used then).

    Parameters
    ----------
    key : str
        The key as logged, with its type prefix.
    maxp : int
        The maximum parallelism (the number of key groups).

    Returns
    -------
    int or None
        The key group, or None for a key type not recomputed here.
    """
    kind, _, text = key.partition(":")
    try:
        if kind in ("rs", "s"):
            return key_group(text, maxp, row=kind == "rs")
        if kind in ("rl", "l"):
            return key_group(int(text), maxp, row=kind == "rl")
        if kind == "rb":
            return key_group(bytes.fromhex(text), maxp, row=True)
    except (TypeError, ValueError):
        return None
    return None


def keyed_snapshots(events: list[dict[str, Any]], attempt: int,
                    cid: Any) -> dict[str, tuple[int, int]] | Check:
    """Checkpoint ``cid``'s keyed state, ``key -> (value, subtask)``.

    The union of the keyed tap's snapshots that took it; a Check if they were not logged key by key or
    overlap.

    Parameters
    ----------
    events : list of dict
        The trace's events.
    attempt : int
        The attempt that restored (in messages).
    cid : object
        The restored checkpoint's id.

    Returns
    -------
    dict or Check
        ``key -> (value, subtask)``, or the check that could not be made or failed.
    """
    snaps = [e for e in events if e["kind"] == "flink.snapshot" and e["task"] == "keyed"
             and e["checkpoint"] == cid]
    if not snaps or any("keys" not in e for e in snaps):
        return Check.unchecked(KEYED, f"attempt {attempt}: checkpoint {cid} was restored but its keyed "
                               "snapshots were not recorded key by key")
    before: dict[str, tuple[int, int]] = {}
    for s in snaps:
        for k, v in s["keys"].items():
            if k in before:
                return Check.violated(KEYED, f"checkpoint {cid}: key {k} in the snapshots of keyed["
                                      f"{before[k][1]}] and keyed[{s['subtask']}]", offending_seq=s["seq"])
            before[k] = (v, s["subtask"])
    return before


def keyed_restore(header: dict[str, Any], attempt: int, cid: Any, e: dict[str, Any], par: int,
                  maxp: int, before: dict[str, tuple[int, int]], seen: dict[str, dict[str, Any]],
                  tally: Tally) -> Check | None:
    """Compare the keyed tap's restore ``e`` with the checkpoint (``before``); None if it holds.

    ``seen`` collects the keys restored so far in this attempt.

    Parameters
    ----------
    header : dict
        The trace's header.
    attempt : int
        The attempt that restored.
    cid : object
        The restored checkpoint's id.
    e : dict
        The keyed tap's ``flink.restore`` event of one subtask.
    par : int
        The parallelism restored at.
    maxp : int
        The maximum parallelism (the number of key groups).
    before : dict
        The checkpoint's keyed state (:func:`keyed_snapshots`).
    seen : dict
        Key -> the restore event that held it, filled in here.
    tally : Tally
        The counts, added to here.

    Returns
    -------
    Check or None
        The violated check, or None if the restore holds.
    """
    lo, hi = key_group_range(e["subtask"], par, maxp)
    if e.get("key_groups") is not None and list(e["key_groups"]) != [lo, hi]:
        return Check.violated(KEYED, f"attempt {attempt}: Flink gave keyed[{e['subtask']}] key groups "
                              f"{e['key_groups']}, the assignment at parallelism {par} of {maxp} is "
                              f"[{lo}, {hi}]", offending_seq=e["seq"])
    for k, v in e["keys"].items():
        if k in seen:
            return Check.violated(KEYED, f"attempt {attempt}: key {k} restored twice, by keyed["
                                  f"{seen[k]['subtask']}] and keyed[{e['subtask']}] (duplicated state)",
                                  offending_seq=e["seq"])
        seen[k] = e
        if k not in before:
            return Check.violated(KEYED, f"attempt {attempt}: keyed[{e['subtask']}] restored key {k} = {v}, "
                                  f"which checkpoint {cid} does not hold", offending_seq=e["seq"])
        if v != before[k][0]:
            return Check.violated(KEYED, f"attempt {attempt}: key {k} restored as {v}, checkpoint {cid} "
                                  f"holds {before[k][0]}", offending_seq=e["seq"])
        jkey, row = key_of(header, k)
        want = owner(jkey, par, maxp, row=row)
        if want != e["subtask"]:
            g = key_group(jkey, maxp, row=row)
            return Check.violated(KEYED, f"attempt {attempt}: key {k} (key group {g}) restored by keyed["
                                  f"{e['subtask']}], its owner at parallelism {par} is keyed[{want}]",
                                  offending_seq=e["seq"])
        tally.moved += before[k][1] != e["subtask"]
        tally.examined += 1
    return None


def user_snapshots(logged: list[dict[str, Any]], op: str, name: str, attempt: int,
                   cid: Any) -> dict[tuple[str, str], tuple[int, Any, int]] | Check:
    """Checkpoint ``cid``'s keyed state of user operator ``op`` (``name`` in messages).

    ``(state, key) -> (key group, value, subtask)``; a Check if not logged or overlapping.

    Parameters
    ----------
    logged : list of dict
        The trace's ``flink.user_state`` events.
    op : str
        The user operator's id.
    name : str
        The operator's name in messages.
    attempt : int
        The attempt that restored (earlier attempts' snapshots are read).
    cid : object
        The restored checkpoint's id.

    Returns
    -------
    dict or Check
        ``(state, key) -> (key group, value, subtask)``, or the check that could not be made or
        failed.
    """
    snaps = [e for e in logged if e["phase"] == "snapshot" and e["operator"] == op
             and e["checkpoint"] == cid and e["attempt"] < attempt]
    if not snaps:
        return Check.unchecked(USER, f"attempt {attempt}: {name} restored checkpoint {cid}, whose snapshots of "
                               "it were not logged")
    before: dict[tuple[str, str], tuple[int, Any, int]] = {}
    for sn in snaps:
        for state, keys in sn["states"].items():
            for k, (g, v) in keys.items():
                if (state, k) in before:
                    return Check.violated(USER, f"checkpoint {cid}: key {k} of {name}.{state} in the snapshots of "
                                          f"subtasks {before[state, k][2]} and {sn['subtask']}",
                                          offending_seq=sn["seq"])
                before[state, k] = (g, v, sn["subtask"])
    return before


def user_restore(attempt: int, name: str, cid: Any, e: dict[str, Any], par: int, maxp: int,
                 before: dict[tuple[str, str], tuple[int, Any, int]],
                 seen: dict[tuple[str, str], int], tally: Tally) -> Check | None:
    """Compare a user operator's restore ``e`` with the checkpoint (``before``); None if it holds.

    ``seen`` collects the keys restored so far in this attempt.

    Parameters
    ----------
    attempt : int
        The attempt that restored.
    name : str
        The operator's name in messages.
    cid : object
        The restored checkpoint's id.
    e : dict
        The operator's ``flink.user_state`` restore event of one subtask.
    par : int
        The parallelism restored at.
    maxp : int
        The maximum parallelism (the number of key groups).
    before : dict
        The checkpoint's state (:func:`user_snapshots`).
    seen : dict
        ``(state, key)`` -> the subtask that restored it, filled in here.
    tally : Tally
        The counts, added to here.

    Returns
    -------
    Check or None
        The violated check, or None if the restore holds.
    """
    lo, hi = key_group_range(e["subtask"], par, maxp)
    if list(e["key_groups"]) != [lo, hi]:
        return Check.violated(USER, f"attempt {attempt}: Flink gave {name}[{e['subtask']}] key groups "
                              f"{e['key_groups']}, the assignment at parallelism {par} of {maxp} is "
                              f"[{lo}, {hi}]", offending_seq=e["seq"])
    for state, keys in e["states"].items():
        for k, (g, v) in keys.items():
            where = f"{name}.{state} key {k}"
            if (state, k) in seen:
                return Check.violated(USER, f"attempt {attempt}: {where} restored twice, by subtasks "
                                      f"{seen[state, k]} and {e['subtask']} (duplicated state)",
                                      offending_seq=e["seq"])
            seen[state, k] = e["subtask"]
            if (state, k) not in before:
                return Check.violated(USER, f"attempt {attempt}: {where} = {v} restored by subtask "
                                      f"{e['subtask']}, checkpoint {cid} does not hold it",
                                      offending_seq=e["seq"])
            g0, v0, sub0 = before[state, k]
            if v != v0:
                return Check.violated(USER, f"attempt {attempt}: {where} restored as {v}, checkpoint {cid} "
                                      f"holds {v0}", offending_seq=e["seq"])
            want_g = recomputed_group(k, maxp)
            tally.recomputed += want_g is not None
            if want_g is not None and want_g != g:
                return Check.violated(USER, f"{where}: stored in key group {g}, its key group is {want_g}",
                                      offending_seq=e["seq"])
            want = operator_index(g, par, maxp)
            if want != e["subtask"]:
                return Check.violated(USER, f"attempt {attempt}: {where} (key group {g}) restored by "
                                      f"subtask {e['subtask']}, its owner at parallelism {par} is {want}",
                                      offending_seq=e["seq"])
            tally.moved += sub0 != e["subtask"]
            tally.examined += 1
    return None
