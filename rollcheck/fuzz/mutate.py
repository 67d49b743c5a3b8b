"""Mutating valid inputs for rollcheck's fuzzer (Hypothesis strategies).

- :func:`mutated_document` — ``(description, bytes)``: a valid seed document with structural
  mutations (wrong types, missing and unknown keys, unknown names, duplicates, huge, negative and
  fractional numbers, deep nesting, lone surrogates, long strings, reordered lists) and byte-level
  ones (NaN/Infinity/1e999, 5,000-digit integers, truncation, BOM, bytes that are not UTF-8,
  trailing garbage, duplicate keys, empty and blank files);
- :func:`mutated_options` — an argv with each numeric flag sensible, odd or absent;
- :func:`mutated_text` — a TLA+-like value string cut, spliced, deepened, with huge numbers.

References
----------
``specs/cli.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from rollcheck.fuzz.formats import GOOD_VALUES, OptionsFormat

__all__ = ["mutated_document", "mutated_options", "mutated_text"]


_ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 3, 7, 2**31, 2**63, 2**64, -(2**64), 10**30, 10**99,
    1.5, -0.0, 1e308, -1e308, 1e-308, "", " ", "x", "P0", "p", "nope", "\ud800", "a\udfffb",
    "$\\frac$", "\x00", "\n", "é" * 3, "a" * 5000, [], [[]], [[[[[]]]]], {}, {"x": 1},
    [1, 2, 3], ["P0", "P0"], [None], {"format": "x"},
]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc``, parents before children, in document order.

    Examples
    --------
    >>> _paths({"a": [1, {"b": 2}], "c": 3})
    [(), ('a',), ('a', 0), ('a', 1), ('a', 1, 'b'), ('c',)]
    """
    out: list[tuple[Any, ...]] = []

    def walk(x: Any, here: tuple[Any, ...]) -> None:
        out.append(here)
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, (*here, k))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, (*here, i))

    walk(doc, prefix)
    return out


def _copy(doc: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists and immutable scalars; no shared parts).

    ``copy.deepcopy`` gives the same document, with a memo and a dispatch per value the fuzzer
    does not need (a seed or a mutated document never holds one list or dict twice).

    Examples
    --------
    >>> d = {"a": [1, {"b": "x"}], "c": None}
    >>> e = _copy(d); e["a"][1]["b"] = "y"
    >>> d == {"a": [1, {"b": "x"}], "c": None}, e["a"][0] is d["a"][0]
    (True, True)
    """
    if isinstance(doc, dict):
        return {k: _copy(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_copy(v) for v in doc]
    return doc


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _strings(doc: Any) -> list[str]:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in [k, *_strings(v)]]
    if isinstance(doc, list):
        return [s for v in doc for s in _strings(v)]
    return []


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


_STRUCTURAL = ("replace", "delete", "add_key", "duplicate", "drop_item", "swap_name", "nest",
               "reverse", "number")
_BYTES = ("none", "none", "none", "nan", "infinity", "overflow", "bigint", "truncate", "bom",
          "bad_utf8", "trailing", "dup_key", "empty", "blank", "deep", "surrogate_bytes")

# The strategies with fixed elements, built once: a strategy built inside a draw is validated and
# labelled again on every input (the same strategy, so the same values: only the work is saved).
_KIND = st.sampled_from(_STRUCTURAL)
_ODD = st.sampled_from(_ODD_VALUES)
_NEW_KEY = st.sampled_from(["extra", "format", "", "\ud800", "processes", "x" * 300])
_DEPTH = st.sampled_from([2, 50, 99, 101, 150, 300])
_BYTE_KIND = st.sampled_from(_BYTES)
_BAD_UTF8 = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])
_TRAILING = st.sampled_from([b"x", b"{}", b"]", b"\x00", b"\n\n{"])
_DEEP = st.sampled_from([200, 100_000])
_LINE_KIND = st.sampled_from(["drop line", "repeat line", "swap lines", "move line"])


@st.composite
def _structural(draw: Any, doc: Any, pick_path: Any = None) -> tuple[Any, str]:
    """One structural mutation of ``doc``.

    ``pick_path`` (when ``doc`` is an unchanged seed) is ``sampled_from(_paths(doc))`` built once
    for that seed.
    """
    kind = draw(_KIND)
    path = draw(pick_path if pick_path is not None else st.sampled_from(_paths(doc)))
    target = _get(doc, path)
    where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path) or "(root)"
    if kind == "replace":
        return _set(doc, path, _copy(draw(_ODD))), f"replace {where}"
    if kind == "delete" and path:
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return doc, f"delete {where}"
    if kind == "add_key" and isinstance(target, dict):
        key = draw(_NEW_KEY)
        target[key] = _copy(draw(_ODD))
        return doc, f"add key to {where}"
    if kind == "duplicate" and isinstance(target, list) and target:
        i = draw(st.integers(0, len(target) - 1))
        target.insert(draw(st.integers(0, len(target))), _copy(target[i]))
        return doc, f"duplicate an item of {where}"
    if kind == "drop_item" and isinstance(target, list) and target:
        del target[draw(st.integers(0, len(target) - 1))]
        return doc, f"drop an item of {where}"
    if kind == "swap_name" and isinstance(target, str):
        names = _strings(doc) + ["nope", "P9", ""]
        return _set(doc, path, draw(st.sampled_from(names))), f"swap name at {where}"
    if kind == "nest":
        # deeper nesting is a byte-level mutation ("deep"): a copy or Python's json.dumps of a
        # document nested ~1,000 deep would recurse out, inside the strategy
        depth = draw(_DEPTH)
        v: Any = target
        for _ in range(depth):
            v = [v]
        return _set(doc, path, v), f"nest {where} {depth} deep"
    if kind == "reverse" and isinstance(target, list):
        target.reverse()
        return doc, f"reverse {where}"
    if kind == "number" and isinstance(target, (int, float)) and not isinstance(target, bool):
        v = draw(st.sampled_from([-target, target * 1000, target + 0.5, 0, -1, 10**9, 10**18, 2**64,
                                  10**23, 1e9, 1e-300, 1e300]))
        return _set(doc, path, v), f"number at {where}"
    return _set(doc, path, _copy(draw(_ODD))), f"replace {where}"


def _dump(doc: Any, compact: bool, lines: bool = False) -> bytes:
    """The file bytes of ``doc``: one JSON document, or (``lines``) one JSON value per line.

    ``lines`` applies when ``doc`` is a list (a JSON Lines trace: header, then events).
    """
    sep = (",", ":") if compact else None
    if lines and isinstance(doc, list):
        text = "".join(json.dumps(x, separators=sep, ensure_ascii=False) + "\n" for x in doc)
    else:
        text = json.dumps(doc, separators=sep, ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")  # lone surrogates become bytes that are not UTF-8


def _byte_mutation(draw: Any, data: bytes) -> tuple[bytes, str]:
    import re

    kind = draw(_BYTE_KIND)
    if kind == "none":
        return data, ""
    num = re.search(rb"(?<![\w.\"])-?\d+(\.\d+)?([eE][+-]?\d+)?", data)
    if kind in ("nan", "infinity", "overflow", "bigint") and num:
        rep = {"nan": b"NaN", "infinity": b"-Infinity", "overflow": b"1e999", "bigint": b"9" * 5000}[kind]
        return data[:num.start()] + rep + data[num.end():], kind
    if kind == "truncate" and len(data) > 1:
        return data[:draw(st.integers(0, len(data) - 1))], kind
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, kind
    if kind == "bad_utf8":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(_BAD_UTF8) + data[i:], kind
    if kind == "trailing":
        return data + draw(_TRAILING), kind
    if kind == "dup_key" and data.startswith(b"{"):
        return b'{"format":"dup",' + data[1:], kind
    if kind == "empty":
        return b"", kind
    if kind == "blank":
        return b" \n\t ", kind
    if kind == "deep":
        n = draw(_DEEP)
        return b"[" * n + b"]" * n, kind
    if kind == "surrogate_bytes":
        return data.replace(b'"', b'"\xed\xa0\x80', 1), kind
    return data, ""


def mutated_document(seeds: Sequence[Any], lines: bool = False) -> st.SearchStrategy[tuple[str, bytes]]:
    """A strategy of ``(description, file bytes)``: a seed with 0–3 structural and 0–1 byte mutations.

    The seeds themselves (no mutation) are among the values drawn, so valid input is exercised too.
    With ``lines`` a seed is a list of objects written one per line (JSON Lines): the structural
    mutations of the list drop, duplicate and reorder lines, those of its items change fields, and
    the byte-level ``truncate`` cuts the file mid-line, as a killed writer does.

    What depends only on the seeds (the strategy picking one, the paths into each) is built here,
    once, not on every draw.
    """
    seed_list = list(seeds)
    seed_paths = {id(s): st.sampled_from(_paths(s)) for s in seed_list}  # the picker holds the seeds: ids stay theirs
    return _mutated_document(st.sampled_from(seed_list), seed_paths, lines)


@st.composite
def _mutated_document(draw: Any, pick_seed: Any, seed_paths: dict[int, Any], lines: bool) -> tuple[str, bytes]:
    seed = draw(pick_seed)
    doc = _copy(seed)
    notes = []
    for m in range(draw(st.integers(0, 3))):
        doc, what = draw(_structural(doc, seed_paths[id(seed)] if m == 0 else None))
        notes.append(what)
        if what.startswith("nest"):
            break  # keep the document shallow enough for copying and json.dumps
    if lines and isinstance(doc, list) and len(doc) > 2 and draw(st.booleans()):
        # a line-level mutation: what a buggy engine or a bad merge of two logs writes
        i = draw(st.integers(1, len(doc) - 1))
        kind = draw(_LINE_KIND)
        if kind == "drop line":
            del doc[i]
        elif kind == "repeat line":
            doc.insert(i, _copy(doc[i]))
        elif kind == "swap lines" and i + 1 < len(doc):
            doc[i], doc[i + 1] = doc[i + 1], doc[i]
        else:
            doc.insert(draw(st.integers(1, len(doc) - 1)), doc.pop(i))
        notes.append(kind)
    if lines and notes and isinstance(doc, list) and draw(st.booleans()):
        # renumber the events 1, 2, … so that a dropped, repeated or reordered line reaches the
        # checker instead of stopping at the reader's "seq numbers have no gaps"
        for i, item in enumerate(doc[1:], start=1):
            if isinstance(item, dict):
                item["seq"] = i
        notes.append("renumber seq")
    data = _dump(doc, draw(st.booleans()), lines)
    data, what = _byte_mutation(draw, data)
    if what:
        notes.append(what)
    return "; ".join(notes) or "valid seed", data


_CHOICE = st.sampled_from(["good", "odd", "odd", "absent"])


def mutated_options(fmt: OptionsFormat) -> st.SearchStrategy[list[str]]:
    """A strategy of argvs: one command of ``fmt`` with each flag either sensible, odd, or absent.

    The strategies picking a command and each flag's odd value are built here, once.
    """
    odd_values = {id(flags): [(flag, st.sampled_from(odd)) for flag, odd in flags.items()]
                  for _, flags in fmt.commands}  # the picker holds the commands: ids stay theirs
    return _mutated_options(st.sampled_from(fmt.commands), odd_values)


@st.composite
def _mutated_options(draw: Any, pick_command: Any, odd_values: dict[int, list[tuple[str, Any]]]) -> list[str]:
    base, flags = draw(pick_command)
    argv = list(base)
    for flag, odd in odd_values[id(flags)]:
        choice = draw(_CHOICE)
        if choice == "good" and flag in GOOD_VALUES:
            argv += [flag, GOOD_VALUES[flag]]
        elif choice == "odd":
            argv += [f"{flag}={draw(odd)}"]
    return argv


_TEXT_KINDS = ("cut", "splice", "deep", "bigint", "range", "char", "dup")
_TEXT_DEEP = st.sampled_from([10, 500, 5000])
_TEXT_DIGITS = st.sampled_from([20, 5000])
_TEXT_RANGE = st.sampled_from(["1..1000000000000", "-5..5", "3..1", "1..", ".."])
_TEXT_CHAR = st.sampled_from(["\ud800", "\x00", "@@", ":>", "|->", '"', "\\", "{", ">>"])


def mutated_text(seeds: Sequence[str], skip: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """A strategy of TLA+-like texts: a seed cut, spliced, deepened, or with huge numbers and ranges."""
    return _mutated_text(st.sampled_from(list(seeds)),
                         st.sampled_from([k for k in _TEXT_KINDS if k not in skip]))


@st.composite
def _mutated_text(draw: Any, pick_seed: Any, pick_kind: Any) -> str:
    s = draw(pick_seed)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(pick_kind)
        i = draw(st.integers(0, len(s)))
        if kind == "cut":
            s = s[:i]
        elif kind == "splice":
            s = s[:i] + draw(pick_seed) + s[i:]
        elif kind == "deep":
            n = draw(_TEXT_DEEP)
            s = "<<" * n + s + ">>" * n
        elif kind == "bigint":
            s = s[:i] + "9" * draw(_TEXT_DIGITS) + s[i:]
        elif kind == "range":
            s = s[:i] + draw(_TEXT_RANGE) + s[i:]
        elif kind == "char":
            s = s[:i] + draw(_TEXT_CHAR) + s[i:]
        else:
            s = s + s
    return s
