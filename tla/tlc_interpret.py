"""What a TLC run established, read from its ``-tool`` messages and exit code (:func:`interpret`).

The outcome rules are :mod:`rollcheck.tla.tlc_result`'s; the messages come from
:func:`rollcheck.tla.tlc_messages.parse_tool_output`. A lasso's last state carries ``back_to``;
an initial-state violation carries that state; parse and configuration errors come back as status
``error`` with their located errors (:mod:`rollcheck.tla.tlc_source_errors`).

References
----------
Y. Yu, P. Manolios, L. Lamport, "Model checking TLA+ specifications", CHARME 1999.
"""

from __future__ import annotations

import re
from pathlib import Path

from rollcheck.tla.tlc_messages import (
    BACK_TO_STATE,
    CONFIG_ERRORS,
    DEADLOCK,
    DEPTH,
    FINAL_COUNTS,
    GENERAL_ERROR,
    INIT_STATES,
    INVARIANT_VIOLATED,
    INVARIANT_VIOLATED_INITIAL,
    NESTED_POSITIONS,
    NO_ERROR,
    PARSE_FAILED,
    PROGRESS,
    SANY_START,
    STUTTERING,
    TEMPORAL_VIOLATED,
    TRACE_FOLLOWS,
    TRACE_STATE,
    ToolMessage,
    clean_text,
    flat_messages,
    parse_tool_output,
)
from rollcheck.tla.tlc_result import SourceError, TLCResult, TraceState
from rollcheck.tla.tlc_source_errors import config_errors, sany_errors
from rollcheck.tla.values import parse_state

__all__ = ["interpret"]

_INT = re.compile(r"\d[\d,]*")
_TRACE_HEAD = re.compile(r"^\s*(\d+):\s*(<.*?>|Stuttering|Back to state[^\n]*)\s*$", re.M)


def _num(s: str) -> int:
    return int(s.replace(",", ""))


def interpret(
    text: str,
    exit_code: int | None = None,
    spec_dir: Path | None = None,
    trace_keep_last: int | None = None,
) -> TLCResult:
    r"""Turn the text TLC printed in ``-tool`` mode (and its exit code) into a :class:`TLCResult`.

    ``trace_keep_last`` keeps (and parses) only the last states of a long counterexample.
    Parse errors and configuration errors do not raise here: they come back as status
    ``error`` with ``errors`` filled in (:func:`run_tlc` turns them into bad input).

    Examples
    --------
    >>> out = ("@!@!@STARTMSG 2193:0 @!@!@\nModel checking completed. No error has been found.\n"
    ...        "@!@!@ENDMSG 2193 @!@!@\n@!@!@STARTMSG 2199:0 @!@!@\n1,234 states generated, "
    ...        "567 distinct states found, 0 states left on queue.\n@!@!@ENDMSG 2199 @!@!@\n"
    ...        "@!@!@STARTMSG 2194:0 @!@!@\nThe depth of the complete state graph search is 9.\n"
    ...        "@!@!@ENDMSG 2194 @!@!@\n")
    >>> r = interpret(out, 0)
    >>> r.status, r.generated_states, r.distinct_states, r.depth
    ('ok', 1234, 567, 9)
    """
    top, loose = parse_tool_output(text)
    flat = flat_messages(top)
    res = TLCResult(status="inconclusive", exit_code=exit_code, output=text)
    codes = {m.code for m in flat}
    errors = _input_errors(text, flat, codes, spec_dir)
    if errors is not None:
        res.status = "error"
        res.errors = errors
        res.message = "; ".join(str(e) for e in res.errors)
        return res
    _read_counts(res, flat)
    # The counterexample.
    states = [m for m in top if m.code in (TRACE_STATE, STUTTERING, BACK_TO_STATE)]
    first = 0 if trace_keep_last is None else max(0, len(states) - trace_keep_last)
    for k in range(first, len(states)):
        prev = res.trace[-1].number if res.trace else k
        res.trace.append(_trace_state(states[k], k + 1, prev + 1))
    _decide(res, top, flat, codes)
    return res


def _input_errors(text: str, flat: list[ToolMessage], codes: set[int],
                  spec_dir: Path | None) -> list[SourceError] | None:
    """The errors of parsing, semantic analysis (SANY) or the configuration; None if none."""
    # SANY: the text between 2220 and 2219 is loose text in the output.
    sany_text = ""
    if SANY_START in codes:
        end = "@!@!@ENDMSG 2220 @!@!@"
        a = text.find(end)
        b = text.find("@!@!@STARTMSG 2219:")
        if a >= 0:
            a += len(end)
            sany_text = text[a:b if b > a else len(text)]
    if PARSE_FAILED in codes or "***Parse Error***" in sany_text or "Semantic errors:" in sany_text:
        return sany_errors(sany_text, spec_dir) or [SourceError("parsing or semantic analysis failed")]
    cfg = [m for m in flat if m.code in CONFIG_ERRORS]
    if cfg:
        return config_errors(cfg)
    return None


def _read_counts(res: TLCResult, flat: list[ToolMessage]) -> None:
    """Fill the generated and distinct states and the depth from the final counts.

    Else from the last progress line, else from the initial states.
    """
    final_counts = any(m.code == FINAL_COUNTS for m in flat)
    for m in flat:
        if m.code == FINAL_COUNTS:
            nums = _INT.findall(m.text)
            if len(nums) >= 2:
                res.generated_states, res.distinct_states = _num(nums[0]), _num(nums[1])
        elif m.code == DEPTH:
            nums = _INT.findall(m.text)
            if nums:
                res.depth = _num(nums[-1])
        elif m.code == PROGRESS and not final_counts:
            # "Progress(d) at T: G states generated (r s/min), D distinct states found (...)"
            gen = re.search(r"([\d,]+) states generated", m.text)
            dis = re.search(r"([\d,]+) distinct states found", m.text)
            if gen and dis:
                res.generated_states, res.distinct_states = _num(gen.group(1)), _num(dis.group(1))
        elif m.code == INIT_STATES and not res.distinct_states:
            nums = _INT.findall(m.text.split("generated")[0])
            if nums:
                res.distinct_states = _num(nums[0])


def _decide(res: TLCResult, top: list[ToolMessage], flat: list[ToolMessage], codes: set[int]) -> None:
    """Set the status, message and violated property from the messages TLC printed."""
    if codes & {INVARIANT_VIOLATED, INVARIANT_VIOLATED_INITIAL}:
        res.status = "violation"
        m = next(x for x in flat if x.code in (INVARIANT_VIOLATED, INVARIANT_VIOLATED_INITIAL))
        head, _, body = m.text.strip("\n").partition("\n")
        name = re.search(r"Invariant (\S+) is violated", m.text)
        res.violated = name.group(1) if name else None
        if m.code == INVARIANT_VIOLATED_INITIAL:
            # "Invariant I is violated by the initial state:" followed by that state.
            res.message = clean_text(head)
            if not res.trace and body.strip():
                res.trace.append(TraceState(1, "Initial predicate", parse_state(body)))
            # TLC prints no counts here; at least the violating initial state was found.
            res.distinct_states = max(res.distinct_states, len(res.trace))
        else:
            res.message = clean_text(m.text)
    elif codes & set(TEMPORAL_VIOLATED):
        res.status = "violation"
        m = next(x for x in flat if x.code in TEMPORAL_VIOLATED)
        res.message = clean_text(m.text)
        res.violated = "temporal property"
    elif DEADLOCK in codes:
        res.status = "deadlock"
        res.message = "deadlock reached"
    elif GENERAL_ERROR in codes or NESTED_POSITIONS in codes or any(m.klass == 1 for m in top):
        res.status = "error"
        errs = [m for m in top if m.klass == 1 and m.code not in (TRACE_FOLLOWS,)]
        parts = []
        for m in errs:
            parts.append(clean_text(m.text + " " + " ".join(c.text for c in m.children)))
        res.message = " | ".join(parts)[:2000]
    elif NO_ERROR in codes:
        if res.distinct_states > 0:
            res.status = "ok"
            res.message = "no error has been found"
        else:
            res.status = "inconclusive"
            res.message = "TLC reported no error but found zero distinct states"
    else:
        res.status = "inconclusive"
        res.message = f"TLC gave no verdict (exit code {res.exit_code})"


def _trace_state(m: ToolMessage, default_number: int, next_number: int | None = None) -> TraceState:
    text = m.text.strip("\n")
    head = _TRACE_HEAD.match(text)
    if m.code == STUTTERING or (head and head.group(2) == "Stuttering"):
        num = int(head.group(1)) if head else default_number
        return TraceState(num, "Stuttering", {}, stuttering=True)
    if m.code == BACK_TO_STATE or (head and head.group(2).startswith("Back to state")):
        # TLC 2.15: "N: Back to state: <Action ...>" -- N is the state the lasso returns to.
        back = re.match(r"\s*(\d+):\s*Back to state:?\s*(<.*?>)?", text)
        target = int(back.group(1)) if back else None
        action = "Back to state"
        if back and back.group(2):
            action = back.group(2)[1:-1].split(" line ")[0]
        return TraceState(next_number if next_number is not None else default_number, action, {},
                          back_to=target)
    if head is None:
        return TraceState(default_number, "", parse_state(text))
    body = text[head.end():]
    action = head.group(2)[1:-1] if head.group(2).startswith("<") else head.group(2)
    if action != "Initial predicate":
        action = action.split(" line ")[0]  # "Next line 5, col 9 to ... of module T" -> "Next"
    return TraceState(int(head.group(1)), action, parse_state(body))
