"""``outputs-exactly-once``: the outputs after recovery equal the reference multiset.

At the ``end``, the multiset of outputs of the effective execution (outputs of rolled-back work
removed) equals the reference; a duplicate, an unexpected and a missing output are named. Without
the end of the run (a recording cut before its ``end``, or mid-line) the outputs cannot be
compared: *unchecked*.

References
----------
``specs/formats.md#trace-checks``; FERDiS paper §7.2 (output commit).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.plugin import Recovery, TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["OutputsExactlyOnce", "reference_from_list", "load_reference", "canon_output"]


def canon_output(process: str, key: Any, value: Any) -> str:
    """One output as a canonical string (the multiset element).

    Parameters
    ----------
    process : str
        The process that wrote the output.
    key, value : object
        The output's key and value (JSON values).
    """
    return json.dumps([process, key, value], sort_keys=True, separators=(",", ":"))


def _describe(canon: str) -> str:
    p, k, v = json.loads(canon)
    return f"{p} key={json.dumps(k)} value={json.dumps(v)}"


def reference_from_list(doc: Any, processes: Sequence[str] | None = None, source: str | None = None) -> Counter[str]:
    """The multiset of reference outputs from a JSON list of ``{"process", "key", "value"}``.

    Parameters
    ----------
    doc : object
        The parsed JSON document.
    processes : sequence of str, optional
        The known process names (None: any name).
    source : str, optional
        The reference file's name for messages.

    Returns
    -------
    Counter of str
        Canonical output (:func:`canon_output`) to its count.

    Examples
    --------
    >>> ref = reference_from_list([{"process": "a", "key": "k", "value": 1}])
    >>> sum(ref.values())
    1
    """
    if not isinstance(doc, list):
        raise InvalidInputError("expected a JSON list of {\"process\", \"key\", \"value\"} objects",
                                source=source)
    out: Counter[str] = Counter()
    for k, item in enumerate(doc):
        if not isinstance(item, dict) or not {"process", "key", "value"} <= set(item):
            raise InvalidInputError("expected an object with \"process\", \"key\" and \"value\"",
                                    source=source, location=f"[{k}]")
        if not isinstance(item["process"], str) or (processes is not None and item["process"] not in processes):
            raise InvalidInputError(f"process: unknown process {item['process']!r}", source=source,
                                    location=f"[{k}]")
        out[canon_output(item["process"], item["key"], item["value"])] += 1
    return out


def load_reference(path: str) -> Any:
    """Read a reference-outputs file (a JSON list) under the input bounds of the JSON loader.

    The bounds are those of :func:`~rollcheck.pyimpl.jsonio.load_json_file` (nesting, NaN, number
    sizes); the content is validated later, against the trace's processes.
    """
    from rollcheck.pyimpl.jsonio import load_json_file

    try:
        return load_json_file(path)
    except InvalidInputError as e:  # worded as the trace reader words it
        if e.reason.startswith("malformed JSON: "):
            raise InvalidInputError(f"not valid JSON ({e.reason[len('malformed JSON: '):]})", source=e.source,
                                    location=e.location) from None
        raise


class OutputsExactlyOnce(TraceCheck):
    """Outputs of the effective execution against a reference multiset (module docstring)."""

    name = "outputs-exactly-once"
    needs = ("reference", "output", "end")

    def __init__(self, reference: Counter[str]):
        self.reference = reference
        self.outputs: list[tuple[int, int, str, int]] = []  # process, checkpoints before, canon, seq

    @override
    def on_output(self, v: Any, seq: int, i: int, key: Any, value: Any) -> None:
        self.outputs.append((i, v.count[i], canon_output(v.names[i], key, value), seq))

    @override
    def after_cut(self, v: Any, rec: Recovery) -> None:
        lim = rec.limit
        self.outputs[:] = [o for o in self.outputs if lim[o[0]] is None or o[1] < lim[o[0]]]  # type: ignore[operator]

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        ref = self.reference
        if not v.ended:
            return Check.unchecked(self.name, f"the run's end was not recorded (the recording stops after seq "
                                   f"{v.last_seq}): the outputs cannot be compared with the reference "
                                   f"({v.n_outputs} output(s) so far)")
        seen: Counter[str] = Counter()
        first: tuple[int, str] | None = None
        for _i, _x, canon, s in self.outputs:
            seen[canon] += 1
            if seen[canon] > ref[canon] and first is None:
                if ref[canon]:
                    first = (s, f"seq {s}: duplicate output {_describe(canon)} (the reference has it "
                                f"{ref[canon]} time(s))")
                else:
                    first = (s, f"seq {s}: unexpected output {_describe(canon)} (not in the reference)")
        missing = sorted(c for c in ref if seen[c] < ref[c])
        if first is None and missing:
            first = (v.end_seq or 0, f"missing output {_describe(missing[0])}"
                     + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
                     + f" at the end (seq {v.end_seq})")
        if first is not None:
            return Check.violated(self.name, first[1], offending_seq=first[0])
        total = sum(seen.values())
        if not total and not sum(ref.values()):
            return Check.held(self.name, "no output recorded and none expected", examined=1)
        return Check.held(self.name, f"{total} output(s) after removing rolled-back work ({v.n_outputs} "
                          "recorded) equal the reference multiset", examined=max(total, 1))
