"""The Flink word-count job that ``rollcheck flink record`` runs inside the Flink environment.

This file runs under the separate PyFlink environment (``.venv-flink``) as
``python job.py CONFIG.json``: it imports only the standard library and ``pyflink``, never the
rest of rollcheck. It writes raw observations into the run folder named by the config; the
recorder (:mod:`rollcheck.flink_replay.record`) turns them into a ``rollcheck.trace/1`` file.

The job: a checkpointed ``NumberSequenceSource`` (values 1..N, split offsets are checkpointed),
a pass-through Java operator (``RollcheckTap``, mode ``source``) that logs per-key counts of the
records that left the source at every snapshot, a Python map that paces the source to ``rate``
records/s and raises once at record K, a ``keyBy`` shuffle to a keyed count (Python
``ValueState``), a naive side-effect sink (a Python map appending a line per record to a file), a
second tap (mode ``keyed``) that logs the latest count per key, and a transactional ``FileSink``.
A thread polls the MiniCluster REST API for checkpoint statistics and job state transitions.

``job: "module"`` runs a user's job instead (``records(seed)``, ``job(env, source)``, ``KEY``,
optional ``sink``/``read_output``): the same checkpointed source and pacing, the user's records
by index, the user's ``job``, then rollcheck's keyed tap (keyed by ``KEY``) and a transactional
``FileSink``; a failure-free reference run comes first, in the same JVM.

``backend`` selects the state backend (``hashmap``, ``rocksdb`` — incremental checkpoints — or
``changelog``: hashmap with the changelog state backend on the file system). ``rescale: [P1, P2]``
runs the job at P1 without restarts, lets the injected failure fail it, and starts it again at P2
from the latest retained checkpoint (key groups redistributed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.request
import uuid

__all__ = ["main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.loads(r.read().decode())
    except Exception:  # noqa: BLE001 - the endpoint is polled; a miss is retried
        return None


def main(config_path: str) -> int:
    """Run the job described by the config file; a config with ``runs`` runs each of them in turn,
    in the same JVM (each entry overrides the base config and names its own ``run_dir``)."""
    import site

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
            rc = max(rc, run_one(one))
        return rc
    return run_one(cfg)


class UserCodeError(Exception):
    """The user's module failed, hung or returned something of the wrong type (named by the call)."""


def _user_error(run_dir: str, call: str, message: str, *, kind: str = "call") -> None:
    """Record the user's module's failure for the recorder: ``call`` names the call (``kind``
    ``call``: ``records``, ``job``, ...; ``import``) or the module attribute (``attribute``: ``KEY``,
    ``FIELDS``). The first record stays (a task that fails again writes nothing more)."""
    if os.path.exists(os.path.join(run_dir, "user-error.json")):
        return
    with open(os.path.join(run_dir, "user-error.json.tmp"), "w") as f:
        json.dump({"call": call, "error": message, "kind": kind}, f)
    os.replace(os.path.join(run_dir, "user-error.json.tmp"), os.path.join(run_dir, "user-error.json"))


def _call(run_dir: str, what: str, limit: float, fn, *args):
    """Call the user's ``fn`` with a time limit (SIGALRM in this, the main, thread)."""

    def _alarm(signum, frame):  # noqa: ARG001 - signal handler signature
        raise TimeoutError(f"did not return within {limit:g} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return fn(*args)
    except TimeoutError as e:
        _user_error(run_dir, what, str(e))
        raise UserCodeError(what) from None
    except Exception as e:  # noqa: BLE001 - the user's code failed on its own
        _user_error(run_dir, what, f"raised {type(e).__name__}: {e}")
        raise UserCodeError(what) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def load_user_module(path: str):
    """Import the user's job file by path; its functions are pickled by value for the workers."""
    import cloudpickle

    name = "rollcheck_user_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError("import")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    cloudpickle.register_pickle_by_value(mod)
    return mod


class KeyDeclarationError(Exception):
    """``KEY`` or ``FIELDS`` of the user's module do not say which output fields identify a row."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(message)


def resolve_key(module) -> list[int]:
    """The user's ``KEY`` as indices into the output tuple.

    ``KEY`` lists the output fields that identify a row: indices into the output tuple (one int or
    a list/tuple of them), or names of ``FIELDS`` (the names of the output tuple's fields, in
    order), as a Spark query names its columns. Everything that the module alone shows to be wrong
    raises :class:`KeyDeclarationError` naming ``KEY`` (or ``FIELDS``): a name without ``FIELDS``,
    a name not among them, an index beyond them, a negative index, a missing or empty ``KEY``.
    An index beyond the output tuple without ``FIELDS`` shows at the first output row.
    """
    fields = getattr(module, "FIELDS", None)
    if fields is not None:
        if not isinstance(fields, (list, tuple)) or not fields or \
                not all(isinstance(f, str) and f for f in fields):
            raise KeyDeclarationError("FIELDS", f"must be a non-empty list of field names (str), got {fields!r:.80}")
        dup = sorted({f for f in fields if list(fields).count(f) > 1})
        if dup:
            raise KeyDeclarationError("FIELDS", f"names {dup[0]!r} twice")
    if not hasattr(module, "KEY"):
        raise KeyDeclarationError("KEY", "missing: list the output fields that identify a row (indices into the "
                                  "output tuple, or names of FIELDS)")
    spec = module.KEY
    items = [spec] if isinstance(spec, (int, str)) else list(spec) if isinstance(spec, (list, tuple)) else None
    if items is None:
        raise KeyDeclarationError("KEY", f"must be indices into the output tuple or names of FIELDS, "
                                  f"got {type(spec).__name__} {spec!r:.80}")
    if not items:
        raise KeyDeclarationError("KEY", "is empty: list the output fields that identify a row")
    out: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise KeyDeclarationError("KEY", f"{item!r:.60} is neither an index into the output tuple nor a name "
                                      "of FIELDS")
        if isinstance(item, str):
            if fields is None:
                raise KeyDeclarationError("KEY", f"{item!r} is a name, but the module has no FIELDS (the names of "
                                          "the output tuple's fields, in order): add FIELDS or give indices")
            if item not in fields:
                raise KeyDeclarationError("KEY", f"{item!r} is not one of FIELDS {tuple(fields)!r}")
            out.append(list(fields).index(item))
            continue
        if item < 0:
            raise KeyDeclarationError("KEY", f"index {item} is negative: indices count from 0")
        if fields is not None and item >= len(fields):
            raise KeyDeclarationError("KEY", f"index {item} is beyond FIELDS {tuple(fields)!r} "
                                      f"({len(fields)} fields)")
        out.append(item)
    return out


def run_one(cfg: dict) -> int:
    """One recorded run: a reference run first for a user's job, then the run itself (for
    ``rescale`` two jobs: the one that fails at P1, the one restored at P2)."""
    run_dir = cfg["run_dir"]
    user = None
    if cfg.get("job") == "module":
        limit = float(cfg.get("call_timeout", 300))
        import cloudpickle  # noqa: F401 - rollcheck's own import, outside the time limit of the user's import
        try:
            user = _call(run_dir, "import", limit, load_user_module, cfg["module"])
            try:
                key_idx = resolve_key(user)
            except KeyDeclarationError as e:  # seen from the module: before Flink starts
                _user_error(run_dir, e.name, str(e), kind="attribute")
                return 2
            recs = _call(run_dir, "records", limit, user.records, int(cfg.get("seed", 0)))
        except UserCodeError:
            return 2
        if not isinstance(recs, list) or not all(isinstance(r, tuple) for r in recs):
            bad = next((i for i, r in enumerate(recs) if not isinstance(r, tuple)), None) \
                if isinstance(recs, list) else None
            _user_error(run_dir, "records", f"must return a list of tuples, got {type(recs).__name__}"
                        + (f" with element [{bad}] of type {type(recs[bad]).__name__}" if bad is not None else ""))
            return 2
        if not recs:
            _user_error(run_dir, "records", "returned no records")
            return 2
        if cfg.get("max_records"):
            # a finding being shrunk: the first N records of the user's input only
            recs = recs[: int(cfg["max_records"])]
        cfg = dict(cfg, records=len(recs), key_idx=key_idx)
        if cfg.get("fail_at_fraction") and cfg.get("fail_at_record") is not None:
            # the matrix fails every job half way through its own input
            cfg["fail_at_record"] = max(1, int(len(recs) * float(cfg["fail_at_fraction"])))
        user = (user, recs)
        if cfg.get("reference", True):
            ref_dir = os.path.join(run_dir, "reference")
            os.makedirs(ref_dir, exist_ok=True)
            ref = dict(cfg, run_dir=ref_dir, fail_at_record=None, failure=None, rescale=None,
                       cluster_rest_port=None)
            info = execute(ref, user=user)
            _write_json(os.path.join(ref_dir, "run.json"), info)
            if info.get("user_error") or info["final_state"] != "FINISHED":
                return _exit_code(info)
    if cfg.get("rescale"):
        p1, p2 = (int(x) for x in cfg["rescale"])
        first = execute(dict(cfg, parallelism=p1), user=user, restarts=False)
        jobs = [first]
        if not first.get("user_error"):
            path = _latest_retained(first, os.path.join(run_dir, "checkpoints"))
            if path is None:
                first["rescale_error"] = "no retained completed checkpoint to restore from"
            else:
                second = execute(dict(cfg, parallelism=p2), user=user, restore_path=path,
                                 attempt_offset=first["max_attempt"] + 1)
                second["restored_from"] = path
                jobs.append(second)
        info = _merge(jobs)
    else:
        info = execute(cfg, user=user)
        info["jobs"] = [{k: info.get(k) for k in ("job_id", "final_state", "timestamps", "parallelism")}]
    _write_json(os.path.join(run_dir, "run.json"), info)
    return _exit_code(info)


def _exit_code(info: dict) -> int:
    """The job process's exit code for one run's result: 2 the user's module failed, 4 rollcheck's
    own code raised inside the engine, 1 the job did not finish, else 0 (the recorder reads the
    run folder's records; the code is for a person reading the log)."""
    if info.get("user_error"):
        return 2
    if (info.get("engine_error") or {}).get("code") == "rollcheck":
        return 4
    return 0 if info["final_state"] == "FINISHED" else 1


def _write_json(path: str, obj: dict) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def _on_disk_completed(info: dict, base: str) -> dict[str, dict]:
    """The failed job's completed checkpoints as its checkpoint folder shows them (``chk-N`` with a
    ``_metadata`` file, written when the checkpoint completes), as REST-like history entries.

    The REST poll can miss a checkpoint that completed just before the job failed; the folder
    cannot. The completion time is the ``_metadata`` file's modification time.
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
    """The retained folder of the latest checkpoint the failed job completed: the newest of those
    the REST poll saw and those its checkpoint folder holds (the poll can miss the last one)."""
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


def _root_cause_text(text: str) -> str | None:
    """The innermost ``Caused by`` of a Java exception text (the job's own failure, not the restart
    strategy's wrapper), on one line."""
    if not text.strip():
        return None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    caused = [ln[len("Caused by: "):] for ln in lines if ln.startswith("Caused by: ")]
    return (caused[-1] if caused else lines[0])[:400]


#: a frame of a Python function in PyFlink's thread mode (pemja) or of a Java method, as the
#: exception text prints it: ``at /dir/module.function(module.py:12)``
_FRAME = re.compile(r"^\s*at (?P<where>.+)\.(?P<function>[^.(]+)\((?P<file>[^():]+):(?P<line>\d+)\)\s*$")
#: the header of an exception raised by Python code in the engine
_PY_EXC = re.compile(r"pemja\.core\.PythonException: <class '(?:[\w.]+\.)?(?P<type>\w+)'>: ?(?P<message>.*)$")
#: the failure rollcheck injects on purpose (not an error of anyone's code)
INJECTED = "rollcheck: injected"


def _qualname(path: str, line: int, function: str) -> str:
    """``Class.method`` for the function defined around ``line`` of ``path`` (else ``function``)."""
    import ast

    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return function
    best = function

    def walk(node, prefix: str) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                end = getattr(child, "end_lineno", None) or child.lineno
                if child.lineno <= line <= end:
                    if not isinstance(child, ast.ClassDef) and child.name == function:
                        best = name
                    walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return best


def classify_failure(text: str, module_path: str | None) -> dict | None:
    """Whose code raised the exception that failed the job: a typed error record, or None.

    ``text`` is the job's failure as Flink reports it (the Java exception with its causes; a Python
    exception raised in thread mode is a ``pemja.core.PythonException`` whose frames name the
    Python functions). The innermost frame that belongs to someone decides: one in the user's job
    module (``module_path``) or in another file outside PyFlink and rollcheck gives ``code:
    "user"``; one of rollcheck's own code (the Python files beside this one, the ``rollcheck.flink``
    Java operators) gives ``code: "rollcheck"``. The record names the function (``Class.method``
    when the file shows it), the file, the line, the exception type and message. None for the
    failure rollcheck injects, and for a failure of the engine itself (no such frame).
    """
    if not text or INJECTED in text:
        return None
    ours = os.path.dirname(os.path.abspath(__file__))
    user_stem = os.path.splitext(os.path.abspath(module_path))[0] if module_path else None
    # the exception blocks: a header line and its frames; Java prints the outermost first
    blocks: list[tuple[str, list[re.Match]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _FRAME.match(line)
        if m is not None and blocks:
            blocks[-1][1].append(m)
        elif not line.startswith("..."):
            header = line[len("Caused by: "):] if line.startswith("Caused by: ") else line
            blocks.append((header, []))
    for header, frames in reversed(blocks):  # the deepest cause first
        py = _PY_EXC.search(header)
        if py is not None:
            etype, message = py.group("type"), py.group("message").strip()
        else:
            etype, _, message = header.partition(": ")
            etype, message = etype.strip(), message.strip()
        for fr in frames:  # innermost frame first
            where, function = fr.group("where"), fr.group("function")
            line_no = int(fr.group("line"))
            if where.startswith("/"):  # a Python frame: the file's path without ".py"
                folder = os.path.dirname(where)
                path = where + os.path.splitext(fr.group("file"))[1]
                if folder == ours:
                    return {"code": "rollcheck", "function": _qualname(path, line_no, function),
                            "file": path, "line": line_no, "type": etype, "message": message[:400]}
                if where == user_stem or ("site-packages" not in where and "/pyflink/" not in where
                                          and "/lib/python" not in where):
                    return {"code": "user", "function": _qualname(path, line_no, function),
                            "file": path, "line": line_no, "type": etype, "message": message[:400]}
            elif where.startswith("rollcheck.flink."):
                return {"code": "rollcheck", "function": f"{where.rsplit('.', 1)[-1]}.{function}",
                        "file": fr.group("file"), "line": line_no, "type": etype, "message": message[:400]}
    return None


def _write_engine_error(run_dir: str, error: dict) -> None:
    """``engine-error.json``: the first typed error record of the run (whose code raised, where)."""
    path = os.path.join(run_dir, "engine-error.json")
    if not os.path.exists(path):
        _write_json(path, error)


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
        out["commits"].extend(j["commits"])
    out["t_start"] = jobs[0]["t_start"]
    out["jobs"] = [{k: j.get(k) for k in ("job_id", "final_state", "timestamps", "parallelism", "restored_from",
                                          "rescale_error", "attempt_offset", "failure_cause")} for j in jobs]
    if len(jobs) < 2:
        out["final_state"] = "NOT_RESTORED"
    return out


#: PyFlink's embedded keyed operators and rollcheck's subclasses that also log their keyed state
_STATE_LOGGED = {"EmbeddedPythonKeyedProcessOperator": "rollcheck.flink.RollcheckStateLog$KeyedProcess",
                 "EmbeddedPythonWindowOperator": "rollcheck.flink.RollcheckStateLog$Window",
                 "EmbeddedPythonKeyedCoProcessOperator": "rollcheck.flink.RollcheckStateLog$KeyedCoProcess"}


class _user_state_log:
    """While the user's ``job()`` builds its graph, PyFlink's keyed operators are made as
    rollcheck's subclasses (``RollcheckStateLog``): the same operators, which also log their keyed
    state key by key at every snapshot and after a restore (``ustate-*.jsonl`` in the run folder).

    PyFlink names the operator classes through ``get_gateway().jvm`` in ``data_stream``; only that
    module's lookup is redirected, and only for the three keyed operator classes.
    """

    def __init__(self, run_dir: str, attempt_offset: int) -> None:
        self.run_dir = run_dir
        self.attempt_offset = attempt_offset

    def __enter__(self):
        import pyflink.datastream.data_stream as dsmod
        from pyflink.util.java_utils import load_java_class

        self.mod = dsmod
        self.real = real = dsmod.get_gateway
        run_dir, offset = self.run_dir, self.attempt_offset

        def maker(java_name: str):
            def make(*args):
                gw = real()
                arr = gw.new_array(gw.jvm.Object, len(args) + 2)
                for i, a in enumerate(args):
                    arr[i] = a
                arr[len(args)] = run_dir
                arr[len(args) + 1] = gw.jvm.Integer(offset)
                return load_java_class(java_name).getConstructors()[0].newInstance(arr)
            return make

        class Jvm:
            def __init__(self, jvm) -> None:
                self._jvm = jvm

            def __getattr__(self, name: str):
                if name in _STATE_LOGGED:
                    return maker(_STATE_LOGGED[name])
                return getattr(self._jvm, name)

        class Gateway:
            def __getattr__(self, name: str):
                gw = real()
                return Jvm(gw.jvm) if name == "jvm" else getattr(gw, name)

        dsmod.get_gateway = Gateway
        return self

    def __exit__(self, *exc) -> None:
        self.mod.get_gateway = self.real


def _utilization_pipeline(cfg: dict, env, tap):
    """Source -> tap (a blocking snapshot of ``snapshot_cost_ms``) -> capped work -> keyed count.

    The work step serves at most ``service_rate`` records/s without catching up after a pause (a
    checkpoint's blocking cost or a restart is time lost), logs every record it emits with its
    time, and raises the injected failures at the scheduled times (``failure_times``, seconds
    after the first record; one marker file each, so a failure strikes once).
    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    run_dir = cfg["run_dir"]
    mu = float(cfg["service_rate"])
    times = [float(t) for t in cfg.get("failure_times") or []]

    class Work(MapFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            self.next_free = 0.0
            done = len([f for f in os.listdir(run_dir) if f.startswith("ufail-")])
            self.log = open(os.path.join(run_dir, f"work-{done}.log"), "a", buffering=1 << 16)  # noqa: SIM115
            self.t0 = None

        def close(self) -> None:
            self.log.close()

        def map(self, value):
            now = time.time()
            start = max(now, self.next_free)
            self.next_free = start + 1.0 / mu
            if start > now:
                time.sleep(start - now)
            if self.t0 is None:
                path = os.path.join(run_dir, "t0")
                try:
                    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    os.write(fd, repr(start).encode())
                    os.close(fd)
                    self.t0 = start
                except FileExistsError:
                    with open(path) as fh:
                        self.t0 = float(fh.read() or start)
            self.log.write(f"{int(value)} {start:.6f}\n")
            k = len([f for f in os.listdir(run_dir) if f.startswith("ufail-")]) if times else 0
            if k < len(times) and start >= self.t0 + times[k]:
                try:
                    fd = os.open(os.path.join(run_dir, f"ufail-{k}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return value
                os.write(fd, repr(start).encode())
                os.close(fd)
                self.log.flush()
                raise RuntimeError(f"rollcheck: injected failure {k} at record {value}")
            return value

    class Count(KeyedProcessFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

        def process_element(self, value, ctx):
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            if c % 1000 == 0:
                yield f"k{value % 4},{c}"

    ds = env.from_source(NumberSequenceSource(1, 10 ** 12), WatermarkStrategy.no_watermarks(), "rollcheck-source",
                         type_info=Types.LONG())
    ds = tap(ds, "tap-source", "source", Types.LONG(), 1, int(cfg.get("snapshot_cost_ms", 0)))
    ds = ds.map(Work(), output_type=Types.LONG()).name("rollcheck-work")
    return ds.key_by(lambda v: v % 4, key_type=Types.LONG()).process(Count(), output_type=Types.STRING())


def execute(cfg: dict, *, user=None, restarts: bool = True, restore_path: str | None = None,
            attempt_offset: int = 0) -> dict:
    """One Flink job (word count, or the user's job when ``user`` = (module, records)); raw
    observations go to ``cfg["run_dir"]``; returns what the REST poller and the sink saw."""
    from pyflink.common import Configuration, Encoder, Types, WatermarkStrategy
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.data_stream import DataStream
    from pyflink.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import load_java_class

    run_dir = cfg["run_dir"]
    n_records = int(cfg["records"])
    par = int(cfg["parallelism"])
    keys = int(cfg["keys"])
    rate = float(cfg["rate"])
    fail_at = cfg.get("fail_at_record")
    failure = cfg.get("failure") or "task"
    marker = os.path.join(run_dir, "failure.json")
    naive_dir = os.path.join(run_dir, "naive")
    os.makedirs(naive_dir, exist_ok=True)
    port = _free_port()

    conf = Configuration()
    if cfg.get("cluster_rest_port"):
        # a standalone session cluster started by the recorder (separate TaskManager processes)
        port = int(cfg["cluster_rest_port"])
    conf.set_string("python.execution-mode", cfg.get("python_mode", "thread"))
    conf.set_string("python.executable", sys.executable)
    conf.set_string("rest.port", str(port))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("rest.cache.checkpoint-statistics.timeout", "50 ms")
    conf.set_string("web.checkpoints.history", "1000")
    conf.set_string("execution.checkpointing.dir", "file://" + os.path.join(run_dir, "checkpoints"))
    conf.set_string("execution.checkpointing.num-retained", "1000")
    backend = cfg.get("backend") or "hashmap"
    conf.set_string("state.backend.type", "rocksdb" if backend == "rocksdb" else "hashmap")
    if backend == "rocksdb":
        conf.set_string("execution.checkpointing.incremental", "true")
        # RocksDB names its info log after the flattened instance path: keep that path short
        # (a run folder deep in the file system exceeds the 255-byte file-name limit)
        if cfg.get("rocksdb_dir"):
            conf.set_string("state.backend.rocksdb.localdir", cfg["rocksdb_dir"])
    if backend == "changelog":
        conf.set_string("state.changelog.enabled", "true")
        conf.set_string("state.changelog.storage", "filesystem")
        conf.set_string("state.changelog.dstl.dfs.base-path", "file://" + os.path.join(run_dir, "changelog"))
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    if restore_path:
        conf.set_string("execution.state-recovery.path", restore_path)
        if backend == "changelog":
            # the changelog backend cannot take the full snapshot that Flink forces after a restore in
            # the default NO_CLAIM mode (its first checkpoint fails: "does not support enforcing a full
            # snapshot"); Flink's documentation (State Backends, changelog limitations: "NO_CLAIM mode
            # not supported") says to restore it in CLAIM mode
            conf.set_string("execution.state-recovery.claim-mode", "CLAIM")
    conf.set_string("restart-strategy.type", "fixed-delay" if restarts else "none")
    conf.set_string("restart-strategy.fixed-delay.attempts", str(int(cfg.get("restart_attempts", 3))))
    conf.set_string("restart-strategy.fixed-delay.delay", f"{int(cfg.get('restart_delay_ms', 200))} ms")
    conf.set_string("io.tmp.dirs", os.path.join(run_dir, "tmp"))
    os.makedirs(os.path.join(run_dir, "tmp"), exist_ok=True)
    if cfg.get("cluster_rest_port"):
        from pyflink.java_gateway import get_gateway as _gw

        gw0 = _gw()
        jars = gw0.new_array(gw0.jvm.String, 1)
        jars[0] = cfg["tap_jar"]
        if restore_path:
            # a remote environment replaces the configuration's claim mode by its own restore settings
            # (NO_CLAIM): give them explicitly, so that the changelog backend is restored in CLAIM mode
            claim = gw0.jvm.org.apache.flink.core.execution.RecoveryClaimMode
            srs = gw0.jvm.org.apache.flink.runtime.jobgraph.SavepointRestoreSettings.forPath(
                restore_path, False, claim.CLAIM if backend == "changelog" else claim.NO_CLAIM)
            j_env = gw0.jvm.org.apache.flink.streaming.api.environment.RemoteStreamEnvironment(
                "127.0.0.1", port, conf._j_configuration, jars, gw0.new_array(gw0.jvm.java.net.URL, 0), srs)
        else:
            j_env = gw0.jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment \
                .createRemoteEnvironment("127.0.0.1", port, conf._j_configuration, jars)
        env = StreamExecutionEnvironment(j_env)
    else:
        env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(par)
    env.set_max_parallelism(int(cfg.get("max_parallelism", 128)))
    if not cfg.get("no_checkpoints"):  # the failure-free baseline of a utilization sweep has none
        env.enable_checkpointing(int(cfg["interval_ms"]), CheckpointingMode.EXACTLY_ONCE)
    cc = env.get_checkpoint_config()
    if cfg["checkpoints"] == "unaligned":
        cc.enable_unaligned_checkpoints(True)
    cc.set_tolerable_checkpoint_failure_number(100)
    env.add_jars("file://" + cfg["tap_jar"])

    gw = get_gateway()
    tap_class = load_java_class("rollcheck.flink.RollcheckTap")

    keyed_tap_class = load_java_class("rollcheck.flink.RollcheckKeyedTap")

    def _args(name: str, mode: str, n_keys: int):
        args = gw.new_array(gw.jvm.Object, 5)
        args[0] = name
        args[1] = run_dir
        args[2] = mode
        args[3] = gw.jvm.Integer(n_keys)
        args[4] = gw.jvm.Integer(attempt_offset)
        return args

    def tap(ds, name: str, mode: str, type_info, n_keys: int = keys, cost_ms: int = 0):
        args = gw.new_array(gw.jvm.Object, 6)
        for i, a in enumerate(_args(name, mode, n_keys)):
            args[i] = a
        args[5] = gw.jvm.Integer(cost_ms)
        op = tap_class.getConstructors()[0].newInstance(args)
        j = ds._j_data_stream.transform(name, type_info.get_java_type_info(), op)
        return DataStream(j)

    def keyed_tap(ds, name: str, mode: str, type_info, n_keys: int):
        """rollcheck's keyed tap (keyed state only): ``count`` reinterprets the stream as keyed by
        the word's number (same key groups as the Python keyed operator it is chained to),
        ``rows`` keys it by the user's KEY (a shuffle)."""
        op = keyed_tap_class.getConstructors()[0].newInstance(_args(name, mode, n_keys))
        j_ds = ds._j_data_stream
        if mode == "count":
            keyed = gw.jvm.org.apache.flink.streaming.api.datastream.DataStreamUtils.reinterpretAsKeyedStream(
                j_ds, load_java_class("rollcheck.flink.RollcheckKeys$Word").newInstance(),
                Types.ROW([Types.LONG()]).get_java_type_info())
        else:
            keyed = j_ds.keyBy(load_java_class("rollcheck.flink.RollcheckKeys$Field").newInstance(),
                               Types.STRING().get_java_type_info())
        return DataStream(keyed.transform(name, type_info.get_java_type_info(), op))

    per_subtask_rate = rate / par
    absolute = cfg.get("schedule") == "absolute"
    cap = cfg.get("source_cap")
    cap_per_subtask = float(cap) / par if cap else None
    fail_before_trigger = bool(cfg.get("fail_before_trigger"))
    # recovery-time runs: the failure waits until every subtask drained its initial backlog
    all_caught_up = bool(cfg.get("fail_after_all_caught_up"))
    interval_s = int(cfg["interval_ms"]) / 1000.0

    def _t0() -> float:
        """The common start of the absolute arrival schedule (the first emission of any subtask)."""
        path = os.path.join(run_dir, "t0")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            for _ in range(1000):
                with open(path) as fh:
                    txt = fh.read()
                if txt:
                    return float(txt)
                time.sleep(0.001)
            raise RuntimeError("rollcheck: t0 file stayed empty") from None
        # recovery-time runs start with a backlog of ``calibrate_s`` seconds of input: the source
        # drains it at its capped rate, which measures the service rate before any failure
        t = time.time() - float(cfg.get("calibrate_s", 0.0))
        os.write(fd, repr(t).encode())
        os.close(fd)
        return t

    class Pace(MapFunction):
        """Paces the source to ``rate`` records/s and raises once at the K-th record.

        ``schedule: absolute`` (recovery-time runs): record v of a split is due at
        t0 + (v - split start)/rate_per_subtask, records whose due time passed (after a restart)
        are emitted at most at ``source_cap`` records/s, and every emission is logged.
        """

        def open(self, runtime_context: RuntimeContext) -> None:
            self.n = 0
            self.t0: float | None = None
            self.last = 0.0
            self.start: int | None = None
            self.caught_up = False
            self.log = None
            if absolute:
                gen = 1 if os.path.exists(marker) else 0
                path = os.path.join(run_dir, f"pace-gen{gen}-{uuid.uuid4().hex[:10]}.jsonl")
                self.log = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()

        def close(self) -> None:
            if self.log is not None:
                self.log.close()

        def _split_start(self, v: int) -> int:
            if self.start is None:
                starts_dir = os.path.join(run_dir, "splits")
                os.makedirs(starts_dir, exist_ok=True)
                if not os.path.exists(marker):
                    open(os.path.join(starts_dir, str(v)), "w").close()
                    self.start = v
                else:
                    starts = sorted(int(x) for x in os.listdir(starts_dir))
                    self.start = max(x for x in starts if x <= v)
            return self.start

        def map(self, value):
            now = time.time()
            self.n += 1
            if absolute:
                if self.t0 is None:
                    self.t0 = _t0()
                due = self.t0 + (int(value) - self._split_start(int(value))) / per_subtask_rate
                at = max(due, self.last + 1.0 / cap_per_subtask) if cap_per_subtask else due
            else:
                if self.t0 is None:
                    self.t0 = now
                due = at = self.t0 + self.n / per_subtask_rate
            if at > now:
                time.sleep(at - now)
            self.last = max(at, now)
            if self.log is not None:
                self.log.write(f"{int(value)} {due:.6f} {self.last:.6f}\n")
                if self.last - due <= 0.05:
                    if not self.caught_up and all_caught_up and not os.path.exists(marker):
                        open(os.path.join(run_dir, f"caught-up-{uuid.uuid4().hex[:10]}"), "w").close()
                    self.caught_up = True
            if absolute and not self.caught_up:
                return value  # the initial backlog is not drained yet: no failure before that
            if fail_at is not None and self.n * par >= int(fail_at) and not os.path.exists(marker):
                names = os.listdir(run_dir)
                if all_caught_up and sum(f.startswith("caught-up-") for f in names) < par:
                    return value  # every subtask drains its initial backlog before the failure
                completed = [f for f in names if f.startswith("completed-")]
                if len(completed) < 2:
                    # slow down (not block: a blocked task takes no checkpoint) until two
                    # checkpoints completed, so that the failure does strike before the input ends
                    time.sleep(0.05)
                    return value
                if fail_before_trigger:
                    snaps = [f for f in names if f.startswith("snapshot-")]
                    last = max(os.path.getmtime(os.path.join(run_dir, f)) for f in snaps)
                    if time.time() < last + interval_s * 0.92:
                        return value
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return value
                info = {"t": time.time(), "value": int(value), "local_index": self.n, "failure": failure,
                        "pid": os.getpid()}
                os.write(fd, json.dumps(info).encode())
                os.close(fd)
                if failure == "taskmanager":
                    # thread mode: this function runs inside the TaskManager's JVM process
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError(f"rollcheck: injected task failure at record {value}")
            return value

    max_rate = cfg.get("max_rate")
    service_per_subtask = float(max_rate) / par if max_rate else None

    class Count(KeyedProcessFunction):
        """The keyed count; with ``max_rate`` it serves at most that many records/s (all subtasks)."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
            self.next_free = 0.0

        def process_element(self, value, ctx):
            if service_per_subtask:
                now = time.time()
                start = max(now, self.next_free)
                self.next_free = start + 1.0 / service_per_subtask
                if self.next_free > now:
                    time.sleep(self.next_free - now)
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            yield f"w{value % keys},{c}"

    class NaiveSink(MapFunction):
        """A side-effect sink: appends every line to a file as it passes, no transactions."""

        def open(self, runtime_context: RuntimeContext) -> None:
            gen = 1 if os.path.exists(marker) else 0
            path = os.path.join(naive_dir, f"gen{gen}-{uuid.uuid4().hex[:10]}.txt")
            self.f = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()

        def map(self, value):
            self.f.write(value + "\n")
            self.f.flush()
            return value

        def close(self) -> None:
            self.f.close()

    tx_sink = FileSink.for_row_format(os.path.join(run_dir, "tx"), Encoder.simple_string_encoder()) \
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build()
    user_error: dict = {}
    if cfg.get("job") == "utilization":
        ds = _utilization_pipeline(cfg, env, tap)
        ds.sink_to(tx_sink).name("rollcheck-tx-sink")
        job_name = "rollcheck-utilization"
    elif user is None:
        source = NumberSequenceSource(1, n_records)
        ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "rollcheck-source",
                             type_info=Types.LONG())
        ds = tap(ds, "tap-source", "source", Types.LONG())
        ds = ds.map(Pace(), output_type=Types.LONG()).name("rollcheck-pace")
        ds = ds.key_by(lambda v: v % keys, key_type=Types.LONG())
        ds = ds.process(Count(), output_type=Types.STRING()).name("rollcheck-keyed")
        ds = ds.map(NaiveSink(), output_type=Types.STRING()).name("rollcheck-naive-sink")
        ds = keyed_tap(ds, "tap-keyed", "count", Types.STRING(), keys)
        ds.sink_to(tx_sink).name("rollcheck-tx-sink")
        job_name = "rollcheck-wordcount"
    else:
        module, recs = user
        key_idx = [int(i) for i in cfg["key_idx"]]  # KEY as indices (names resolved through FIELDS)
        key_spec = getattr(module, "KEY", None)
        module_path = cfg["module"]
        error_path = os.path.join(run_dir, "user-error.json")

        def _bad_row(call: str, msg: str) -> None:
            if not os.path.exists(error_path):
                with open(error_path + ".tmp", "w") as f:
                    json.dump({"call": call, "error": msg, "kind": "attribute" if call == "KEY" else "call"}, f)
                os.replace(error_path + ".tmp", error_path)

        class Input(MapFunction):
            """The user's record number ``value`` (0-based) of ``records(seed)``."""

            def map(self, value):
                return recs[int(value)]

        class Output(MapFunction):
            """A row of the user's output: type-checked, keyed by ``KEY``, written as JSON."""

            def map(self, value):
                row = tuple(value) if isinstance(value, (tuple, list)) or hasattr(value, "_values") else value
                if not isinstance(row, tuple):
                    _bad_row("job", f"output must be tuples with the KEY fields {key_spec!r}, got "
                                    f"{type(value).__name__} {value!r:.80}")
                    raise RuntimeError(f"rollcheck: {module_path}: bad output row {value!r:.80}")
                beyond = [i for i in key_idx if i >= len(row)]
                if beyond:
                    _bad_row("KEY", f"index {beyond[0]} is beyond the output tuple: the first output row has "
                                    f"{len(row)} field(s): {value!r:.80}")
                    raise RuntimeError(f"rollcheck: {module_path}: KEY {key_spec!r} beyond output row {value!r:.80}")
                key = json.dumps([row[i] for i in key_idx], default=str)
                return key + "\x1f" + json.dumps(list(row), default=str)

        source = NumberSequenceSource(0, n_records - 1)
        ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "rollcheck-source",
                             type_info=Types.LONG())
        ds = tap(ds, "tap-source", "source", Types.LONG(), 1)
        ds = ds.map(Pace(), output_type=Types.LONG()).name("rollcheck-pace")
        ds = ds.map(Input()).name("rollcheck-input")
        limit = float(cfg.get("call_timeout", 300))
        try:
            with _user_state_log(run_dir, attempt_offset):
                out = _call(run_dir, "job", limit, module.job, env, ds)
        except UserCodeError:
            return {"user_error": True, "final_state": "NOT_RUN"}
        if not isinstance(out, DataStream):
            _user_error(run_dir, "job", f"must return a DataStream, got {type(out).__name__}")
            return {"user_error": True, "final_state": "NOT_RUN"}
        if hasattr(module, "sink"):
            user_out = os.path.join(run_dir, "user-sink")
            os.makedirs(user_out, exist_ok=True)

            class Handed(MapFunction):
                """Logs the KEY of every row handed to the module's sink (beside it on the same stream): one
                file per subtask and generation (1 once the injected failure struck), line-buffered."""

                def open(self, runtime_context: RuntimeContext) -> None:
                    gen = 1 if os.path.exists(marker) else 0
                    name = f"handed-gen{gen}-{uuid.uuid4().hex[:10]}.txt"
                    self.f = open(os.path.join(run_dir, name), "a", buffering=1)  # noqa: SIM115 - closed in close()

                def map(self, value):
                    row = tuple(value) if isinstance(value, (tuple, list)) or hasattr(value, "_values") else value
                    if isinstance(row, tuple) and all(i < len(row) for i in key_idx):
                        self.f.write(json.dumps([row[i] for i in key_idx], default=str) + "\n")
                    return False

                def close(self) -> None:
                    self.f.close()

            out.map(Handed(), output_type=Types.BOOLEAN()).name("rollcheck-sink-handings") \
                .filter(lambda x: x).print()
            try:
                _call(run_dir, "sink", limit, module.sink, out, user_out)
            except UserCodeError:
                return {"user_error": True, "final_state": "NOT_RUN"}
        ds = out.map(Output(), output_type=Types.STRING()).name("rollcheck-output")
        ds = keyed_tap(ds, "tap-keyed", "rows", Types.STRING(), 0)
        ds.sink_to(tx_sink).name("rollcheck-tx-sink")
        job_name = "rollcheck-user-job"
        del user_error

    t_start = time.time()
    client = env.execute_async(job_name)
    job_id = str(client.get_job_id())
    base = f"http://127.0.0.1:{port}"
    polls: dict = {"checkpoints": {}, "restored": [], "states": []}
    commits: list = []
    seen_files: set = set()
    tx_dir = os.path.join(run_dir, "tx")

    def scan_commits() -> None:
        # a file of the FileSink becomes visible (no leading dot) when its transaction commits
        for root, _dirs, files in os.walk(tx_dir):
            for name in files:
                path = os.path.join(root, name)
                if name.startswith(".") or path in seen_files:
                    continue
                seen_files.add(path)
                with open(path) as fh:
                    n = sum(1 for line in fh if line.strip())
                commits.append({"t": time.time(), "file": os.path.relpath(path, tx_dir), "lines": n})

    last_state = None
    failure_cause = None
    failure_text = ""
    misses = 0
    done = threading.Event()
    final_state = "UNKNOWN"
    deadline = t_start + float(cfg.get("timeout_s", 300))
    while not done.is_set():
        job = _get(f"{base}/jobs/{job_id}")
        misses = misses + 1 if job is None else 0
        if misses >= 20 and last_state is not None:
            # the MiniCluster of a local execution shuts down when the job ends: ask the client
            try:
                client.get_job_execution_result().result()
                final_state = "FINISHED"
            except Exception as e:  # noqa: BLE001 - any error from the job means it failed
                final_state = "FAILED"
                failure_text = str(e)
                failure_cause = _root_cause_text(failure_text)
            break
        if job is not None:
            state = job.get("state")
            if state != last_state:
                polls["states"].append({"state": state, "t": time.time(),
                                        "timestamps": job.get("timestamps", {})})
                last_state = state
            if state in ("FINISHED", "FAILED", "CANCELED"):
                final_state = state
                if state == "FAILED":
                    exc = _get(f"{base}/jobs/{job_id}/exceptions") or {}
                    failure_text = str(exc.get("root-exception") or "")
                    failure_cause = _root_cause_text(failure_text)
                done.set()
        chk = _get(f"{base}/jobs/{job_id}/checkpoints")
        if chk is not None:
            for h in chk.get("history", []):
                polls["checkpoints"][str(h["id"])] = h
            rest = (chk.get("latest") or {}).get("restored")
            if rest and (not polls["restored"] or polls["restored"][-1]["id"] != rest.get("id")):
                polls["restored"].append(rest)
        scan_commits()
        if user is not None and os.path.exists(os.path.join(run_dir, "user-error.json")):
            # the user's module is at fault (a bad output row): no restart can help
            client.cancel()
            final_state = "USER_ERROR"
            break
        if time.time() > deadline:
            client.cancel()
            final_state = "TIMEOUT"
            break
        if cfg.get("stop_after_s") and os.path.exists(os.path.join(run_dir, "t0")):
            # an unbounded job (utilization runs) ends this long after its first record
            with open(os.path.join(run_dir, "t0")) as fh:
                txt = fh.read()
            if txt and time.time() > float(txt) + float(cfg["stop_after_s"]):
                client.cancel()
                final_state = "STOPPED"
                break
        time.sleep(0.1)
    scan_commits()
    job = _get(f"{base}/jobs/{job_id}")
    chk = _get(f"{base}/jobs/{job_id}/checkpoints")
    if chk is not None:
        for h in chk.get("history", []):
            polls["checkpoints"][str(h["id"])] = h
    max_attempt = 0
    for name in os.listdir(run_dir):
        if name.startswith("tap-") and name.endswith(".jsonl"):
            max_attempt = max(max_attempt, int(name[:-len(".jsonl")].rsplit("-", 1)[1]))
    result = {"job_id": job_id, "final_state": final_state, "t_start": t_start, "t_end": time.time(),
              "timestamps": (job or {}).get("timestamps", {}), "rest": polls, "commits": commits,
              "pyflink_python": sys.executable, "parallelism": par, "max_attempt": max_attempt,
              "backend": backend, "attempt_offset": attempt_offset, "failure_cause": failure_cause}
    if user is not None:
        result["key"] = key_idx
        result["records"] = n_records
        result["fail_at_record"] = cfg.get("fail_at_record")
    if user is not None and os.path.exists(os.path.join(run_dir, "user-error.json")):
        result["user_error"] = True
    if final_state == "FAILED" and failure_text:
        # whose code raised inside the engine: the user's (exit 2) or rollcheck's (exit 4)
        error = classify_failure(failure_text, cfg.get("module"))
        if error is not None:
            result["engine_error"] = error
            _write_engine_error(run_dir, error)
            if error["code"] == "user":
                result["user_error"] = True
    if user is not None and hasattr(user[0], "read_output") and final_state == "FINISHED":
        try:
            rows = _call(run_dir, "read_output", float(cfg.get("call_timeout", 300)), user[0].read_output,
                         os.path.join(run_dir, "user-sink"))
        except UserCodeError:
            result["user_error"] = True
            return result
        if not isinstance(rows, list) or not all(isinstance(r, (tuple, list)) for r in rows):
            _user_error(run_dir, "read_output", "must return a list of tuples")
            result["user_error"] = True
            return result
        _write_json(os.path.join(run_dir, "user-sink.json"), {"rows": [list(r) for r in rows]})
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
