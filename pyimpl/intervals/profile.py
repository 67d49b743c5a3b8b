"""Reading Chiron profiling points (CSV or JSON) for the CI optimiser.

One profiling run per row/object. Columns (CSV header) or keys (JSON):

* ``ci`` (required): the checkpoint interval of the run;
* ``latency`` (required): its average end-to-end latency ``L_avg``;
* ``trt`` (optional): a measured or precomputed total recovery time; when absent it is estimated
  with the Chiron heuristic (:func:`rollcheck.pyimpl.intervals.trt.total_recovery_time`) from
  ``timeout``, ``recovery``, ``warmup`` and either ``ratio`` or both ``i_avg`` and ``i_max``
  (``ratio = i_avg/i_max``). Missing ``timeout``/``recovery``/``warmup``/``ratio`` may be supplied
  as defaults by the caller (command-line flags).

JSON is either ``{"format": "rollcheck.profiling/1", "points": [...]}`` or a bare list of objects.
Errors name the file, the row (CSV ``line N``, JSON ``points[k]``), the column and the reason.

References
----------
.. [1] M. K. Geldenhuys, L. Thamsen, O. Kao. Chiron: Optimizing Fault Tolerance in QoS-aware
   Distributed Stream Processing Jobs. §IV-A (the profiled metrics).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals.optimiser import ProfilingPoint
from rollcheck.pyimpl.intervals.trt import total_recovery_time
from rollcheck.pyimpl.jsonio import loads_json

__all__ = ["FORMAT", "load_profile", "parse_rows", "points_from_rows"]

FORMAT = "rollcheck.profiling/1"
_NUMERIC = ("ci", "latency", "trt", "timeout", "recovery", "warmup", "ratio", "i_avg", "i_max")


def _num(v: Any, where: str, key: str) -> float:
    if isinstance(v, bool):
        raise InvalidInputError(f"{key} must be a number, got {v!r}", location=where)
    if isinstance(v, (int, float)):
        x = float(v)
    elif isinstance(v, str):
        try:
            x = float(v.strip())
        except ValueError:
            raise InvalidInputError(f"{key} must be a number, got {v!r}", location=where) from None
    else:
        raise InvalidInputError(f"{key} must be a number, got {v!r}", location=where)
    if not math.isfinite(x):
        raise InvalidInputError(f"{key} must be finite, got {v!r}", location=where)
    return x


def parse_rows(text: str, *, kind: str) -> list[tuple[str, dict[str, float]]]:
    """``[(location, {column: value})]`` from CSV (``kind="csv"``) or JSON text; values checked numeric.

    Parameters
    ----------
    text : str
        The file's text.
    kind : str
        ``"csv"`` or ``"json"``.
    """
    rows: list[tuple[str, dict[str, float]]] = []
    if kind == "json":
        try:
            doc = loads_json(text)  # bounded: nesting, integer digits, NaN/Infinity
        except InvalidInputError as e:
            raise InvalidInputError(e.reason.replace("malformed JSON", "not valid JSON", 1),
                                    location=e.location) from None
        prefix = "points"
        if isinstance(doc, dict):
            fmt = doc.get("format")
            if fmt is not None and fmt != FORMAT:
                raise InvalidInputError(f"unknown format {fmt!r} (expected {FORMAT})", location="format")
            if "points" not in doc:
                raise InvalidInputError("missing key 'points'", location="points")
            doc = doc["points"]
        else:
            prefix = ""
        if not isinstance(doc, list):
            raise InvalidInputError("expected a list of profiling points", location=prefix or "$")
        for k, obj in enumerate(doc):
            where = f"{prefix}[{k}]"
            if not isinstance(obj, Mapping):
                raise InvalidInputError("a profiling point must be an object", location=where)
            rows.append((where, {key: _num(v, f"{where}.{key}", key) for key, v in obj.items() if key in _NUMERIC}))
    elif kind == "csv":
        reader = csv.reader(io.StringIO(text))
        header: list[str] | None = None
        for line_no, rec in enumerate(reader, start=1):
            if not rec or all(not f.strip() for f in rec) or rec[0].lstrip().startswith("#"):
                continue
            if header is None:
                header = [h.strip().lower() for h in rec]
                unknown = [h for h in header if h not in _NUMERIC]
                if unknown:
                    raise InvalidInputError(f"unknown column(s) {unknown}; known: {list(_NUMERIC)}",
                                            location=f"line {line_no}")
                continue
            if len(rec) != len(header):
                raise InvalidInputError(f"expected {len(header)} fields, got {len(rec)}", location=f"line {line_no}")
            rows.append((f"line {line_no}", {h: _num(v, f"line {line_no}, column {h!r}", h)
                                             for h, v in zip(header, rec, strict=True) if v.strip() != ""}))
    else:
        raise InvalidInputError(f"unknown profiling format {kind!r} (csv or json)")
    if not rows:
        raise InvalidInputError("no profiling points (the file has no data rows)")
    return rows


def points_from_rows(
    rows: list[tuple[str, dict[str, float]]],
    *,
    case: str = "worst",
    reading: str = "eq3",
    threshold: float = 1.0,
    defaults: Mapping[str, float | None] | None = None,
) -> list[ProfilingPoint]:
    """Turn parsed rows into :class:`~rollcheck.pyimpl.intervals.optimiser.ProfilingPoint` (estimating TRT when absent).

    Parameters
    ----------
    rows : list of tuple
        ``(location, {column: value})`` from :func:`parse_rows`.
    case : str, optional
        The TRT case of :func:`total_recovery_time`.
    reading : str, optional
        The TRT reading of :func:`total_recovery_time`.
    threshold : float, optional
        The TRT threshold of :func:`total_recovery_time`.
    defaults : mapping of str to float, optional
        Column values for rows that lack them (a None value is ignored).

    Returns
    -------
    list of ProfilingPoint
        One point per row, in order.
    """
    given: dict[str, float] = {k: float(v) for k, v in (defaults or {}).items() if v is not None}
    points = []
    for where, r in rows:
        for key in ("ci", "latency"):
            if key not in r:
                raise InvalidInputError(f"missing {key!r}", location=where)
        if r["ci"] < 0:
            raise InvalidInputError(f"ci must be >= 0, got {r['ci']}", location=where)
        if "trt" in r:
            trt = r["trt"]
        else:
            v: dict[str, float] = {**given, **r}
            if "ratio" not in v and "i_avg" in v and "i_max" in v:
                if v["i_max"] <= 0:
                    raise InvalidInputError(f"i_max must be > 0, got {v['i_max']}", location=where)
                v["ratio"] = v["i_avg"] / v["i_max"]
            missing = [k for k in ("timeout", "recovery", "warmup", "ratio") if k not in v]
            if missing:
                raise InvalidInputError(
                    f"no 'trt' and missing {missing} to estimate it (give columns or command-line defaults; "
                    "ratio may be given as i_avg and i_max)", location=where)
            try:
                trt = total_recovery_time(r["ci"], timeout=v["timeout"], recovery=v["recovery"],
                                          warmup=v["warmup"], ratio=v["ratio"], case=case,
                                          reading=reading, threshold=threshold)
            except InvalidInputError as e:
                raise InvalidInputError(e.reason, location=f"{where}.{e.location}" if e.location else where) from None
        points.append(ProfilingPoint(r["ci"], r["latency"], trt))
    return points


def load_profile(path: str | Path, **kw: Any) -> list[ProfilingPoint]:
    r"""Read a CSV (``.csv``) or JSON (anything else) profiling file; see the module notes.

    Parameters
    ----------
    path : str or Path
        The profiling file.
    **kw
        Passed to :func:`points_from_rows`.

    Returns
    -------
    list of ProfilingPoint
        One point per row, in order.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = Path(d, "p.csv")
    ...     _ = f.write_text("ci,latency,trt\n1000,900,40\n20000,700,80\n40000,650,130\n")
    ...     [p.trt for p in load_profile(f)]
    [40.0, 80.0, 130.0]
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read: {e}", source=str(p)) from None
    kind = "csv" if p.suffix.lower() == ".csv" else "json"
    try:
        return points_from_rows(parse_rows(text, kind=kind), **kw)
    except InvalidInputError as e:
        raise e.with_source(str(p)) from None
