"""Run one Flink job and watch it: submit, poll the REST API, collect what the run left.

:func:`execute` builds the job (:mod:`environment`, :mod:`pipelines`), submits it, and
polls the MiniCluster's REST API every 100 ms for job state transitions and checkpoint statistics
while it scans the transactional sink's folder for committed files. When the job failed, the
failure's frames say whose code raised (:mod:`failures`). After a user's job finished, the
user's ``read_output`` reads what the user's own sink wrote.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``main.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import os
import sys
import time

if __package__:  # imported as rollcheck.flink_replay (tests, the recorder's helpers)
    from .channels import channel_state
    from .environment import make_environment, make_taps
    from .failures import classify_failure, root_cause_text, write_engine_error
    from .files import get_json, write_json
    from .pipelines import build
    from .user import UserCodeError, call_user, user_error
else:  # run by main.py in the PyFlink environment: this folder is on sys.path
    from channels import channel_state  # type: ignore[no-redef]
    from environment import make_environment, make_taps  # type: ignore[no-redef]
    from failures import classify_failure, root_cause_text, write_engine_error  # type: ignore[no-redef]
    from files import get_json, write_json  # type: ignore[no-redef]
    from pipelines import build  # type: ignore[no-redef]
    from user import UserCodeError, call_user, user_error  # type: ignore[no-redef]

__all__ = ["execute"]


def execute(cfg: dict, *, user=None, restarts: bool = True, restore_path: str | None = None,
            attempt_offset: int = 0) -> dict:
    """Run one Flink job and return what the REST poller and the sink saw.

    The job is the word count, or the user's job when ``user`` = (module, records, layout); raw
    observations go to ``cfg["run_dir"]``.
    """
    run_dir = cfg["run_dir"]
    n_records = int(cfg["records"])
    par = int(cfg["parallelism"])
    backend = cfg.get("backend") or "hashmap"
    os.makedirs(os.path.join(run_dir, "naive"), exist_ok=True)
    env, port = make_environment(cfg, restarts=restarts, restore_path=restore_path)
    tap, keyed_tap = make_taps(run_dir, attempt_offset, int(cfg["keys"]))
    job_name = build(cfg, env, tap, keyed_tap, user=user, attempt_offset=attempt_offset)
    if isinstance(job_name, dict):  # the user's job() or sink() failed while building the graph
        return job_name
    key_idx = [int(i) for i in cfg.get("key_idx") or []]

    t_start = time.time()
    watch = _Watch(cfg, env.execute_async(job_name), port, restore_path)
    watch.run(user, t_start + float(cfg.get("timeout_s", 300)))
    job = watch.last_poll()
    result = {"job_id": watch.job_id, "final_state": watch.final_state, "t_start": t_start,
              "t_end": time.time(), "timestamps": (job or {}).get("timestamps", {}), "rest": watch.polls,
              "commits": watch.commits, "pyflink_python": sys.executable, "parallelism": par,
              "max_attempt": _max_attempt(run_dir), "backend": backend, "attempt_offset": attempt_offset,
              "failure_cause": watch.failure_cause, "restarts": watch.restarts()}
    if user is not None:
        result["key"] = key_idx
        result["records"] = n_records
        result["fail_at_record"] = cfg.get("fail_at_record")
        if cfg.get("sources"):  # a job with several input streams: their names, sizes and interleaving
            result["sources"] = cfg["sources"]
    if user is not None and os.path.exists(os.path.join(run_dir, "user-error.json")):
        result["user_error"] = True
    if watch.final_state == "FAILED" and watch.failure_text:
        # whose code raised inside the engine: the user's (exit 2) or rollcheck's (exit 4)
        error = classify_failure(watch.failure_text, cfg.get("module"))
        if error is not None:
            result["engine_error"] = error
            write_engine_error(run_dir, error)
            if error["code"] == "user":
                result["user_error"] = True
    if user is not None and hasattr(user[0], "read_output") and watch.final_state == "FINISHED" \
            and cfg.get("runtime_mode") != "batch":
        _read_output(cfg, user, result)
    return result


def _max_attempt(run_dir: str) -> int:
    """The highest attempt number of the tap files in ``run_dir``."""
    max_attempt = 0
    for name in os.listdir(run_dir):
        if name.startswith("tap-") and name.endswith(".jsonl"):
            max_attempt = max(max_attempt, int(name[:-len(".jsonl")].rsplit("-", 1)[1]))
    return max_attempt


def _read_output(cfg: dict, user, result: dict) -> None:
    """Read what the user's own sink wrote into ``user-sink.json``.

    The user's ``read_output`` is time-bounded and type-checked; a failure marks ``result`` as the
    user's error.
    """
    run_dir = cfg["run_dir"]
    try:
        rows = call_user(run_dir, "read_output", float(cfg.get("call_timeout", 300)), user[0].read_output,
                         os.path.join(run_dir, "user-sink"))
    except UserCodeError:
        result["user_error"] = True
        return
    if not isinstance(rows, list) or not all(isinstance(r, (tuple, list)) for r in rows):
        user_error(run_dir, "read_output", "must return a list of tuples")
        result["user_error"] = True
        return
    write_json(os.path.join(run_dir, "user-sink.json"), {"rows": [list(r) for r in rows]})


class _Watch:
    """The poller of one submitted job.

    It gathers the job's state transitions, checkpoint statistics and restores (``polls``), the
    transactional sink's committed files (``commits``) and how the job ended.
    """

    def __init__(self, cfg: dict, client, port: int, restore_path: str | None):
        self.cfg = cfg
        self.run_dir = cfg["run_dir"]
        self.client = client
        self.job_id = str(client.get_job_id())
        self.base = f"http://127.0.0.1:{port}"
        self.polls: dict = {"checkpoints": {}, "restored": [], "states": []}
        self.commits: list = []
        self.seen_files: set = set()
        self.tx_dir = os.path.join(self.run_dir, "tx")
        self.wants_channels = cfg.get("checkpoints") == "unaligned" and bool(cfg.get("failure")) \
            and cfg.get("inflight_wait_s") is not None and restore_path is None
        self.last_state: str | None = None
        self.failures_seen = 0
        self.failure_cause: str | None = None
        self.failure_text = ""
        self.final_state = "UNKNOWN"

    def scan_commits(self) -> None:
        """Note the sink's files committed since the last scan."""
        # a file of the FileSink becomes visible (no leading dot) when its transaction commits
        for root, _dirs, files in os.walk(self.tx_dir):
            for name in files:
                path = os.path.join(root, name)
                if name.startswith(".") or path in self.seen_files:
                    continue
                self.seen_files.add(path)
                with open(path) as fh:
                    n = sum(1 for line in fh if line.strip())
                self.commits.append({"t": time.time(), "file": os.path.relpath(path, self.tx_dir), "lines": n})

    def run(self, user, deadline: float) -> None:
        """Poll every 100 ms until the job ends.

        It also stops when the user's module is at fault, the deadline passed or an unbounded job ran long
        enough (then it is cancelled).
        """
        misses = 0
        done = False
        while not done:
            job = get_json(f"{self.base}/jobs/{self.job_id}")
            misses = misses + 1 if job is None else 0
            if misses >= 20 and self.last_state is not None:
                self._ask_client()
                break
            if job is not None:
                done = self._job_state(job)
            self._checkpoints()
            self.scan_commits()
            stop = self._stop(user, deadline)
            if stop is not None:
                self.client.cancel()
                self.final_state = stop
                break
            time.sleep(0.1)

    def _ask_client(self) -> None:
        """Ask the client how the job ended, once the REST API is gone.

        The MiniCluster of a local execution shuts down when the job ends.
        """
        try:
            self.client.get_job_execution_result().result()
            self.final_state = "FINISHED"
        except Exception as e:  # noqa: BLE001 - any error from the job means it failed
            self.final_state = "FAILED"
            self.failure_text = str(e)
            self.failure_cause = root_cause_text(self.failure_text)

    def _job_state(self, job: dict) -> bool:
        """Note a state transition; True once the job reached a final state."""
        state = job.get("state")
        if state != self.last_state:
            self.polls["states"].append({"state": state, "t": time.time(),
                                         "timestamps": job.get("timestamps", {})})
            self.last_state = state
        if state not in ("FINISHED", "FAILED", "CANCELED"):
            return False
        self.final_state = state
        if state == "FAILED":
            self._failure()
        return True

    def _failure(self) -> None:
        """Read the failed job's exception history: its failures and the newest one's text."""
        # on a loaded machine the REST call can time out, or the history can still be empty just
        # after the FAILED transition: ask again for a few seconds
        for _ in range(20):
            exc = get_json(f"{self.base}/jobs/{self.job_id}/exceptions") or {}
            history = (exc.get("exceptionHistory") or {}).get("entries") or []
            if exc.get("root-exception") or history:
                break
            time.sleep(0.5)
        # "root-exception" up to 1.20; Flink 2.0 removed it: the newest entry of the exception
        # history (each failure of the job, newest first) has the text
        self.failures_seen = len(history)
        self.failure_text = str(exc.get("root-exception") or (history[0].get("stacktrace") if history
                                                              else "") or "")
        self.failure_cause = root_cause_text(self.failure_text)

    def _checkpoints(self) -> None:
        """Note the checkpoint statistics and the latest restore (and its channel state)."""
        chk = get_json(f"{self.base}/jobs/{self.job_id}/checkpoints")
        if chk is None:
            return
        polls = self.polls
        for h in chk.get("history", []):
            polls["checkpoints"][str(h["id"])] = h
            if h.get("status") == "COMPLETED" and (h.get("persisted_data") or 0) > 0:
                # an unaligned checkpoint that holds data in flight: the injected failure waits
                # for one (strike)
                mark = os.path.join(self.run_dir, f"inflight-{h['id']}")
                if not os.path.exists(mark):
                    open(mark, "w").close()
        rest = (chk.get("latest") or {}).get("restored")
        if rest and (not polls["restored"] or polls["restored"][-1]["id"] != rest.get("id")):
            polls["restored"].append(rest)
            if self.wants_channels and "channel_state" not in polls and rest.get("external_path"):
                # read now: a job that finishes discards its checkpoints
                polls["channel_state"] = channel_state(rest["external_path"], rest.get("id"))

    def _stop(self, user, deadline: float) -> str | None:
        """The final state to cancel the job with, if it must stop now; else None."""
        run_dir = self.run_dir
        if user is not None and os.path.exists(os.path.join(run_dir, "user-error.json")):
            # the user's module is at fault (a bad output row): no restart can help
            return "USER_ERROR"
        if time.time() > deadline:
            return "TIMEOUT"
        if self.cfg.get("stop_after_s") and os.path.exists(os.path.join(run_dir, "t0")):
            # an unbounded job (utilization runs) ends this long after its first record
            with open(os.path.join(run_dir, "t0")) as fh:
                txt = fh.read()
            if txt and time.time() > float(txt) + float(self.cfg["stop_after_s"]):
                return "STOPPED"
        return None

    def last_poll(self) -> dict | None:
        """Scan the commits and poll the job and its checkpoints once more; the job's entry."""
        self.scan_commits()
        job = get_json(f"{self.base}/jobs/{self.job_id}")
        chk = get_json(f"{self.base}/jobs/{self.job_id}/checkpoints")
        if chk is not None:
            for h in chk.get("history", []):
                self.polls["checkpoints"][str(h["id"])] = h
        return job

    def restarts(self) -> int:
        """How often the job was restarted (the polled transitions to RESTARTING).

        A restart from a checkpoint that fails again and again shows as many (recovery-succeeded names
        them).
        """
        return max(sum(1 for st in self.polls["states"] if st["state"] == "RESTARTING"),
                   self.failures_seen - 1 if self.final_state == "FAILED" else 0)
