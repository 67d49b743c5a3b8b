"""The runner of the Flink job process that ``rollcheck flink record`` starts in the Flink environment.

This file runs under the separate PyFlink environment (``.venv-flink``) as
``python job/main.py CONFIG.json``: it imports only the standard library and ``pyflink``, never the
rest of rollcheck. It writes raw observations into the run folder named by the config; the
recorder (:mod:`rollcheck.flink_replay.recording.record`) turns them into a ``rollcheck.trace/1``
file.

It runs the word-count job, or a user's job (``job: "module"``) after a failure-free reference run
in the same JVM; ``rescale: [P1, P2]`` runs two jobs (fail at P1, restore at P2). The job process
is split in modules of one concept each, beside this one: ``user``, ``environment``,
``pipelines``, ``execute``, ``failures`` and ``files``.

See docs/internals/flink-job.md for the dataflows, the state backends and the rescaled run.
"""

from __future__ import annotations

import json
import os
import site
import sys

if __package__:  # imported as rollcheck.flink_replay (tests, the recorder's helpers)
    from .channels import channel_state
    from .execute import execute
    from .failures import classify_failure, driver_error, root_cause_text, write_engine_error
    from .files import write_json
    from .user import KeyDeclarationError, UserCodeError, load_user_job, resolve_key
else:  # run by main.py in the PyFlink environment: this folder is on sys.path
    from channels import channel_state  # type: ignore[no-redef]
    from execute import execute  # type: ignore[no-redef]
    from failures import (  # type: ignore[no-redef]
        classify_failure,
        driver_error,
        root_cause_text,
        write_engine_error,
    )
    from files import write_json  # type: ignore[no-redef]
    from user import KeyDeclarationError, UserCodeError, load_user_job, resolve_key  # type: ignore[no-redef]

__all__ = ["main", "run_one", "execute", "classify_failure", "resolve_key", "KeyDeclarationError"]

#: the names this module had before the split (tests and tools import them from here)
_root_cause_text = root_cause_text


def main(config_path: str) -> int:
    """Run the job described by the config file.

    A config with ``runs`` runs each of them in turn, in the same JVM (each entry overrides the base
    config and names its own ``run_dir``).

    Parameters
    ----------
    config_path : str
        The JSON config the recorder wrote.

    Returns
    -------
    int
        The process's exit code (the highest of its runs', :func:`_exit_code`).
    """
    # thread mode embeds CPython in the JVM (pemja): it finds pyflink, pemja and this file only
    # through PYTHONPATH, which the gateway JVM inherits from this process
    paths = [os.path.dirname(os.path.abspath(__file__)), *site.getsitepackages()]
    with open(config_path) as f:
        cfg = json.load(f)
    if cfg.get("module"):
        paths.insert(0, os.path.dirname(os.path.abspath(cfg["module"])))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    if "runs" in cfg:
        rc = 0
        for sub in cfg["runs"]:
            one = {k: v for k, v in cfg.items() if k != "runs"}
            one.update(sub)
            os.makedirs(one["run_dir"], exist_ok=True)
            rc = max(rc, _guarded(one))
        return rc
    return _guarded(cfg)


def _guarded(cfg: dict) -> int:
    """Run :func:`run_one`, recording an exception of rollcheck's own code as a typed error record.

    Exceptions of the engine's gateway and of the user's calls (recorded where they are made) are not
    recorded here; the exception is raised again (the traceback goes to the log).
    """
    try:
        return run_one(cfg)
    except Exception as e:
        error = driver_error(e)
        if error is not None:
            write_engine_error(cfg["run_dir"], error)
        raise


def run_one(cfg: dict) -> int:
    """Record one run: a reference run first for a user's job, then the run itself.

    For ``rescale`` the run is two jobs: the one that fails at P1, the one restored at P2.

    Parameters
    ----------
    cfg : dict
        The run's config (``run_dir``, ``job``, ``failure``, ...).

    Returns
    -------
    int
        The run's exit code (:func:`_exit_code`).
    """
    run_dir = cfg["run_dir"]
    user = None
    if cfg.get("job") == "module":
        try:
            module, recs, key_idx, layout = load_user_job(cfg)
        except UserCodeError:
            return 2
        cfg = dict(cfg, records=len(recs), key_idx=key_idx, sources=layout)
        if cfg.get("fail_at_fraction") and cfg.get("fail_at_record") is not None:
            # the matrix fails every job half way through its own input
            cfg["fail_at_record"] = max(1, int(len(recs) * float(cfg["fail_at_fraction"])))
        user = (module, recs, layout)
        if cfg.get("reference", True):
            ref_dir = os.path.join(run_dir, "reference")
            os.makedirs(ref_dir, exist_ok=True)
            ref = dict(cfg, run_dir=ref_dir, fail_at_record=None, failure=None, rescale=None,
                       cluster_rest_port=None)
            info = execute(ref, user=user)
            write_json(os.path.join(ref_dir, "run.json"), info)
            if info.get("user_error") or info["final_state"] != "FINISHED":
                return _exit_code(info)
        if cfg.get("batch_equivalent", True) and not cfg.get("rescale"):
            _batch_run(cfg, user)
    if cfg.get("rescale"):
        p1, p2 = (int(x) for x in cfg["rescale"])
        first = execute(dict(cfg, parallelism=p1), user=user, restarts=False)
        jobs = [first]
        if not first.get("user_error"):
            path = _latest_retained(first, os.path.join(run_dir, "checkpoints"))
            if path is None:
                first["rescale_error"] = "no retained completed checkpoint to restore from"
            else:
                if cfg.get("checkpoints") == "unaligned" and cfg.get("inflight_wait_s") is not None:
                    first["rest"]["channel_state"] = channel_state(path, None)
                second = execute(dict(cfg, parallelism=p2), user=user, restore_path=path,
                                 attempt_offset=first["max_attempt"] + 1)
                second["restored_from"] = path
                jobs.append(second)
        info = _merge(jobs)
    else:
        info = execute(cfg, user=user)
        info["jobs"] = [{k: info.get(k) for k in ("job_id", "final_state", "timestamps", "parallelism")}]
    if cfg.get("checkpoints") == "unaligned" and cfg.get("failure") and cfg.get("inflight_wait_s") is not None:
        _record_channel_state(cfg, info)
    write_json(os.path.join(run_dir, "run.json"), info)
    return _exit_code(info)


def _record_channel_state(cfg: dict, info: dict) -> None:
    """Write ``channel-state.json``: the data in flight the restored checkpoint held.

    It reads the checkpoint's ``_metadata`` while it still exists (a finished job discards its
    checkpoints), or records why it could not be read; nothing when the job never restored.
    """
    read = info["rest"].get("channel_state")
    if read is None and info["rest"].get("restored"):
        read = {"checkpoint": info["rest"]["restored"][0].get("id"), "input_bytes": 0, "output_bytes": 0,
                "holders": [], "error": "the restore was seen without its checkpoint's path"}
    if read is not None:
        write_json(os.path.join(cfg["run_dir"], "channel-state.json"), read)


def _batch_run(cfg: dict, user) -> None:
    """Run the batch-equivalent oracle's job: the same job and input in Flink's BATCH runtime mode.

    No checkpoints, no failure, no pacing; in ``batch/``, its rows of every KEY in the order the job
    emitted them (``batch/batch-out``). A module that declares ``BATCH_EQUIVALENT = "reason"`` (its
    output has no batch meaning: processing time, arrival order) is not run; a batch run that fails is
    recorded with Flink's reason, never fails the recording.
    """
    bdir = os.path.join(cfg["run_dir"], "batch")
    os.makedirs(bdir, exist_ok=True)
    declared = getattr(user[0], "BATCH_EQUIVALENT", True)
    if declared is not True:
        write_json(os.path.join(bdir, "run.json"), {"final_state": "NOT_RUN", "skipped": str(declared)})
        return
    bcfg = dict(cfg, run_dir=bdir, fail_at_record=None, failure=None, rescale=None, cluster_rest_port=None,
                runtime_mode="batch", no_checkpoints=True, rate=1e9,
                timeout_s=min(float(cfg.get("timeout_s", 300)), 120.0))  # a bounded input: a batch job ends
    try:
        info = execute(bcfg, user=user, restarts=False)
    except Exception as e:  # noqa: BLE001 - the batch run's failure is the oracle's reason, not the recording's
        info = {"final_state": "ERROR", "failure_cause": f"{type(e).__name__}: {e}"[:400]}
    write_json(os.path.join(bdir, "run.json"), info)


def _exit_code(info: dict) -> int:
    """The job process's exit code for one run's result.

    2 the user's module failed, 4 rollcheck's own code raised inside the engine, 1 the job did not
    finish, else 0 (the recorder reads the run folder's records; the code is for a person reading the
    log).
    """
    if info.get("user_error"):
        return 2
    if (info.get("engine_error") or {}).get("code") == "rollcheck":
        return 4
    return 0 if info["final_state"] == "FINISHED" else 1


def _on_disk_completed(info: dict, base: str) -> dict[str, dict]:
    """The failed job's completed checkpoints as its checkpoint folder shows them.

    They are the ``chk-N`` folders with a ``_metadata`` file (written when the checkpoint completes),
    as REST-like history entries. The REST poll can miss a checkpoint that completed just before the
    job failed; the folder cannot. The completion time is the ``_metadata`` file's modification time.
    """
    out: dict[str, dict] = {}
    folder = os.path.join(base, str(info.get("job_id") or ""))
    if not info.get("job_id") or not os.path.isdir(folder):
        return out
    for d in os.listdir(folder):
        meta = os.path.join(folder, d, "_metadata")
        if d.startswith("chk-") and d[4:].isdigit() and os.path.exists(meta):
            t_ms = int(os.path.getmtime(meta) * 1000)
            out[d[4:]] = {"id": int(d[4:]), "status": "COMPLETED", "latest_ack_timestamp": t_ms,
                          "trigger_timestamp": t_ms, "external_path": "file:" + os.path.join(folder, d),
                          "seen_on_disk_only": True}
    return out


def _latest_retained(info: dict, base: str) -> str | None:
    """The retained folder of the latest checkpoint the failed job completed.

    The newest of those the REST poll saw and those its checkpoint folder holds (the poll can miss the
    last one).
    """
    for cid, h in _on_disk_completed(info, base).items():
        if info["rest"]["checkpoints"].get(cid, {}).get("status") != "COMPLETED":
            info["rest"]["checkpoints"][cid] = h  # completed, though the poll did not see it
    done = [h for h in info["rest"]["checkpoints"].values() if h.get("status") == "COMPLETED"]
    for h in sorted(done, key=lambda h: -int(h["id"])):
        path = h.get("external_path") or ""
        local = path[len("file:"):] if path.startswith("file:") else path
        if local and os.path.exists(os.path.join(local, "_metadata")):
            return path
    for root, dirs, _files in os.walk(base):
        chk = sorted((d for d in dirs if d.startswith("chk-") and os.path.exists(os.path.join(root, d, "_metadata"))),
                     key=lambda d: -int(d[4:]))
        if chk:
            return "file://" + os.path.join(root, chk[0])
    return None


def _merge(jobs: list[dict]) -> dict:
    """One run.json for the jobs of a rescaled run (checkpoint ids continue across the restore)."""
    last = jobs[-1]
    out = dict(last)
    out["rest"] = {"checkpoints": {}, "restored": [], "states": []}
    out["commits"] = []
    for j in jobs:
        out["rest"]["checkpoints"].update(j["rest"]["checkpoints"])
        out["rest"]["restored"].extend(j["rest"]["restored"])
        out["rest"]["states"].extend(j["rest"]["states"])
        if "channel_state" in j["rest"]:
            out["rest"]["channel_state"] = j["rest"]["channel_state"]
        out["commits"].extend(j["commits"])
    out["t_start"] = jobs[0]["t_start"]
    out["jobs"] = [{k: j.get(k) for k in ("job_id", "final_state", "timestamps", "parallelism", "restored_from",
                                          "rescale_error", "attempt_offset", "failure_cause")} for j in jobs]
    if len(jobs) < 2:
        out["final_state"] = "NOT_RESTORED"
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
