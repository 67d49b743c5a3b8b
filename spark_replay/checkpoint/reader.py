"""Plain-Python reader of Spark Structured Streaming checkpoint directories.

Reads what a micro-batch query leaves in its ``checkpointLocation`` (PySpark 4.x, the default
HDFS-backed state store with the ``lz4`` codec), without a JVM:

- ``offsets/N``: written *before* batch N runs: ``v1``, a metadata JSON line, one offset per source;
- ``commits/N``: written *after* the sink accepted batch N: ``v1`` and a JSON line;
- ``sources/<s>/N`` (and ``N.compact``): the file source's log of the files of batch N;
- ``state/<op>/<partition>/<V>.delta`` / ``<V>.snapshot``: state store version V (written by the
  tasks of batch V-1), an LZ4 block stream (:mod:`rollcheck.spark_replay.checkpoint.lz4block`) of records
  ``int32 key length, key, int32 value length (-1 = removed), value`` ending with ``-1``; keys and
  values are UnsafeRows described by ``state/<op>/<partition>/_metadata/schema``. An operator
  with several stores (a stream-stream join keeps four) has one folder per store under each
  partition, ``state/<op>/<partition>/<store>/``, laid out the same way;
- ``state/<op>/_metadata/metadata``: the operator's name, its stores and partition count.

Columns may be nested structs (``window()`` keys a windowed aggregation by a struct of start and
end): the struct's slot points at a nested UnsafeRow inside the row's variable-length region.

A state version V is reconstructed from the newest snapshot at or below V plus the deltas after it.
Spark's own ``statestore`` and ``state-metadata`` data sources read the same files; the tests
compare both (``specs/spark.md#checkpoint-files``).
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import loads_json
from rollcheck.spark_replay.checkpoint.lz4block import lz4_stream_decompress

__all__ = [
    "DEFAULT_STORE",
    "spark_state_reads",
    "Field",
    "CheckpointDir",
    "decode_unsafe_row",
    "parse_state_records",
]

_FIXED = {"long", "integer", "double", "boolean", "short", "byte", "float", "date", "timestamp"}
_VAR = {"string", "binary"}


DEFAULT_STORE = "default"


def spark_state_reads(operator_properties: str | None) -> list[tuple[str, dict[str, str]]]:
    """How to read one operator's state with Spark's ``statestore`` source: ``[(suffix, options)]``.

    Most operators have one read (suffix ``""``, no option). A ``transformWithState`` operator
    keeps one column family per state variable, and Spark's reader needs ``stateVarName`` for each
    (its ``operatorProperties`` in the ``state-metadata`` source lists them); its timers are read
    with ``readRegisteredTimers``.

    Examples
    --------
    >>> props = ('{"stateVariables":[{"stateName":"count","stateVariableType":"ValueState"},'
    ...          '{"stateName":"$eventTimers_keyToTimestamp","stateVariableType":"TimerState"}]}')
    >>> spark_state_reads(props)
    [('count', {'stateVarName': 'count'}), ('timers', {'readRegisteredTimers': 'true'})]
    >>> spark_state_reads(None)
    [('', {})]
    """
    try:
        props = json.loads(operator_properties) if operator_properties else {}
    except json.JSONDecodeError:
        props = {}
    variables = props.get("stateVariables") if isinstance(props, dict) else None
    if not isinstance(variables, list) or not variables:
        return [("", {})]
    out: list[tuple[str, dict[str, str]]] = []
    timers = False
    for v in variables:
        if not isinstance(v, dict) or not isinstance(v.get("stateName"), str):
            continue
        if v.get("stateVariableType") == "TimerState":
            timers = True
        else:
            out.append((v["stateName"], {"stateVarName": v["stateName"]}))
    if timers:
        out.append(("timers", {"readRegisteredTimers": "true"}))
    return out or [("", {})]


@dataclass(frozen=True)
class Field:
    """A column of a state schema: name, Spark SQL type name and, for a struct, its columns."""

    name: str
    type: str
    fields: tuple[Field, ...] | None = None


def decode_unsafe_row(buf: bytes, fields: list[Field] | tuple[Field, ...]) -> tuple[Any, ...]:
    """Decode one UnsafeRow; a struct column decodes to a nested tuple.

    Layout: a null bit set of ``ceil(n / 64)`` little-endian 64-bit words, then one 8-byte slot
    per field (numbers little-endian in the slot's low bytes; for ``string``/``binary`` and
    ``struct`` the slot holds ``offset << 32 | size`` of the bytes inside the row: a struct is a
    nested UnsafeRow there), then the variable-length data.

    Parameters
    ----------
    buf : bytes
        The row's bytes.
    fields : list or tuple of Field
        The row's columns, in order.

    Returns
    -------
    tuple
        One value per field (None for a null).

    Examples
    --------
    >>> row = (bytes(8) + struct.pack("<q", 7) + struct.pack("<q", (24 << 32) | 2) + b"hi"
    ...        + bytes(6))
    >>> decode_unsafe_row(row, [Field("n", "long"), Field("w", "string")])
    (7, 'hi')
    >>> decode_unsafe_row(bytes([2]) + bytes(7) + bytes(16), [Field("n", "long"), Field("w", "string")])
    (0, None)

    A struct column (as ``window()`` keys a windowed aggregation):

    >>> inner = bytes(8) + struct.pack("<qq", 10, 20)
    >>> outer = bytes(8) + struct.pack("<Q", (16 << 32) | len(inner)) + inner
    >>> win = Field("window", "struct", (Field("start", "timestamp"), Field("end", "timestamp")))
    >>> decode_unsafe_row(outer, [win])
    ((10, 20),)
    """
    n = len(fields)
    words = (n + 63) // 64
    base = 8 * words
    if len(buf) < base + 8 * n:
        raise InvalidInputError(f"UnsafeRow of {len(buf)} bytes is too short for {n} fields")
    out: list[Any] = []
    for k, f in enumerate(fields):
        null_word = struct.unpack_from("<Q", buf, 8 * (k // 64))[0]
        if null_word >> (k % 64) & 1:
            out.append(None)
            continue
        off = base + 8 * k
        t = f.type
        if t in ("long", "timestamp"):
            out.append(struct.unpack_from("<q", buf, off)[0])
        elif t in ("integer", "date"):
            out.append(struct.unpack_from("<i", buf, off)[0])
        elif t == "short":
            out.append(struct.unpack_from("<h", buf, off)[0])
        elif t == "byte":
            out.append(struct.unpack_from("<b", buf, off)[0])
        elif t == "boolean":
            out.append(buf[off] != 0)
        elif t == "double":
            out.append(struct.unpack_from("<d", buf, off)[0])
        elif t == "float":
            out.append(struct.unpack_from("<f", buf, off)[0])
        elif t in _VAR or t == "struct":
            word = struct.unpack_from("<Q", buf, off)[0]
            start, size = word >> 32, word & 0xFFFFFFFF
            if start + size > len(buf):
                raise InvalidInputError(f"UnsafeRow field {f.name!r} points past the row")
            raw = buf[start:start + size]
            if t == "struct":
                out.append(decode_unsafe_row(raw, f.fields or ()))
            else:
                out.append(raw.decode("utf-8") if t == "string" else raw)
        else:
            raise InvalidInputError(f"unsupported state column type {t!r} (field {f.name!r})")
    return tuple(out)


def parse_state_records(data: bytes, where: str = "") -> list[tuple[bytes, bytes | None]]:
    """Split a decompressed delta/snapshot stream into (key, value) records; value None = removed.

    Parameters
    ----------
    data : bytes
        The decompressed state file.
    where : str, optional
        The file's name for error messages.

    Examples
    --------
    >>> parse_state_records(struct.pack(">i", 1) + b"k" + struct.pack(">i", -1) + struct.pack(">i", -1))
    [(b'k', None)]
    """
    recs: list[tuple[bytes, bytes | None]] = []
    i = 0
    while True:
        if i + 4 > len(data):
            raise InvalidInputError(f"state file {where} ends without the end marker")
        (klen,) = struct.unpack_from(">i", data, i)
        i += 4
        if klen == -1:
            return recs
        if klen < 0 or i + klen + 4 > len(data):
            raise InvalidInputError(f"state file {where}: bad key length {klen} at byte {i - 4}")
        key = data[i:i + klen]
        i += klen
        (vlen,) = struct.unpack_from(">i", data, i)
        i += 4
        if vlen == -1:
            recs.append((key, None))
            continue
        if vlen < 0 or i + vlen > len(data):
            raise InvalidInputError(f"state file {where}: bad value length {vlen} at byte {i - 4}")
        recs.append((key, data[i:i + vlen]))
        i += vlen


def _read_utf(data: bytes, i: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">H", data, i)
    return data[i + 2:i + 2 + n].decode("utf-8"), i + 2 + n


def _field(f: dict[str, Any]) -> Field:
    t = f["type"]
    if isinstance(t, dict) and t.get("type") == "struct":
        return Field(f["name"], "struct", tuple(_field(x) for x in t.get("fields", [])))
    if not isinstance(t, str):
        raise InvalidInputError(f"state column {f['name']!r} has an unsupported type {t.get('type')!r}")
    return Field(f["name"], t)


def _fields(schema_json: str) -> list[Field]:
    s = json.loads(schema_json)
    return [_field(f) for f in s.get("fields", [])]


class CheckpointDir:
    """A Structured Streaming checkpoint directory, read with plain Python.

    Parameters
    ----------
    path : str or Path
        The query's ``checkpointLocation``.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise InvalidInputError("not a checkpoint directory", source=str(self.path))

    # ------------------------------------------------------------------ logs
    def _log_files(self, sub: str) -> dict[int, Path]:
        d = self.path / sub
        if not d.is_dir():
            return {}
        out: dict[int, Path] = {}
        for f in d.iterdir():
            m = re.fullmatch(r"(\d+)(\.compact)?", f.name)
            if m:
                out[int(m.group(1))] = f
        return dict(sorted(out.items()))

    @staticmethod
    def _log_lines(f: Path) -> list[str]:
        text = f.read_text(encoding="utf-8")
        lines = text.split("\n")
        if not lines or not lines[0].startswith("v"):
            raise InvalidInputError("log file without a version line", source=str(f), location="line 1")
        return [ln for ln in lines[1:] if ln.strip()]

    def offsets(self) -> dict[int, dict[str, Any]]:
        """``{batch: {"metadata": {...}, "sources": [offset, ...]}}`` from ``offsets/``."""
        out = {}
        for b, f in self._log_files("offsets").items():
            lines = self._log_lines(f)
            meta = loads_json(lines[0]) if lines else {}
            srcs = [None if ln == "-" else loads_json(ln) for ln in lines[1:]]
            out[b] = {"metadata": meta, "sources": srcs}
        return out

    def commits(self) -> dict[int, dict[str, Any]]:
        """``{batch: commit metadata}`` from ``commits/`` (a batch is committed iff present)."""
        return {b: (loads_json(ls[0]) if (ls := self._log_lines(f)) else {})
                for b, f in self._log_files("commits").items()}

    def source_files(self, source: int = 0) -> dict[int, list[str]]:
        """``{batch: [file path, ...]}`` of a file source, expanding compacted logs."""
        out: dict[int, list[str]] = {}
        for _b, f in self._log_files(f"sources/{source}").items():
            for ln in self._log_lines(f):
                e = loads_json(ln)
                out.setdefault(int(e["batchId"]), []).append(e["path"])
        return dict(sorted(out.items()))

    # ------------------------------------------------------------------ state
    def operators(self) -> dict[int, dict[str, Any]]:
        """``{operator id: metadata}`` from ``state/<op>/_metadata/metadata``."""
        out: dict[int, dict[str, Any]] = {}
        root = self.path / "state"
        if not root.is_dir():
            return out
        for d in sorted(root.iterdir()):
            if d.name.isdigit():
                f = d / "_metadata" / "metadata"
                lines = self._log_lines(f) if f.exists() else []
                out[int(d.name)] = loads_json(lines[0]) if lines else {}
        return out

    def partitions(self, op: int = 0) -> list[int]:
        """The partition ids of operator ``op``'s state store, sorted."""
        d = self.path / "state" / str(op)
        return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []

    def stores(self, op: int = 0) -> list[str]:
        """The names of an operator's state stores (``["default"]`` for a single-store operator).

        Taken from the operator metadata when present, else from the folders of the partitions.
        """
        info = self.operators().get(op, {}).get("stateStoreInfo")
        if isinstance(info, list) and info:
            return [str(x.get("storeName", DEFAULT_STORE)) for x in info]
        names: set[str] = set()
        for part in self.partitions(op):
            d = self.path / "state" / str(op) / str(part)
            for sub in d.iterdir():
                if sub.is_dir() and not sub.name.startswith(("_", ".")) and not sub.name.isdigit():
                    names.add(sub.name)
        return sorted(names) or [DEFAULT_STORE]

    def provider(self, op: int = 0) -> str:
        """``"rocksdb"`` if the operator's state was written by the RocksDB state store provider.

        ``V.zip`` snapshots, ``V.changelog`` files or an ``SSTs`` folder. Else ``"hdfs"``.

        The plain-Python decoder reads only the HDFS-backed store's files; RocksDB state is read
        with Spark's own ``statestore`` reader (which serves every provider).
        """
        root = self.path / "state" / str(op)
        if not root.is_dir():
            return "hdfs"
        for part in root.iterdir():
            if not part.name.isdigit() or not part.is_dir():
                continue
            for d in [part, *(x for x in part.iterdir() if x.is_dir())]:
                for f in d.iterdir():
                    if f.name == "SSTs" or re.fullmatch(r"\d+(_[0-9a-f-]+)?\.(zip|changelog)", f.name):
                        return "rocksdb"
        return "hdfs"

    def _store_dir(self, op: int, partition: int, store: str) -> Path:
        d = self.path / "state" / str(op) / str(partition)
        return d if store == DEFAULT_STORE else d / store

    def schema(self, op: int = 0, partition: int = 0, store: str = DEFAULT_STORE
               ) -> tuple[list[Field], list[Field]]:
        """Key and value columns of an operator's state (``_metadata/schema``, format v1/v2).

        Parameters
        ----------
        op, partition : int, optional
            The stateful operator's id; the partition read (else the first one with a schema).
        store : str, optional
            The state store's name (``default``; joins have several).

        Returns
        -------
        tuple of (list of Field, list of Field)
            The key and the value columns.
        """
        f = self._store_dir(op, partition, store) / "_metadata" / "schema"
        if not f.exists():  # Spark writes the schema once, under the first partition
            pattern = "*/_metadata/schema" if store == DEFAULT_STORE else f"*/{store}/_metadata/schema"
            found = sorted((self.path / "state" / str(op)).glob(pattern))
            f = found[0] if found else f
        try:
            data = f.read_bytes()
        except OSError:
            raise InvalidInputError("missing state schema file", source=str(f)) from None
        version, i = _read_utf(data, 0)
        if version == "v1":
            key, i = _read_utf(data, i)
            val, i = _read_utf(data, i)
        elif version == "v2":
            parts = []
            for _ in range(2):
                (chunks,) = struct.unpack_from(">i", data, i)
                i += 4
                text = []
                for _c in range(chunks):
                    s, i = _read_utf(data, i)
                    text.append(s)
                parts.append("".join(text))
            key, val = parts
        else:
            raise InvalidInputError(f"unsupported state schema version {version!r}", source=str(f))
        return _fields(key), _fields(val)

    def state_versions(self, op: int = 0, partition: int = 0, store: str = DEFAULT_STORE
                       ) -> dict[int, list[str]]:
        """``{version: ["delta"] | ["snapshot"] | both}`` of the files present for a partition.

        Parameters
        ----------
        op, partition : int, optional
            The stateful operator's id and the partition.
        store : str, optional
            The state store's name.
        """
        d = self._store_dir(op, partition, store)
        out: dict[int, list[str]] = {}
        if d.is_dir():
            for f in d.iterdir():
                m = re.fullmatch(r"(\d+)\.(delta|snapshot)", f.name)
                if m:
                    out.setdefault(int(m.group(1)), []).append(m.group(2))
        return dict(sorted(out.items()))

    def read_state_file(self, op: int, partition: int, version: int, kind: str,
                        store: str = DEFAULT_STORE
                        ) -> list[tuple[tuple[Any, ...], tuple[Any, ...] | None]]:
        """Decoded records of one delta or snapshot file.

        Parameters
        ----------
        op, partition, version : int
            The stateful operator's id, the partition and the state version.
        kind : str
            ``delta`` or ``snapshot``.
        store : str, optional
            The state store's name.

        Returns
        -------
        list of (tuple, tuple or None)
            Key and value rows; value None for a removed key.
        """
        f = self._store_dir(op, partition, store) / f"{version}.{kind}"
        kf, vf = self.schema(op, partition, store)
        if not f.exists():
            raise InvalidInputError(f"missing state {kind} file", source=str(f))
        try:
            raw = lz4_stream_decompress(f.read_bytes())
        except InvalidInputError as e:
            raise e.with_source(str(f)) from None
        recs = parse_state_records(raw, str(f))
        return [(decode_unsafe_row(k, kf), None if v is None else decode_unsafe_row(v, vf)) for k, v in recs]

    def state(self, op: int = 0, version: int | None = None, use_snapshots: bool = True,
              store: str = DEFAULT_STORE) -> dict[int, dict[tuple[Any, ...], tuple[Any, ...]]]:
        """The state of every partition at ``version`` (default: the newest committed one).

        With ``use_snapshots`` false every delta from version 1 is applied (an independent path
        to the same state, for checking the snapshot decoder).

        The newest *committed* version is ``1 + the last batch in commits/`` (a version written by
        a batch that never committed is not final; Spark overwrites it when it re-runs the batch).

        Parameters
        ----------
        op : int, optional
            The stateful operator's id.
        version : int, optional
            The state version; None for the newest committed one.
        use_snapshots : bool, optional
            Start from the newest snapshot (False: apply every delta from version 1).
        store : str, optional
            The state store's name.

        Returns
        -------
        dict
            Partition -> {key tuple: value tuple}.
        """
        if version is None:
            commits = self.commits()
            version = (max(commits) + 1) if commits else 0
        out: dict[int, dict[tuple[Any, ...], tuple[Any, ...]]] = {}
        for part in self.partitions(op):
            files = self.state_versions(op, part, store)
            snaps = [v for v, kinds in files.items() if "snapshot" in kinds and v <= version
                     and use_snapshots]
            start = max(snaps) if snaps else 0
            cur: dict[tuple[Any, ...], tuple[Any, ...]] = {}
            if snaps:
                for k, v in self.read_state_file(op, part, start, "snapshot", store):
                    if v is not None:
                        cur[k] = v
            for v_ in range(start + 1, version + 1):
                if "delta" not in files.get(v_, []):
                    raise InvalidInputError(f"state version {v_} of partition {part} is missing",
                                            source=str(self._store_dir(op, part, store)))
                for k, v in self.read_state_file(op, part, v_, "delta", store):
                    if v is None:
                        cur.pop(k, None)
                    else:
                        cur[k] = v
            out[part] = cur
        return out
