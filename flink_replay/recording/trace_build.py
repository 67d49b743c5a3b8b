"""Merge the raw observations of a Flink run folder into a ``rollcheck.trace/1`` file.

The events (:mod:`rollcheck.flink_replay.recording.trace_events`), ordered by time, come with the
engine-neutral core next to them (a ``checkpoint`` of every task per completed checkpoint, a
``recovery`` after each failure), then the sinks' output, the batch-equivalent run and ``end``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.checks.replay import source_cut
from rollcheck.flink_replay.recording.run_folder import INJECTED_TEXT
from rollcheck.flink_replay.recording.trace_events import Timed, failure_events, observed_events

__all__ = ["HEADER_CONFIG_KEYS", "build_trace", "tx_lines"]

#: The recording's settings a trace header's ``config`` holds.
#: the header keys of a failure's placement: written only when set (older headers have none)
_PLACEMENT_KEYS = ("fail_subtask", "fail_after_checkpoint", "inflight_wait_s")
HEADER_CONFIG_KEYS = ("checkpoints", "parallelism", "interval_ms", "records", "rate", "keys", "fail_at_record",
                      "failure", "backend", "rescale", "max_parallelism", "max_records", "engine_version",
                      "reference_version", "fail_subtask", "fail_after_checkpoint", "inflight_wait_s")


def build_trace(run: str | Path, out: str | Path, *, env_version: str = "?") -> dict[str, Any]:
    """Merge the raw observations of a run folder into a ``rollcheck.trace/1`` file.

    Parameters
    ----------
    run : str or Path
        The run folder.
    out : str or Path
        The trace file to write.
    env_version : str, optional
        The PyFlink release the run used (the header's ``engine_version``).

    Returns
    -------
    dict
        ``restored_checkpoint``, ``final_state``, ``events``, ...
    """
    run = Path(run)
    cfg = json.loads((run / "config.json").read_text())
    info = json.loads((run / "run.json").read_text())
    timed = observed_events(run, info)  # (t_us, tiebreak, event)
    failure_events(run, info, timed)
    injected = (run / "failure.json").exists()
    for c in info.get("commits", []):
        timed.append((int(c["t"] * 1e6), 7, {"kind": "flink.sink_commit", "file": c["file"], "lines": c["lines"]}))
    failed = _recovery_failed(info, timed, run) if injected else None
    if failed is not None:
        timed.append((int(float(info.get("t_end") or 0) * 1e6), 8, failed))
    # unaligned: the keyed snapshot reflects fewer records than the source snapshot; the difference
    # per checkpoint are the records the checkpoint stored as channel state
    if cfg["checkpoints"] == "unaligned" and cfg.get("job") != "module":
        _fill_inflight(timed)
    timed.sort(key=lambda x: (x[0], x[1]))
    errors = run / "ustate-errors.log"
    if errors.exists() and timed:  # a dump of the user's keyed state failed: said, at the end
        for line in errors.read_text(errors="replace").splitlines()[:5]:
            timed.append((timed[-1][0], 9, {"kind": "flink.user_state_error", "error": line[:300]}))
    module = cfg.get("job") == "module"
    header = _header(cfg, info, env_version, module)
    restored = None
    with open(out, "w") as fh:
        fh.write(json.dumps(header) + "\n")
        seq = 0
        t_first = timed[0][0] if timed else 0
        for t, e in _core_events(timed, header["processes"]):
            seq += 1
            if e["kind"] == "flink.restore" and e["attempt"] > 0:
                restored = e["checkpoint"]
            fh.write(json.dumps({"seq": seq, **e, "t": round((t - t_first) / 1e6, 6)}) + "\n")
        for sink, lines, extra in _outputs(run, module):
            seq += 1
            fh.write(json.dumps({"seq": seq, "kind": "flink.sink_output", "sink": sink, **extra,
                                 "lines": lines}) + "\n")
        batch = _batch_output(run / "batch") if module else None
        if batch is not None:
            seq += 1
            fh.write(json.dumps({"seq": seq, **batch}) + "\n")
        seq += 1
        fh.write(json.dumps({"seq": seq, "kind": "end"}) + "\n")
    return {"restored_checkpoint": restored, "final_state": info.get("final_state"), "events": seq,
            "failure_injected": injected}


def _outputs(run: Path, module: bool) -> list[tuple[str, list[Any], dict[str, Any]]]:
    """The sinks' lines at the end: ``(sink, lines, extra fields)`` per ``flink.sink_output``."""
    outputs: list[tuple[str, list[Any], dict[str, Any]]] = [("tx", tx_lines(run / "tx"), {})]
    if module:
        # the failure-free reference run of the same job, and the user's own sink (if any)
        outputs.append(("reference", tx_lines(run / "reference" / "tx"), {}))
        for name, folder in (("user", run), ("user-reference", run / "reference")):
            if (folder / "user-sink.json").exists():
                outputs.append((name, json.loads((folder / "user-sink.json").read_text())["rows"], {}))
        # the KEY of every row handed to the module's sink (job/main.py's Handed), per generation
        handed_ref = sorted((run / "reference").glob("handed-gen*.txt"))
        if handed_ref:
            outputs.append(("handed-reference", [x for f in handed_ref for x in f.read_text().splitlines() if x], {}))
            for g in (0, 1):
                outputs.append((f"handed-{g}", [x for f in sorted(run.glob(f"handed-gen{g}-*.txt"))
                                                for x in f.read_text().splitlines() if x], {"generation": g}))
    else:
        naive: dict[str, list[str]] = {"0": [], "1": []}
        for f in sorted((run / "naive").glob("gen*.txt")):
            naive[f.name[3]].extend(x for x in f.read_text().splitlines() if x)
        outputs += [("naive", naive["0"], {"generation": 0}), ("naive", naive["1"], {"generation": 1})]
    return outputs


def _header(cfg: dict[str, Any], info: dict[str, Any], env_version: str, module: bool) -> dict[str, Any]:
    """The trace's header: the recording's settings, the engine's, and a user's job's own."""
    header: dict[str, Any] = {
        "format": "rollcheck.trace/1", "source": "flink", "seed": cfg.get("seed", 0),
        "processes": ["source", "keyed"], "job": "module" if module else "wordcount",
        "engine_version": env_version,
        "config": {k: cfg.get(k) for k in HEADER_CONFIG_KEYS
                   if k not in _PLACEMENT_KEYS or cfg.get(k) is not None},
        "flink": {"pyflink": env_version, "job_id": info.get("job_id"), "final_state": info.get("final_state"),
                  "python_mode": cfg.get("python_mode", "thread")}}
    if info.get("failure_cause") and info.get("final_state") != "FINISHED":
        header["flink"]["failure_cause"] = info["failure_cause"]  # why the (last) job did not finish
    if module:
        header["config"]["records"] = info.get("records", cfg.get("records"))
        header["config"]["fail_at_record"] = info.get("fail_at_record", cfg.get("fail_at_record"))
        header["key"] = info.get("key")
        header["module"] = cfg.get("module_arg", cfg["module"])  # as the user named it
        header["key_format"] = "N\\x1fKEY\\x1fROW: the row's number within its KEY, KEY and the row as JSON"
        header["sink_guarantee"] = cfg.get("sink_guarantee") or "exactly-once"  # the module's SINK_GUARANTEE
        # the user's keyed operators were logged key by key (RollcheckStateLog)
        header["user_state_log"] = True
        if info.get("sources"):  # SOURCES: the names and each one's records in the run's input
            header["sources"] = {"names": info["sources"]["names"], "records": info["sources"]["records"]}
            if cfg.get("drop_sources"):  # a finding being shrunk without these sources
                header["config"]["drop_sources"] = list(cfg["drop_sources"])
    return header


def _core_events(timed: Timed, processes: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """``timed`` (sorted) with the engine-neutral core next to the flink.* kinds.

    For ``rollcheck check trace``: a ``checkpoint`` of every task per completed checkpoint (index =
    its ordinal), and after each failure a ``recovery`` to the line the tasks restored.
    """
    # A process takes its part of a checkpoint when its last subtask snapshots: the core event goes
    # there, and only for checkpoints that completed. The `failure` stands for the failure of the
    # job's region, which Flink completes by cancelling every task: a checkpoint that completed after
    # a task raised (another task's snapshot can still follow the raise) was taken before that, so
    # its core events come just before the failure.
    # every failure (two for "during-restore" and "twice") and the first restore after it
    fails: list[tuple[int, int | None]] = []
    for tf in sorted(t for t, _, e in timed if e["kind"] == "failure"):
        tr = next((t for t, _, e in sorted(timed, key=lambda x: (x[0], x[1]))
                   if e["kind"] == "flink.restore" and e["attempt"] > 0 and t >= tf), None)
        fails.append((tf, tr))
    taken: dict[tuple[int, str], int] = {}
    for t, _, e in timed:
        if e["kind"] == "flink.snapshot":
            key = (e["checkpoint"], e["task"])
            taken[key] = max(taken.get(key, t), t)
    core_timed: list[tuple[int, int, int, dict[str, Any]]] = []  # (t, rank, position, event)
    ordinal: dict[int, int] = {}
    recoveries = 0
    for pos, (t, rank_, e) in enumerate(timed):
        core_timed.append((t, rank_, 2 * pos, e))
        if e["kind"] == "flink.checkpoint_completed":
            ordinal[e["checkpoint"]] = len(ordinal) + 1
            for proc in processes:
                at = min(t, taken.get((e["checkpoint"], proc), t))
                rk = 2
                for t_fail, t_rec in fails[::-1]:
                    if at >= t_fail and (t_rec is None or t < t_rec):
                        at, rk = t_fail, 0  # before the failure (rank 1 at the same time)
                        break
                core_timed.append((at, rk, 2 * pos + 1, {"kind": "checkpoint", "process": proc,
                                                        "index": ordinal[e["checkpoint"]], "forced": False}))
        elif e["kind"] == "flink.restore" and e["attempt"] > 0 and recoveries < len(fails) \
                and t >= fails[recoveries][0]:  # the first restore after each failure
            recoveries += 1
            k = ordinal.get(e["checkpoint"]) if e["checkpoint"] is not None else 0
            line = {proc: k for proc in processes}
            core_timed.append((t, rank_, 2 * pos + 1, {"kind": "recovery", "line": line, "in_transit": []}))
    core_timed.sort(key=lambda x: (x[0], x[1], x[2]))
    return [(t, e) for t, _, _, e in core_timed]


def _restarts_in_logs(run: Path, job_id: str | None) -> int:
    """How often Flink's logs say the job switched to ``RESTARTING`` (the REST poll can miss a quick one)."""
    if not job_id:
        return 0
    n = 0
    for log in sorted(run.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if f"({job_id}) switched from state" in line and line.rstrip().endswith("to RESTARTING."):
                n += 1
    return n


def _recovery_failed(info: dict[str, Any], timed: list[tuple[int, int, dict[str, Any]]],
                     run: Path) -> dict[str, Any] | None:
    """``flink.recovery_failed``: after the injected failure the (last) job did not finish.

    The restart from the engine's own checkpoint failed with the engine's exception (Flink's root
    cause), or restarted until the limit ended it. None when it finished (or the user's code raised:
    the recorder refuses that run as the module's failure before a trace is written).

    The checkpoint named is the one the restarted tasks restored (rollcheck's taps, else the REST
    API's ``restored``), else the latest completed before the failure, the one Flink restores.
    """
    final = info.get("final_state")
    if final == "FINISHED" or info.get("user_error"):
        return None
    restarts = max(int(info.get("restarts") or 0), _restarts_in_logs(run, info.get("job_id")))
    cause = str(info.get("failure_cause") or "")
    # only what is the engine's: a job Flink failed with its exception, or one restarted again and
    # again until the limit (not a rescaled run rollcheck could not restore, not a slow run cut at
    # the limit after one restart)
    if not ((final == "FAILED" and cause and INJECTED_TEXT not in cause) or (final == "TIMEOUT" and restarts >= 2)):
        return None
    events = [e for _, _, e in sorted(timed, key=lambda x: (x[0], x[1]))]
    t_fail = next((t for t, _, e in timed if e["kind"] == "failure"), None)
    restored = [e.get("checkpoint") for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    reported = [e.get("checkpoint") for e in events if e["kind"] == "flink.restore_reported"]
    completed = [e["checkpoint"] for t, _, e in timed if e["kind"] == "flink.checkpoint_completed"
                 and (t_fail is None or t <= t_fail)]
    checkpoint = next((c for c in [*restored[::-1], *reported[::-1]] if c is not None),
                      max(completed) if completed else None)
    etype, _, message = cause.partition(": ")
    if not cause:
        etype, message = "", f"restarted {restarts} times without end until the limit"
    return {"kind": "flink.recovery_failed", "final_state": final, "checkpoint": checkpoint,
            "restarts": restarts,
            "exception": etype.strip() or None,
            "message": message.strip()[:400], "user_code": False}


def _batch_output(folder: Path) -> dict[str, Any] | None:
    """``flink.batch_output``: the batch-equivalent oracle's run (``job/main.py``'s ``_batch_run``).

    Its final state (and Flink's reason when it did not finish, or the module's reason when it
    declared no batch meaning), and per subtask of the output step the ``KEY<US>ROW`` lines in the
    order the job emitted them. None when the recording has no batch run (a rescaled run, an older
    recorder).
    """
    info_path = folder / "run.json"
    if not info_path.exists():
        return None
    info = json.loads(info_path.read_text())
    files = sorted((folder / "batch-out").glob("rows-*.txt")) if (folder / "batch-out").exists() else []
    return {"kind": "flink.batch_output", "final_state": info.get("final_state"),
            "reason": info.get("skipped") or info.get("failure_cause"),
            "subtasks": [[x for x in f.read_text().splitlines() if x] for f in files]}


def tx_lines(folder: Path) -> list[str]:
    """The lines of the committed (visible) files of a FileSink folder."""
    lines: list[str] = []
    if folder.exists():
        for f in sorted(folder.rglob("*")):
            if f.is_file() and not f.name.startswith("."):
                lines.extend(x for x in f.read_text().splitlines() if x)
    return lines


def _fill_inflight(timed: list[tuple[int, int, dict[str, Any]]]) -> None:
    events = [e for _, _, e in timed]
    # the keys a keyed subtask owns: every key it ever counted (early in the run a key it owns may
    # still be at 0 in its state while all of that key's records are in flight)
    owned: dict[int, set[int]] = {}
    for e in events:
        if e["kind"] in ("flink.snapshot", "flink.task_finished", "flink.restore") and e["task"] == "keyed":
            owned.setdefault(e["subtask"], set()).update(k for k, c in enumerate(e["per_key"]) if c > 0)
    for e in events:
        if e["kind"] == "flink.snapshot" and e["task"] == "keyed":
            cut = source_cut(events, e["attempt"], e["checkpoint"])
            if cut is None:
                continue
            e["inflight_records"] = sum(cut[0][k] - e["per_key"][k] for k in owned.get(e["subtask"], set()))
