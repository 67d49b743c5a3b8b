"""Checks that the injected failure tested what the recording asked for.

``failure-struck-as-asked``
    The failure event says where and when it struck (operator, subtask, the latest checkpoint
    completed before it); a recording that asked for a subtask (``fail_subtask``) or a checkpoint
    (``fail_after_checkpoint``) is proven by it, else unchecked.
``channel-state-restored``
    An unaligned recording: the checkpoint the job restored held data in flight, read from the
    checkpoint's ``_metadata`` (``flink.channel_state``: input channel and output subpartition
    state per subtask); with ``rescale``, held at P1 and restored at P2 (redistributed). A restored
    checkpoint that held nothing in flight did not test channel state: unchecked, with the reason.

Both apply only to recordings that ask for them (the header's ``config``): older traces replay
exactly as before.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.verdict import Check

__all__ = ["STRUCK", "CHANNELS", "strike_checks_for", "struck_check", "channel_check"]

STRUCK = "failure-struck-as-asked"
CHANNELS = "channel-state-restored"


def strike_checks_for(header: dict[str, Any]) -> list[str]:
    """The names of this module's checks a trace's header calls for (in reporting order)."""
    cfg = header.get("config") or {}
    names = []
    if cfg.get("failure") and (cfg.get("fail_subtask") is not None or cfg.get("fail_after_checkpoint")):
        names.append(STRUCK)
    if cfg.get("checkpoints") == "unaligned" and cfg.get("failure") and cfg.get("inflight_wait_s") is not None:
        names.append(CHANNELS)
    return names


def struck_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``failure-struck-as-asked`` (module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.
    """
    cfg = header.get("config") or {}
    failure = next((e for e in events if e.get("kind") == "failure" and not e.get("second")), None)
    if failure is None:
        return Check.unchecked(STRUCK, "no failure event: where it struck cannot be checked")
    asked = []
    want_sub = cfg.get("fail_subtask")
    if want_sub is not None:
        got = failure.get("subtask")
        if got is None:
            return Check.unchecked(STRUCK, f"asked for subtask {want_sub}; the failure event (seq {failure['seq']}) "
                                           "does not name its subtask")
        if got != want_sub:
            return Check.violated(STRUCK, f"asked for subtask {want_sub}; the failure struck subtask {got} "
                                          f"(seq {failure['seq']})", offending_seq=failure["seq"])
        asked.append(f"subtask {got}")
    after = cfg.get("fail_after_checkpoint")
    if after:
        done = [e["checkpoint"] for e in events if e.get("kind") == "flink.checkpoint_completed"
                and e["seq"] < failure["seq"] and isinstance(e.get("checkpoint"), int)]
        said = failure.get("after_checkpoint")
        if said is None:
            return Check.unchecked(STRUCK, f"asked for a failure after checkpoint {after}; the failure event "
                                           f"(seq {failure['seq']}) does not name the checkpoint before it")
        if said < after or (done and max(done) < after and said not in done):
            return Check.violated(STRUCK, f"asked for a failure after checkpoint {after}; it struck after "
                                          f"checkpoint {said} (seq {failure['seq']})", offending_seq=failure["seq"])
        asked.append(f"after checkpoint {said} (asked: {after})")
    where = failure.get("where") or "record"
    return Check.held(STRUCK, f"the failure struck in {failure.get('operator', 'rollcheck-pace')} "
                              f"{', '.join(asked)} at {where} (seq {failure['seq']})", examined=1)


def channel_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``channel-state-restored`` (module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.
    """
    cfg = header.get("config") or {}
    ch = next((e for e in events if e.get("kind") == "flink.channel_state"), None)
    restores = [e for e in events if e.get("kind") == "flink.restore" and e.get("attempt", 0) > 0]
    if not restores:
        return Check.unchecked(CHANNELS, "the job never restored: no channel state was restored")
    if ch is None:
        return Check.unchecked(CHANNELS, "the restored checkpoint's channel state was not read (no "
                                         "flink.channel_state event): unaligned recovery is untested")
    if ch.get("reason"):
        return Check.unchecked(CHANNELS, f"the restored checkpoint's metadata could not be read: {ch['reason']}")
    restored = {e.get("checkpoint") for e in restores}
    if ch.get("checkpoint") not in restored:
        return Check.violated(CHANNELS, f"the channel state read is checkpoint {ch.get('checkpoint')}'s; the job "
                                        f"restored {sorted(str(c) for c in restored)}", offending_seq=ch["seq"])
    held = int(ch.get("input_bytes") or 0) + int(ch.get("output_bytes") or 0)
    if held <= 0:
        return Check.unchecked(CHANNELS, f"the restored checkpoint {ch['checkpoint']} held no data in flight: "
                                         "this run did not test the restore of channel state (not an unaligned test)")
    what = (f"restored checkpoint {ch['checkpoint']} held {ch.get('input_bytes')} B of input channel and "
            f"{ch.get('output_bytes')} B of output subpartition state in {len(ch.get('holders') or [])} subtasks")
    rescale = cfg.get("rescale")
    if rescale:
        p1, p2 = int(rescale[0]), int(rescale[1])
        after = {e.get("parallelism") for e in restores if e.get("parallelism") is not None}
        if after and after != {p2}:
            return Check.unchecked(CHANNELS, f"{what}; asked to restore at parallelism {p2}, the restored tasks ran "
                                             f"at {sorted(str(p) for p in after)}")
        what += f", written at parallelism {p1} and restored at {p2} (redistributed)"
    return Check.held(CHANNELS, what, examined=max(1, len(ch.get("holders") or [])))
