"""The shared reference of a Spark matrix configuration: one failure-free recording for all cells.

The matrix (:mod:`rollcheck.spark_replay.matrix.run`) records each configuration (query module, state
store provider, seed, batches) once without failure; its final output and its state, read with
Spark's own state reader, are the reference every cell of the configuration is compared with. A
cell's recording (``rollcheck spark record query --reference-from TRACE``) starts its trace with
that reference instead of running one of its own.

The reference is also kept across runs, content-addressed in rollcheck's cache folder
(``$ROLLCHECK_CACHE``, else the user cache folder; ``spark-references/``): its key
(:func:`reference_key`) hashes the module's bytes and path, the recording's configuration (seed,
batches, state store, shuffle partitions, master, call timeout), the pyspark release, and the bytes
of rollcheck's Spark recorder itself; any byte change of one of them is another key, so a stale
reference is never found. :func:`stored_reference` finds a kept one (checked as a whole finished
failure-free recording), :func:`store_reference` keeps a new one. The module's bytes include those
of the files it imports from its own folder, and theirs in turn (:func:`local_imports`: ``import
helper``, ``from helper import f``, ``from . import helper``, packages of that folder), so an edited
helper file is never served a stale reference; files it reads otherwise (data files, modules
imported by a name computed at run time) are not in the key.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["shared_reference", "write_shared_reference", "reference_key", "stored_reference", "store_reference",
           "references_folder", "local_imports", "add_release_reference"]

#: The modules of this package that shape a failure-free recording (their bytes are in every key).
_RECORDER = ("query/*.py", "checkpoint/watcher.py", "trace.py", "session.py", "supervise.py", "releases.py",
             "matrix/cell.py", "matrix/warm.py", "checkpoint/reader.py", "oracles/checks.py", "stream/*.py",
             "faults/killpoints.py", "checkpoint/lz4block.py", "checkpoint/logs.py", "faults/inotify.py")
#: The configuration fields a reference recording depends on (besides the module and the release).
_KEY_FIELDS = ("module", "batches", "seed", "state_store", "shuffle_partitions", "master", "call_timeout",
               "reference_version", "cluster")


def shared_reference(path: str | Path, header: dict[str, Any] | None = None) -> dict[str, Any]:
    """The reference of a configuration, from its failure-free recording.

    The final output, the state read with Spark's state reader and the committed batches.

    With ``header`` (the new recording's), the recordings must agree on module, seed, batches,
    state store and shuffle partitions: a reference of another query or configuration is refused.

    Parameters
    ----------
    path : str or Path
        The failure-free recording.
    header : dict, optional
        The new recording's header; None checks no agreement.

    Returns
    -------
    dict
        ``output``, ``state``, ``batches`` (committed) and ``shared_from``.
    """
    from rollcheck.spark_replay.checkpoint.watcher import base_kind
    from rollcheck.spark_replay.trace import read_trace

    tr = read_trace(path)
    src = str(path)
    cfg = tr.header.get("config") or {}
    if not (tr.source_kind == "spark-query" or (tr.source_kind == "spark" and tr.header.get("job") == "query")):
        raise InvalidInputError("not a recording of a query", source=src, location="line 1")
    if cfg.get("failure") is not None:
        raise InvalidInputError("the reference must be a failure-free recording", source=src,
                                location="config.failure")
    ends = {base_kind(e["kind"]): e for e in tr.events}
    for need in ("output_final", "state_final", "end"):
        if need not in ends:
            raise InvalidInputError(f"the reference recording has no {need} event (did it finish?)",
                                    source=src, location=need)
    if header is not None:
        mine = header.get("config") or {}
        for k in ("module", "seed", "batches", "state_store", "shuffle_partitions", "input_rows"):
            a, b = cfg.get(k, "hdfs" if k == "state_store" else None), mine.get(k)
            if k == "module" and isinstance(a, str) and isinstance(b, str):
                a, b = str(Path(a).resolve()) if a.endswith(".py") else a, \
                    str(Path(b).resolve()) if b.endswith(".py") else b
            if a != b:
                raise InvalidInputError(f"the reference was recorded with {k}={a!r}, this run has {b!r}",
                                        source=src, location=f"config.{k}")
    committed = sorted(e["batch"] for e in tr.events if base_kind(e["kind"]) == "batch_committed")
    return {"output": ends["output_final"].get("rows", []), "state": ends["state_final"].get("stores", {}),
            "batches": committed, "shared_from": src}


def write_shared_reference(path: str | Path, out: str | Path, header: dict[str, Any]) -> None:
    """Start the trace ``out`` with its header and the shared reference.

    As attempt 0: the recording's own attempts still count from 1.

    Parameters
    ----------
    path : str or Path
        The failure-free recording.
    out : str or Path
        The new trace.
    header : dict
        The new trace's header.
    """
    from rollcheck.spark_replay.checkpoint.watcher import PREFIX
    from rollcheck.spark_replay.trace import TraceWriter

    ref = shared_reference(path, header)
    w = TraceWriter(out, {**header, "config": {**header["config"], "reference_from": str(path)}})
    try:
        w.attempt = 0
        w.emit(PREFIX + "reference", **ref)
    finally:
        w.close()


def add_release_reference(path: str | Path, release: str, output: list[Any], **fields: Any) -> bool:
    """Give the shared reference ``path`` the failure-free final output on the reference release.

    ``path`` is a finished failure-free recording on release V; the output of the same query on
    ``release`` is added as the ``spark.release_reference`` event a recording on V writes before
    its attempts (attempt 0, right after the header; the later events renumbered): every cell of
    the configuration then takes it from there instead of running the query on ``release`` once
    more. False (the file unchanged) when it already has one for ``release``.

    Parameters
    ----------
    path : str or Path
        The shared reference (a finished failure-free recording).
    release : str
        The reference release.
    output : list
        The query's final output on ``release``.
    **fields : Any
        More fields of the event.

    Returns
    -------
    bool
        True when the event was added.
    """
    from rollcheck.pyimpl.patternio import atomic_write_text
    from rollcheck.spark_replay.checkpoint.watcher import PREFIX

    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    events = [json.loads(ln) for ln in lines[1:] if ln.strip()]
    if any(e.get("kind") == PREFIX + "release_reference" and e.get("engine_version") == release for e in events):
        return False
    head = json.loads(lines[0])
    first = events[0] if events else {}
    ev = {"seq": 1, "kind": PREFIX + "release_reference", "run": head.get("run", first.get("run")), "attempt": 0,
          "t": first.get("t", head.get("t")), "engine_version": release, "output": output, **fields}
    for e in events:
        e["seq"] = int(e["seq"]) + 1
    atomic_write_text(path, "".join(json.dumps(o, separators=(",", ":")) + "\n" for o in [head, ev, *events]))
    return True


def references_folder() -> Path:
    """Where kept references live: ``<cache>/spark-references``."""
    from rollcheck.infra.release_envs import cache_root

    return cache_root() / "spark-references"


def _imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """``(level, dotted name)`` of what each ``import`` or ``from ... import`` of ``tree`` may load.

    Level 0: absolute; 1: the importing file's folder; 2: its parent ...
    """
    names: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(0, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names += [(node.level, base)] if base else []
            names += [(node.level, f"{base}.{a.name}" if base else a.name) for a in node.names if a.name != "*"]
    return names


def local_imports(path: str | Path) -> list[Path]:
    r"""The files of ``path``'s folder (and its subfolders) that the module ``path`` imports.

    And those they import in turn (resolved paths, sorted; the module itself not included).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "q.py").write_text("import helper\nfrom pkg.sub import f\nimport json\n")
    >>> _ = (d / "helper.py").write_text("from . import more\n")
    >>> _ = (d / "more.py").write_text("")
    >>> (d / "pkg").mkdir(); _ = (d / "pkg" / "__init__.py").write_text(""); _ = (d / "pkg" / "sub.py").write_text("")
    >>> [str(p.relative_to(d.resolve())) for p in local_imports(d / "q.py")]
    ['helper.py', 'more.py', 'pkg/__init__.py', 'pkg/sub.py']
    """
    root = Path(path).resolve()
    top = root.parent
    seen, todo = {root}, [root]
    while todo:
        here = todo.pop()
        try:
            tree = ast.parse(here.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for level, name in _imported_names(tree):
            if level > len(here.parents):
                continue
            folder = top if level == 0 else here.parents[level - 1]
            if folder != top and top not in folder.parents:
                continue  # outside the module's folder
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # a package's __init__ runs before its submodule
                base = folder.joinpath(*parts[:i])
                for f in (base.with_name(base.name + ".py"), base / "__init__.py"):
                    if f.is_file() and f.resolve() not in seen:
                        seen.add(f.resolve())
                        todo.append(f.resolve())
    return sorted(seen - {root})


def _module_bytes(module: str) -> tuple[str, bytes]:
    """The module's resolved path (or name) and its source bytes with those of its local imports.

    The local imports are the files it imports from its own folder (:func:`local_imports`); b""
    when the module cannot be read.
    """
    origin: Path | None = None
    if module.endswith(".py"):
        origin = Path(module).resolve()
        name = str(origin)
    else:
        import importlib.util

        name = module
        with contextlib.suppress(ImportError, ValueError, AttributeError):
            spec = importlib.util.find_spec(module)
            if spec is not None and spec.origin and Path(spec.origin).is_file():
                origin = Path(spec.origin)
    if origin is None:
        return name, b""
    try:
        data = origin.read_bytes()
    except OSError:
        return name, b""
    for f in local_imports(origin):
        with contextlib.suppress(OSError):
            data += b"\0" + str(f.relative_to(origin.resolve().parent)).encode() + b"\0" + f.read_bytes()
    return name, data


@functools.lru_cache(maxsize=1)
def _recorder_fingerprint() -> str:
    """A hash of rollcheck's Spark recorder.

    The modules a failure-free recording runs through: :data:`_RECORDER`. A changed recorder never
    reuses a reference an older one wrote.
    """
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for f in sorted({p for pat in _RECORDER for p in here.glob(pat)}):
        h.update(f.relative_to(here).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def reference_key(cfg: Any) -> str | None:
    """The content address of the failure-free reference of ``cfg``.

    A :class:`~rollcheck.spark_replay.query.config.QueryConfig`. Or None when the module's bytes
    cannot be read (nothing is kept then).

    >>> from rollcheck.spark_replay.query.config import QueryConfig
    >>> reference_key(QueryConfig("no/such/module.py")) is None
    True
    """
    from dataclasses import asdict

    from rollcheck.spark_replay.releases import pinned_release

    name, data = _module_bytes(cfg.module)
    if not data:
        return None
    fields = {k: v for k, v in asdict(cfg).items() if k in _KEY_FIELDS}
    fields.update(module=name, engine_version=cfg.engine_version or pinned_release())
    h = hashlib.sha256()
    h.update(hashlib.sha256(data).hexdigest().encode())
    h.update(json.dumps(fields, sort_keys=True, default=str).encode())
    h.update(_recorder_fingerprint().encode())
    return h.hexdigest()


def stored_reference(key: str | None) -> Path | None:
    """The kept reference of ``key`` when there is a whole one, else None."""
    if key is None:
        return None
    path = references_folder() / key[:2] / f"{key}.jsonl"
    if not path.is_file():
        return None
    try:
        shared_reference(path)
    except (InvalidInputError, OSError, ValueError):
        return None
    return path


def store_reference(key: str | None, trace: str | Path) -> Path | None:
    """Keep the finished failure-free recording ``trace`` under ``key`` (atomically).

    Its path, or None when nothing was kept (no key, not a whole reference, the cache folder not
    writable).

    Parameters
    ----------
    key : str or None
        The reference's content address (:func:`reference_key`); None keeps nothing.
    trace : str or Path
        The finished failure-free recording.

    Returns
    -------
    Path or None
        The kept copy.
    """
    if key is None:
        return None
    try:
        shared_reference(trace)
    except (InvalidInputError, OSError, ValueError):
        return None
    dest = references_folder() / key[:2] / f"{key}.jsonl"
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.copyfile(trace, tmp)
        os.replace(tmp, dest)
    except OSError:
        return None
    return dest
