"""Span systems: the explicit, finite instances of the Falkirk Wheel rollback problem.

A validated ``rollcheck.spans/1`` document: per processor its chain of restorable spans and (if
live) its concrete top span; per edge the discarded (unlogged) times, the processed times and φ,
as explicit finite sets of logical times. Levels of ``p``: ``0 … K-1`` for its chain
``c_0 = ∅ ⊊ … ⊊ c_{K-1}``, ``K`` for ``⊤_p`` when live. ``discarded[k]`` and ``phi[k]`` are
indexed by the source's chain index (``discarded_top`` is ``T_D(⊤_src)``; ``φ(⊤_src)`` is all
times); times on an edge are in the destination's domain, arrays read as (nested) tuples.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.3 (constraints and metadata) and §4.1 (⊤ added for live processors).

See ``specs/spans.md#system`` for the definitions and ``specs/spans.md#validity`` for the rules.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _encode_str  # what json.dumps uses for a str
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InternalError, InvalidInputError
from rollcheck.pyimpl.jsonio import load_json_file

__all__ = [
    "FORMAT",
    "TOP",
    "ProcessorSpec",
    "EdgeSpec",
    "SpanSystem",
    "system_from_dict",
    "system_to_dict",
    "load_system",
    "time_from_json",
    "time_to_json",
    "validate_schema",
]

FORMAT = "rollcheck.spans/1"
TOP = "top"

Time = Hashable
_PLAIN = frozenset({str, int})


def time_from_json(v: Any, location: str) -> Time:
    """Convert a JSON time (string, number or array) into a hashable Python value.

    >>> time_from_json(["e", 3], "x")
    ('e', 3)
    """
    if type(v) is str or type(v) is int:  # the common case first (exact types: no bool)
        return v
    if isinstance(v, bool) or v is None or isinstance(v, dict | float):
        raise InvalidInputError(f"a time must be a string, an integer or an array, got {v!r}", location=location)
    if isinstance(v, list):
        return tuple(time_from_json(x, location) for x in v)
    if type(v) is str or type(v) is int:  # exactly: no bool, no number parsed as a marker
        return v
    raise InvalidInputError(f"a time must be a string, an integer or an array, got {v!r}", location=location)


def time_to_json(t: Time) -> Any:
    """Inverse of :func:`time_from_json` (tuples become lists).

    >>> time_to_json(("e", 3))
    ['e', 3]
    """
    if isinstance(t, tuple):
        return [time_to_json(x) for x in t]
    return t


def _sort_key(t: Time) -> str:
    """``json.dumps(time_to_json(t), sort_keys=True)``, built directly for the common times.

    Strings, integers and tuples of them (the times of every system); anything else: ``json.dumps``.

    >>> [_sort_key(x) == json.dumps(time_to_json(x), sort_keys=True) for x in ("é", 3, ("e", (1, "x")), ())]
    [True, True, True, True]
    """
    if type(t) is str:
        return _encode_str(t)
    if type(t) is int:
        return int.__repr__(t)
    if type(t) is tuple:
        try:
            return "[" + ", ".join(map(_plain_key, t)) + "]"
        except TypeError:  # an element that is not a string, an integer or a tuple
            pass
    return json.dumps(time_to_json(t), sort_keys=True)


def _plain_key(t: Time) -> str:
    if type(t) is str:
        return _encode_str(t)
    if type(t) is int:
        return int.__repr__(t)
    if type(t) is tuple:
        return "[" + ", ".join(map(_plain_key, t)) + "]"
    raise TypeError("not a plain time")


@dataclass(frozen=True)
class ProcessorSpec:
    """One processor: its chain of restorable spans and, when live, its concrete top."""

    name: str
    chain: tuple[frozenset, ...]
    top: frozenset | None = None

    @property
    def live(self) -> bool:
        """Whether the processor is live (it has a ⊤)."""
        return self.top is not None

    @property
    def top_level(self) -> int:
        """The largest level: ``len(chain)`` (⊤) when live, else the last chain index."""
        return len(self.chain) if self.top is not None else len(self.chain) - 1

    def span(self, level: int) -> frozenset:
        """The set of times of the span at ``level`` (⊤ for ``level == len(chain)``)."""
        if level == len(self.chain):
            if self.top is None:
                raise InternalError(f"{self.name} is failed and has no top (level {level} asked for)")
            return self.top
        return self.chain[level]

    def is_top(self, level: int) -> bool:
        """Whether ``level`` is the processor's ⊤."""
        return self.top is not None and level == len(self.chain)

    def label(self, level: int) -> int | str:
        """The output label of ``level``: the chain index, or ``"top"``."""
        return TOP if self.is_top(level) else level


@dataclass(frozen=True)
class EdgeSpec:
    """One edge ``src -> dst`` with T_D per source span, T_M and φ per source span."""

    name: str
    src: str
    dst: str
    discarded: tuple[frozenset, ...]
    discarded_top: frozenset | None
    processed: frozenset
    phi: tuple[frozenset, ...]


@dataclass(frozen=True)
class SpanSystem:
    """A validated span system (build it with :func:`system_from_dict` or :func:`load_system`).

    ``phi_monotone`` is False only for systems built with ``phi="keep"`` whose φ is not monotone
    along a chain; :func:`rollcheck.pyimpl.spans.solve` refuses those (they have no greatest solution in
    general), the literal algorithm and brute force accept them for study.
    """

    processors: tuple[ProcessorSpec, ...]
    edges: tuple[EdgeSpec, ...]
    phi_monotone: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {p.name: i for i, p in enumerate(self.processors)})

    @property
    def names(self) -> list[str]:
        """The processor names, in order."""
        return [p.name for p in self.processors]

    def index(self, name: str) -> int:
        """The position of processor ``name``."""
        return self._index[name]  # type: ignore[attr-defined]

    def proc(self, name: str) -> ProcessorSpec:
        """The processor called ``name``."""
        return self.processors[self.index(name)]

    def top_levels(self) -> dict[str, int]:
        """The largest level of every processor, by name."""
        return {p.name: p.top_level for p in self.processors}

    # -- the two constraints of one edge, exactly as in Falkirk §3.3 ---------------------------
    def c1_holds(self, e: EdgeSpec, src_level: int, dst_level: int) -> bool:
        """C1 (owned by the source): ``T_D(s(src)) ⊆ s(dst)``; holds when both stay at ⊤."""
        ps, pd = self.proc(e.src), self.proc(e.dst)
        if ps.is_top(src_level):
            if pd.is_top(dst_level):
                return True
            d = e.discarded_top
            assert d is not None
        else:
            d = e.discarded[src_level]
        return d <= pd.span(dst_level)

    def c2_holds(self, e: EdgeSpec, dst_level: int, src_level: int) -> bool:
        """C2 (owned by the destination): ``T_M ∩ s(dst) ⊆ φ(s(src))``, φ(⊤) = all times."""
        ps, pd = self.proc(e.src), self.proc(e.dst)
        if ps.is_top(src_level):
            return True
        return (e.processed & pd.span(dst_level)) <= e.phi[src_level]

    def violations(self, levels: Mapping[str, int]) -> list[str]:
        """Every constraint violated by the assignment ``levels`` (empty list: feasible)."""
        out = []
        for e in self.edges:
            if not self.c1_holds(e, levels[e.src], levels[e.dst]):
                out.append(f"C1 on edge {e.name} ({e.src}->{e.dst})")
            if not self.c2_holds(e, levels[e.dst], levels[e.src]):
                out.append(f"C2 on edge {e.name} ({e.src}->{e.dst})")
        return out

    def labels(self, levels: Mapping[str, int]) -> dict[str, int | str]:
        """Map levels to output labels (chain index or ``"top"``)."""
        return {p.name: p.label(levels[p.name]) for p in self.processors}

    def levels_from_labels(self, labels: Mapping[str, int | str]) -> dict[str, int]:
        """Map output labels (chain index or ``"top"``) back to levels."""
        return {p.name: (len(p.chain) if labels[p.name] == TOP else int(labels[p.name]))
                for p in self.processors}


# ------------------------------------------------------------------------------------------------
# Reading and validating
# ------------------------------------------------------------------------------------------------

def _set(v: Any, loc: str) -> frozenset:
    if not isinstance(v, list):
        raise InvalidInputError(f"expected an array of times, got {type(v).__name__}", location=loc)
    if set(map(type, v)) <= _PLAIN:  # only strings and integers (exact types): nothing to convert
        return frozenset(v)
    try:  # strings, integers and arrays of them: converted without building error locations
        return frozenset(map(_plain_time, v))
    except _NotPlain:
        return frozenset(time_from_json(x, f"{loc}[{i}]") for i, x in enumerate(v))


class _NotPlain(Exception):
    """A JSON time other than a string, an integer or an array of those (see :func:`_plain_time`)."""


def _plain_time(v: Any) -> Time:
    """:func:`time_from_json` for strings, integers and (nested) arrays of them, exact types only.

    Raises :class:`_NotPlain` on anything else (the caller then takes the checking path).
    """
    if type(v) is str or type(v) is int:
        return v
    if type(v) is list:
        return tuple(map(_plain_time, v))
    raise _NotPlain


def _sets(v: Any, loc: str) -> list[frozenset]:
    if not isinstance(v, list):
        raise InvalidInputError(f"expected an array of arrays of times, got {type(v).__name__}", location=loc)
    return [_set(x, f"{loc}[{i}]") for i, x in enumerate(v)]


def system_from_dict(doc: Any, *, phi: str = "reject", source: str | None = None,
                     semantic: bool = False) -> SpanSystem:
    """Validate a ``rollcheck.spans/1`` document and build the :class:`SpanSystem`.

    Parameters
    ----------
    doc : dict
        The parsed JSON document.
    phi : {"reject", "normalise", "keep"}
        What to do when φ is not monotone along the source's chain: reject (exit 2 on the CLI),
        replace φ(c_k) by the union of φ(c_0..c_k), or keep it (for studying the failure of
        maximality; :func:`rollcheck.pyimpl.spans.solve` refuses such systems).
    source : str, optional
        File name, for error messages.
    semantic : bool
        Also reject systems no execution can produce (``specs/spans.md#validity``): ``T_D`` that
        shrinks along the source's chain or is not contained in ``T_D(⊤)``, and a live receiver
        whose ⊤ misses a time it processed. The command line always checks these; abstract
        instances built for studying the algorithm may leave them out.

    Raises
    ------
    InvalidInputError
        Naming the processor or edge and the reason.

    Examples
    --------
    >>> s = system_from_dict({"format": "rollcheck.spans/1",
    ...     "processors": {"p": {"chain": [[], ["a"]], "top": ["a", "b"]}}, "edges": []})
    >>> s.proc("p").top_level
    2
    """
    try:
        return _from_dict(doc, phi, semantic)
    except InvalidInputError as e:
        raise (e.with_source(source) if source else e) from None


def _from_dict(doc: Any, phi_mode: str, semantic: bool = False) -> SpanSystem:
    if phi_mode not in ("reject", "normalise", "keep"):
        raise InvalidInputError(f"phi must be reject, normalise or keep, not {phi_mode!r}", location="phi")
    if not isinstance(doc, dict):
        raise InvalidInputError("a span system must be a JSON object", location="$")
    if doc.get("format") != FORMAT:
        raise InvalidInputError(f"format must be {FORMAT!r}, got {doc.get('format')!r}", location="format")
    procs_doc = doc.get("processors")
    if not isinstance(procs_doc, dict) or not procs_doc:
        raise InvalidInputError("processors must be a non-empty object", location="processors")
    procs: list[ProcessorSpec] = []
    for name, pd in procs_doc.items():
        procs.append(_processor_spec(name, pd))
    by_name = {p.name: p for p in procs}
    edges_doc = doc.get("edges", [])
    if not isinstance(edges_doc, list):
        raise InvalidInputError("edges must be an array", location="edges")
    edges: list[EdgeSpec] = []
    seen: set[str] = set()
    monotone = True
    for i, ed in enumerate(edges_doc):
        loc = f"edges[{i}]"
        if not isinstance(ed, dict):
            raise InvalidInputError("expected an edge object", location=loc)
        name = ed.get("name", f"e{i}")
        if not isinstance(name, str):
            raise InvalidInputError("edge name must be a string", location=f"{loc}.name")
        loc = f"edges[{i}] ({name})"
        if name in seen:
            raise InvalidInputError(f"duplicate edge name {name!r}", location=loc)
        seen.add(name)
        for f in ("src", "dst", "discarded", "processed", "phi"):
            if f not in ed:
                raise InvalidInputError(f"edge {name}: missing {f!r}", location=loc)
        src, dst = ed["src"], ed["dst"]
        for f, v in (("src", src), ("dst", dst)):
            if not isinstance(v, str):
                raise InvalidInputError(f"edge {name}: {f} must be a processor name (a string), got {v!r}"[:200],
                                        location=f"{loc}.{f}")
            if v not in by_name:
                raise InvalidInputError(f"edge {name}: unknown processor {v!r}", location=f"{loc}.{f}")
        ps = by_name[src]
        k = len(ps.chain)
        discarded = _sets(ed["discarded"], f"{loc}.discarded")
        phis = _sets(ed["phi"], f"{loc}.phi")
        for f, lst in (("discarded", discarded), ("phi", phis)):
            if len(lst) != k:
                raise InvalidInputError(
                    f"edge {name}: {f} has {len(lst)} entries but source {src}'s chain has {k}",
                    location=f"{loc}.{f}")
        if discarded[0]:
            raise InvalidInputError(f"edge {name}: T_D(c_0) must be empty (nothing is sent before any event)",
                                    location=f"{loc}.discarded[0]")
        dtop = None
        if ed.get("discarded_top") is not None:
            dtop = _set(ed["discarded_top"], f"{loc}.discarded_top")
        elif ps.live:
            raise InvalidInputError(f"edge {name}: discarded_top is required because source {src} is live",
                                    location=f"{loc}.discarded_top")
        processed = _set(ed["processed"], f"{loc}.processed")
        if semantic:
            _check_semantic(name, loc, discarded, dtop, processed, by_name[dst])
        for j in range(1, k):
            if not phis[j - 1] <= phis[j]:
                if phi_mode == "reject":
                    raise InvalidInputError(
                        f"edge {name}: phi is not monotone along {src}'s chain "
                        f"(phi[{j - 1}] ⊄ phi[{j}]); use --normalise-phi to take running unions",
                        location=f"{loc}.phi[{j}]")
                if phi_mode == "normalise":
                    phis[j] = phis[j] | phis[j - 1]
                else:
                    monotone = False
        edges.append(EdgeSpec(name, src, dst, tuple(discarded), dtop, processed, tuple(phis)))
    unknown_top = set(doc) - {"format", "processors", "edges", "comment", "meta"}
    if unknown_top:
        raise InvalidInputError(f"unknown field(s) {sorted(unknown_top)}", location="$")
    return SpanSystem(tuple(procs), tuple(edges), monotone)


def _processor_spec(name: Any, pd: Any) -> ProcessorSpec:
    """Processor ``name`` of a document: its chain and its top when live.

    The chain is strictly increasing from the empty c_0; the top holds the last chain element.
    """
    loc = f"processors.{name}"
    if not isinstance(pd, dict):
        raise InvalidInputError("expected an object with 'chain' (and 'top' when live)", location=loc)
    unknown = set(pd) - {"chain", "top"}
    if unknown:
        raise InvalidInputError(f"unknown field(s) {sorted(unknown)}", location=loc)
    if "chain" not in pd:
        raise InvalidInputError("missing 'chain'", location=loc)
    chain = _sets(pd["chain"], f"{loc}.chain")
    if not chain:
        raise InvalidInputError("the chain must start with the empty span c_0", location=f"{loc}.chain")
    if chain[0]:
        raise InvalidInputError("c_0 must be the empty span", location=f"{loc}.chain[0]")
    for k in range(1, len(chain)):
        if not (chain[k - 1] < chain[k]):
            raise InvalidInputError(
                f"processor {name}: chain is not strictly increasing (c_{k - 1} ⊄ c_{k} or equal)",
                location=f"{loc}.chain[{k}]")
    top = None
    if "top" in pd and pd["top"] is not None:
        top = _set(pd["top"], f"{loc}.top")
        if not chain[-1] <= top:
            raise InvalidInputError(
                f"processor {name}: top must contain the last chain element", location=f"{loc}.top")
    return ProcessorSpec(str(name), tuple(chain), top)


def _check_semantic(name: str, loc: str, discarded: list[frozenset], dtop: frozenset | None,
                    processed: frozenset, pd: ProcessorSpec) -> None:
    for x in range(1, len(discarded)):
        if not discarded[x - 1] <= discarded[x]:
            raise InvalidInputError(f"edge {name}: discarded[{x}] misses a time of discarded[{x - 1}] (the events "
                                    "of a larger span send at least as much)", location=f"{loc}.discarded[{x}]")
    if dtop is not None and not discarded[-1] <= dtop:
        raise InvalidInputError(f"edge {name}: discarded_top misses a time of the last discarded entry",
                                location=f"{loc}.discarded_top")
    if pd.top is not None and not processed <= pd.top:
        raise InvalidInputError(f"edge {name}: {pd.name} processed a time its top does not hold (a live "
                                "processor's top holds every time it processed)", location=f"{loc}.processed")


def system_to_dict(s: SpanSystem) -> dict[str, Any]:
    """The ``rollcheck.spans/1`` document of ``s`` (sets written in a canonical order)."""

    def js(x: frozenset) -> list[Any]:
        return [time_to_json(t) for t in sorted(x, key=_sort_key)]

    procs: dict[str, Any] = {}
    for p in s.processors:
        d: dict[str, Any] = {"chain": [js(c) for c in p.chain]}
        if p.top is not None:
            d["top"] = js(p.top)
        procs[p.name] = d
    edges = []
    for e in s.edges:
        ed: dict[str, Any] = {"name": e.name, "src": e.src, "dst": e.dst,
                              "discarded": [js(x) for x in e.discarded]}
        if e.discarded_top is not None:
            ed["discarded_top"] = js(e.discarded_top)
        ed["processed"] = js(e.processed)
        ed["phi"] = [js(x) for x in e.phi]
        edges.append(ed)
    return {"format": FORMAT, "processors": procs, "edges": edges}


def load_system(path: str | Path, *, phi: str = "reject", semantic: bool = True) -> SpanSystem:
    """Read and validate a ``rollcheck.spans/1`` file (see :func:`system_from_dict`).

    The semantic rules are checked too unless ``semantic=False``.

    Raises
    ------
    InvalidInputError
        An unreadable file or an invalid system, naming the JSON path.
    """
    path = Path(path)
    # under the input bounds of rollcheck.pyimpl.jsonio: nesting is capped up front, so a document
    # nested too deeply is refused before the recursive validation sees it
    doc = load_json_file(path)
    return system_from_dict(doc, phi=phi, source=str(path), semantic=semantic)


def validate_schema(doc: Any, schema: str = "spans", source: str | None = None) -> None:
    """Check ``doc`` against the shipped JSON Schema ``<schema>.schema.json`` (spans, dataflow).

    Raises
    ------
    InvalidInputError
        Naming the JSON path of the first error.

    Examples
    --------
    >>> validate_schema({"format": "rollcheck.spans/1", "processors": {"p": {"chain": [[]]}}})
    >>> validate_schema({"format": "rollcheck.spans/1", "processors": {"p": {"chain": [[1.5]]}}})
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: processors.p.chain[0][0]: schema: 1.5 is not valid under any of the given schemas
    """
    from importlib.resources import files

    import jsonschema

    if schema not in ("spans", "dataflow"):
        raise InvalidInputError(f"unknown schema {schema!r}", location="schema")
    text = (files("rollcheck.pyimpl.schemas") / f"{schema}.schema.json").read_text(encoding="utf-8")
    validator = jsonschema.Draft202012Validator(json.loads(text))
    err = min(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path], default=None)
    if err is not None:
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path).lstrip(".")
        raise InvalidInputError(f"schema: {err.message}"[:300], source=source, location=loc or None)
