"""TLC's ``-tool`` output: its message codes and framing, parsed into nested messages.

In ``-tool`` mode every message is framed as ``@!@!@STARTMSG code:class @!@!@`` … ``@!@!@ENDMSG
code @!@!@``. Messages nest (an exception message embeds another message) and a marker may start
in the middle of a line, so :func:`parse_tool_output` tokenises the text on the markers and
matches them with a stack. What the messages mean for a run is
:func:`rollcheck.tla.tlc_interpret.interpret`'s.

References
----------
TLC's message codes: ``tlc2.output.EC`` and ``tlc2.output.MP`` in tla2tools 2.15.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "ANY_MARK", "BACK_TO_STATE", "CONFIG_ERRORS", "DEADLOCK", "DEPTH", "FINAL_COUNTS", "GENERAL_ERROR",
    "INIT_STATES", "INVARIANT_VIOLATED", "INVARIANT_VIOLATED_INITIAL", "NESTED_POSITIONS", "NO_ERROR",
    "PARSE_FAILED", "PROGRESS", "SANY_END", "SANY_START", "STUTTERING", "TEMPORAL_VIOLATED", "TRACE_FOLLOWS",
    "TRACE_STATE", "ToolMessage", "clean_text", "flat_messages", "parse_tool_output",
]

# Message codes (tlc2.output.EC) that decide the verdict.
NO_ERROR = 2193
INVARIANT_VIOLATED = 2110
INVARIANT_VIOLATED_INITIAL = 2107
DEADLOCK = 2114
TEMPORAL_VIOLATED = (2116, 2264)
TRACE_FOLLOWS = 2121
TRACE_STATE = 2217
STUTTERING = 2218
BACK_TO_STATE = 2122
FINAL_COUNTS = 2199
DEPTH = 2194
SANY_START = 2220
SANY_END = 2219
PARSE_FAILED = 3002
GENERAL_ERROR = 1000
NESTED_POSITIONS = 2103
CONFIG_ERRORS = frozenset({2222, 2223, 2224, 2225, 2226, 2227, 2228, 2229, 2230, 2231, 2232, 2233,
                           2234, 2235, *range(5001, 5100)})
INIT_STATES = 2190
PROGRESS = 2200

_MARK = re.compile(r"@!@!@(STARTMSG (\d+):(\d+)|ENDMSG (\d+)) @!@!@\n?")
ANY_MARK = re.compile(r"@!@!@(?:STARTMSG \d+:\d+|ENDMSG \d+) @!@!@\n?")


@dataclass
class ToolMessage:
    """One ``-tool`` message: its code, its class and its text.

    The class is 0 info, 1 error, 2 trace, 3 warning or 4 state; nested messages are removed
    from the text (they are in ``children``).
    """

    code: int
    klass: int
    text: str = ""
    children: list[ToolMessage] = field(default_factory=list)


def parse_tool_output(text: str) -> tuple[list[ToolMessage], str]:
    r"""Split ``-tool`` output into its top-level messages, and the text outside any message.

    Nested messages become ``children`` of the enclosing one. Unbalanced markers (a truncated
    output) close what is open at the end.

    Examples
    --------
    >>> out = ("@!@!@STARTMSG 1000:1 @!@!@\nouter: @!@!@STARTMSG 2154:0 @!@!@\ninner\n"
    ...        "@!@!@ENDMSG 2154 @!@!@\n@!@!@ENDMSG 1000 @!@!@\nloose\n")
    >>> msgs, loose = parse_tool_output(out)
    >>> msgs[0].code, msgs[0].text, msgs[0].children[0].code, msgs[0].children[0].text, loose
    (1000, 'outer: ', 2154, 'inner\n', 'loose\n')
    """
    top: list[ToolMessage] = []
    loose: list[str] = []
    stack: list[tuple[ToolMessage, list[str]]] = []
    pos = 0
    for m in _MARK.finditer(text):
        chunk = text[pos : m.start()]
        (stack[-1][1] if stack else loose).append(chunk)
        pos = m.end()
        if m.group(2) is not None:
            stack.append((ToolMessage(int(m.group(2)), int(m.group(3))), []))
        else:
            code = int(m.group(4))
            # Close up to the matching start (tolerate a missing END of a nested message).
            while stack:
                msg, buf = stack.pop()
                msg.text = "".join(buf)
                (stack[-1][0].children if stack else top).append(msg)
                if msg.code == code:
                    break
    (stack[-1][1] if stack else loose).append(text[pos:])
    while stack:
        msg, buf = stack.pop()
        msg.text = "".join(buf)
        (stack[-1][0].children if stack else top).append(msg)
    return top, "".join(loose)


def flat_messages(msgs: list[ToolMessage]) -> list[ToolMessage]:
    """``msgs`` and every message nested in them, in document order."""
    out: list[ToolMessage] = []
    for m in msgs:
        out.append(m)
        out.extend(flat_messages(m.children))
    return out


def clean_text(text: str) -> str:
    r"""``text`` on one line, with any ``-tool`` markers removed.

    Examples
    --------
    >>> clean_text("@!@!@STARTMSG 2220:0 @!@!@\nStarting SANY...\n@!@!@ENDMSG 2220 @!@!@\n  x")
    'Starting SANY... x'
    """
    return " ".join(ANY_MARK.sub(" ", text).split())
