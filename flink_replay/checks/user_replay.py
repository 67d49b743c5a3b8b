"""Replay a recorded run of a user's own PyFlink job (``rollcheck flink record job --module``).

rollcheck knows nothing of the user's job but its contract: the input (``records(seed)``), the
output rows and ``KEY``, the fields that identify a row of the final output table. The recorder
runs the job twice in one JVM, failure-free (the reference) and with the injected failure, and puts
rollcheck's keyed tap after the job: keyed by ``KEY``, it numbers the rows of each key (keyed
state, restored with the checkpoint), and a transactional ``FileSink`` commits them.

The checks (:data:`JOB_CHECKS`): ``failure-observed``, ``restore-latest-completed``, the state
checks of :mod:`rollcheck.flink_replay.checks.rescale`, ``output-exactly-once``, the oracles of
:mod:`rollcheck.flink_replay.checks.oracles`, and ``user-sink-exactly-once`` (or
``user-sink-at-least-once``) for the module's own sink. See
docs/internals/flink-checks.md#user_replay for what each demands.

References
----------
Carbone et al., "Lightweight Asynchronous Snapshots for Distributed Dataflows", §4 (exactly-once
through snapshots and restore); Apache Flink documentation, "Fault Tolerance Guarantees of Data
Sources and Sinks".
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.checks.oracles import (
    BATCH,
    RECOVERY,
    RELEASE,
    batch_check,
    recovery_check,
    release_check,
    second_failure_problem,
)
from rollcheck.flink_replay.checks.rescale import KEYED, OPERATOR, USER, rescale_checks
from rollcheck.flink_replay.checks.restores import restore_latest_completed
from rollcheck.flink_replay.checks.strike import (
    CHANNELS,
    STRUCK,
    channel_check,
    strike_checks_for,
    struck_check,
)
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import loads_json, safe_name
from rollcheck.pyimpl.verdict import Check, Report, Status

__all__ = ["replay_job", "word_count_report", "JOB_CHECKS", "job_check", "job_checks", "failure_check", "restore_check", "output_check", "parse_rows",
           "user_sink_check", "sink_redeliveries", "declared_guarantee", "GUARANTEES_DOC"]

SEP = "\x1f"


def failure_check(events: list[dict[str, Any]], header: dict[str, Any] | None = None) -> Check:
    """``failure-observed``: the failure event and restores in a later attempt.

    For ``during-restore`` and ``twice`` also the second failure, where it was meant to strike
    (:func:`rollcheck.flink_replay.checks.oracles.second_failure_problem`).

    Parameters
    ----------
    events : list of dict
        The trace's events.
    header : dict, optional
        The trace's header (its ``config.failure`` names the failure kind).
    """
    name = "failure-observed"
    failure = next((e for e in events if e["kind"] == "failure"), None)
    kind = ((header or {}).get("config") or {}).get("failure")
    second = next((e for e in events if e["kind"] in ("failure", "flink.failure_during_restore")
                   and e.get("second")), None)
    if kind in ("during-restore", "twice") and failure is not None:
        if second is None:
            return Check.unchecked(name, f"--failure {kind}: the second failure never struck (the input ended first)")
        problem = second_failure_problem(events)
        if problem is not None:
            return Check.unchecked(name, f"--failure {kind}: the kill point is not proven: {problem}")
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    if failure is None:
        return Check.unchecked(name, "no failure event: nothing about recovery can be checked")
    if not restores:
        return Check.unchecked(name, f"a failure was recorded (seq {failure['seq']}) but the job never restored")
    if failure.get("failure") == "taskmanager" and not any(e["kind"] == "flink.taskmanager_lost" for e in events):
        return Check.unchecked(name, "a TaskManager kill was recorded but the JobManager never reported it lost")
    what = "TaskManager process killed" if failure.get("failure") == "taskmanager" else "task failure"
    then = ""
    if second is not None:
        then = (f", then a second task failure {second.get('phase')} (attempt {second.get('in_attempt')}) at seq "
                f"{second['seq']}")
    record = f"record {failure.get('record')}"
    if failure.get("source") is not None:  # a job with several input streams: which one's record
        record += f": {failure['source']} record {failure.get('source_record')}"
    return Check.held(name, f"{what} at seq {failure['seq']} ({record}){then}, "
                      f"{len(restores)} operator restores after it", examined=1)


def restore_check(events: list[dict[str, Any]]) -> Check:
    """``restore-latest-completed`` of every restoring attempt.

    See :func:`rollcheck.flink_replay.checks.restores.restore_latest_completed`.
    """
    return restore_latest_completed(events, no_failure="not-applicable")


def parse_rows(lines: list[str], where: str) -> dict[str, list[tuple[int, str]]]:
    """``N<US>KEY<US>ROW`` lines -> {KEY: [(N, ROW), ...]} in the order given.

    Parameters
    ----------
    lines : list of str
        The output's lines.
    where : str
        The output named in the error.
    """
    out: dict[str, list[tuple[int, str]]] = {}
    for i, line in enumerate(lines):
        parts = line.split(SEP)
        if len(parts) != 3 or not parts[0].isdigit():
            raise InvalidInputError(f"{where} line {i} is not N<US>KEY<US>ROW: {line[:80]!r}")
        out.setdefault(parts[1], []).append((int(parts[0]), parts[2]))
    return out


def _show(key: str, row: str) -> str:
    return f"KEY {key} row {row}"


def output_check(outputs: dict[str, dict[str, Any]], ended: bool, why: str | None = None) -> Check:
    """``output-exactly-once`` on the transactional sink's rows against the reference run.

    Parameters
    ----------
    outputs : dict
        The ``flink.sink_output`` events by ``sink`` (``tx`` and ``reference`` are read).
    ended : bool
        Whether the job finished its input (the outputs are complete).
    why : str, optional
        Flink's reason when the job did not finish.
    """
    name = "output-exactly-once"
    tx, ref = outputs.get("tx"), outputs.get("reference")
    if tx is None or ref is None or not ended:
        return Check.unchecked(name, "no complete committed and reference output (the run was cut short or the "
                               "job did not finish" + (f"; Flink: {why}" if why else "") + ")")
    got = parse_rows(tx["lines"], f"the committed output (seq {tx.get('seq')})")
    want = parse_rows(ref["lines"], f"the reference output (seq {ref.get('seq')})")
    if not want:
        return Check.unchecked(name, "the failure-free run produced no output: nothing to compare")
    rows = 0
    for key in sorted(set(got) | set(want)):
        g = got.get(key, [])
        w = sorted(want.get(key, []))
        n = Counter(x for x, _ in g)
        dup = sorted(x for x, c in n.items() if c > 1)
        if dup:
            row = next(r for x, r in g if x == dup[0])
            return Check.violated(name, f"row {dup[0]} of {_show(key, row)} committed {n[dup[0]]} times "
                                  f"(duplicated output)", offending_seq=tx["seq"], examined=rows)
        if len(w) != len(g) or (w and max(n) != w[-1][0]):
            missing = [x for x, _ in w if x not in n]
            if missing:
                row = next(r for x, r in w if x == missing[0])
                return Check.violated(name, f"{_show(key, row)} (row {missing[0]} of the key) never committed: "
                                      f"{len(g)} rows, the failure-free run has {len(w)} (lost output)",
                                      offending_seq=tx["seq"], examined=rows)
            extra = sorted(set(n) - {x for x, _ in w})
            row = next(r for x, r in g if x == extra[0])
            return Check.violated(name, f"{_show(key, row)} (row {extra[0]}) is not in the failure-free output "
                                  f"({len(w)} rows for the key)", offending_seq=tx["seq"], examined=rows)
        if w:
            last = max(g)[1]
            # row text from the trace: a bounded parse, naming the row
            if (loads_json(last, f"the final committed row of KEY {safe_name(key)}")
                    != loads_json(w[-1][1], f"the failure-free run's final row of KEY {safe_name(key)}")):
                return Check.violated(name, f"KEY {key}: final row {last}, the failure-free run ends with {w[-1][1]}",
                                      offending_seq=tx["seq"], examined=rows)
        rows += len(g)
    return Check.held(name, f"{rows} committed rows over {len(want)} keys: each once, final rows = the "
                      "failure-free run's", examined=rows)


#: Flink's documentation of a sink that does not take part in checkpointing (cited by the matrix).
GUARANTEES_DOC = ("Apache Flink documentation, \"Fault Tolerance Guarantees of Data Sources and Sinks\" "
                  "(docs/connectors/datastream/guarantees/): end-to-end exactly-once needs a sink that "
                  "takes part in checkpointing; any other sink gives at-least-once (duplicates after a restore)")


def declared_guarantee(path: str | Path) -> str:
    r"""The ``SINK_GUARANTEE`` a job module declares, read from its source before Flink starts.

    The declaration is a top-level ``SINK_GUARANTEE = "exactly-once" | "at-least-once"``
    (absent: exactly-once); ``"at-least-once"`` needs the module's own ``sink``.

    Raises
    ------
    InvalidInputError
        Naming ``SINK_GUARANTEE`` and the file: not one of the two strings, or at-least-once
        without a ``sink``.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); f = os.path.join(d, "j.py")
    >>> _ = open(f, "w").write('SINK_GUARANTEE = "at-least-once"\ndef sink(stream, out_dir):\n    pass\n')
    >>> declared_guarantee(f)
    'at-least-once'
    """
    import ast

    from rollcheck.pyimpl.attribution import check_guarantee

    src = Path(path)
    try:
        tree = ast.parse(src.read_text(encoding="utf-8"), filename=str(src))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return "exactly-once"  # the job process reports an unreadable module as the import's failure
    value: Any = None
    has_sink = False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SINK_GUARANTEE"
                                                for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise InvalidInputError("SINK_GUARANTEE must be the string \"exactly-once\" or \"at-least-once\" "
                                        "(a literal)", source=str(src), location="SINK_GUARANTEE") from None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "sink":
            has_sink = True
    try:
        guarantee = check_guarantee(value)
    except ValueError as e:
        raise InvalidInputError(str(e), source=str(src), location="SINK_GUARANTEE") from None
    if guarantee != "exactly-once" and not has_sink:
        raise InvalidInputError("SINK_GUARANTEE is about the module's own sink, and it has none (rollcheck's "
                                "transactional output is exactly-once)", source=str(src), location="SINK_GUARANTEE")
    return guarantee


def sink_redeliveries(outputs: dict[str, dict[str, Any]], events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per KEY, the rows the engine handed the module's sink again since the restored checkpoint.

    The recorder logs the KEY of every row handed to the module's sink (``flink.sink_output``
    ``sink: "handed"`` per generation: 0 before the injected failure, 1 after it, and
    ``"handed-reference"`` for the failure-free run). The restored checkpoint holds, per KEY, how many
    output rows had passed by then (rollcheck's keyed tap, ``flink.restore`` ``keys``): rows of
    generation 0 beyond that count are handed again after the restore (``redelivered``). Rows handed
    after the restore beyond what the failure-free run has left for the KEY are not explained by a
    re-delivery (``within_attempt``). None when the trace has no handing log. The count is exact with
    aligned checkpoints and lenient by the rows in flight with unaligned ones
    (docs/internals/flink-checks.md#user_replay).

    Parameters
    ----------
    outputs : dict
        The ``flink.sink_output`` events by ``sink``.
    events : list of dict
        The trace's events (the failure and the restores).

    Returns
    -------
    dict or None
        ``redelivered`` and ``within_attempt``, rows per KEY.

    Examples
    --------
    >>> outs = {"handed-reference": {"lines": ['["a"]'] * 3},
    ...         "handed-0": {"lines": ['["a"]'] * 2}, "handed-1": {"lines": ['["a"]'] * 2}}
    >>> ev = [{"kind": "failure", "seq": 5},
    ...       {"kind": "flink.restore", "task": "keyed", "attempt": 1, "keys": {'["a"]': 1}, "seq": 6}]
    >>> r = sink_redeliveries(outs, ev); r["redelivered"], r["within_attempt"]
    ({'["a"]': 1}, {})
    """
    ref = outputs.get("handed-reference")
    if ref is None:
        return None
    g0 = Counter(str(x) for x in (outputs.get("handed-0") or {}).get("lines", []))
    g1 = Counter(str(x) for x in (outputs.get("handed-1") or {}).get("lines", []))
    want = Counter(str(x) for x in ref.get("lines", []))
    failure = next((e for e in events if e["kind"] == "failure"), None)
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("task") == "keyed"
                and e.get("attempt", 0) > 0]
    restored: Counter[str] = Counter()
    if restores:
        first = min(e["attempt"] for e in restores)
        for e in restores:
            if e["attempt"] == first:
                restored.update({str(k): int(v) for k, v in (e.get("keys") or {}).items()})
    redelivered: dict[str, int] = {}
    within: dict[str, int] = {}
    for k in sorted(set(g0) | set(g1) | set(want)):
        if failure is not None and restores:
            again = g0[k] - restored[k]
            if again > 0:
                redelivered[k] = again
            over = g1[k] - max(0, want[k] - restored[k])
        else:
            over = g0[k] + g1[k] - want[k]
        over = max(over, g0[k] - want[k])
        if over > 0:
            within[k] = over
    return {"redelivered": redelivered, "within_attempt": within, "handed_keys": set(g0) | set(g1)}


def user_sink_check(outputs: dict[str, dict[str, Any]], key_idx: list[int], ended: bool,
                    header: dict[str, Any] | None = None, events: list[dict[str, Any]] | None = None) -> Check:
    """The module's own sink against its failure-free run, judged against its ``SINK_GUARANTEE``.

    The guarantee is ``header["sink_guarantee"]``: ``user-sink-exactly-once`` or
    ``user-sink-at-least-once``, per KEY (:func:`~rollcheck.pyimpl.attribution.judge_sink`),
    re-deliveries from :func:`sink_redeliveries`; the counts are the check's data.

    Parameters
    ----------
    outputs : dict
        The ``flink.sink_output`` events by ``sink`` (``user``, ``user-reference``, ``handed-*``).
    key_idx : list of int
        The positions of the KEY columns in a row.
    ended : bool
        Whether the job finished its input.
    header : dict, optional
        The trace's header.
    events : list of dict, optional
        The trace's events (for the re-deliveries).
    """
    from rollcheck.pyimpl.attribution import check_guarantee, judge_sink

    try:
        guarantee = check_guarantee((header or {}).get("sink_guarantee"))
    except ValueError as e:
        raise InvalidInputError(f"header sink_guarantee: {e}", location="line 1") from None
    name = f"user-sink-{guarantee}"
    user, ref = outputs.get("user"), outputs.get("user-reference")
    if user is None and ref is None:
        return Check.not_applicable(name, "the job module has no sink of its own")
    if user is None or ref is None or not ended:
        return Check.unchecked(name, "the module's sink output of one of the runs is missing")

    def per_key(rows: list[list[Any]]) -> dict[str, Counter[str]]:
        # rows of a KEY are counted, not compared by value: in a parallel job the values between
        # the first and the last row of a KEY (running totals) depend on the order records arrive
        out: dict[str, Counter[str]] = {}
        for r in rows:
            k = json.dumps([r[i] for i in key_idx], default=str)
            out.setdefault(k, Counter())[k] += 1
        return out

    h = sink_redeliveries(outputs, events or [])
    j = judge_sink(guarantee, per_key(ref["lines"]), per_key(user["lines"]),
                   redelivered=None if h is None else h["redelivered"],
                   within_attempt=None if h is None else h["within_attempt"],
                   handed_keys=None if h is None else h["handed_keys"], documentation=GUARANTEES_DOC)
    n = sum(len(r) for r in [user["lines"]])
    if j["ok"]:
        return Check.held(name, f"{n} rows of the module's sink: {j['detail']}", examined=max(1, n), **j["data"])
    return Check.violated(name, j["detail"], offending_seq=user["seq"], **j["data"])


#: The checks of a user's job trace, in reporting order (the last, the module's own sink, is named
#: by its ``SINK_GUARANTEE``: ``user-sink-exactly-once`` or ``user-sink-at-least-once``).
JOB_CHECKS = ("failure-observed", "restore-latest-completed", KEYED, OPERATOR, USER, "output-exactly-once", RECOVERY,
              BATCH, RELEASE, "user-sink")


def job_check(name: str, header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """The one check ``name`` of :data:`JOB_CHECKS` on a user's job trace, computed alone.

    An error in the events one check reads is reported under that check's name, not another's.

    Parameters
    ----------
    name : str
        The check's name.
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.

    Raises
    ------
    ValueError
        ``name`` is not a check of a user's job trace.
    """
    if name == "failure-observed":
        return failure_check(events, header)
    if name == "restore-latest-completed":
        return restore_check(events)
    if name in (KEYED, OPERATOR, USER):
        keyed, operator, user = rescale_checks(header, events)
        if keyed.status is Status.UNCHECKED and "held no keyed state" in keyed.detail and user.status is Status.HELD:
            # no output row had passed rollcheck's tap by the restored checkpoint (a window that
            # had not fired yet): the tap's state was empty in the checkpoint and after the restore,
            # and the keyed state that did exist, the job's own, was compared key by key
            keyed = Check.not_applicable(KEYED, f"{keyed.detail} (no output row had passed rollcheck's tap by "
                                         f"then); the job's own keyed state was compared key by key ({USER})")
        return {KEYED: keyed, OPERATOR: operator, USER: user}[name]
    outputs = {e["sink"]: e for e in events if e["kind"] == "flink.sink_output"}
    # the outputs are only complete when the (last) job finished its input
    ended = bool(events) and events[-1]["kind"] == "end" and \
        (header.get("flink") or {}).get("final_state", "FINISHED") == "FINISHED"
    if name == "output-exactly-once":
        return output_check(outputs, ended, (header.get("flink") or {}).get("failure_cause"))
    if name == RECOVERY:  # an oracle that does not trust the failure-free run (flink_replay.checks.oracles)
        return recovery_check(header, events)
    if name == BATCH:
        return batch_check(header, events)
    if name == RELEASE:
        return release_check(header, events)
    if name in (STRUCK, CHANNELS):  # asked for by the recording's config (strike.py)
        return struck_check(header, events) if name == STRUCK else channel_check(header, events)
    if name == "user-sink" or name.startswith("user-sink-"):
        return user_sink_check(outputs, header.get("key") or [], ended, header, events)
    raise ValueError(f"no check {name!r} of a user's job trace (one of {', '.join(JOB_CHECKS)})")


def job_checks(header: dict[str, Any], events: list[dict[str, Any]]) -> list[Check]:
    """Every check on a user's job trace (see the module docstring), in :data:`JOB_CHECKS` order.

    Parameters
    ----------
    header, events
        The trace's header and events (as :func:`job_check`).
    """
    return [job_check(name, header, events) for name in JOB_CHECKS]


def replay_job(path: str | Path) -> Report:
    """Replay a user's job trace through the shared trace checker.

    Its generic checks run on the core events (``pattern-valid``, ``recovery-line``, ...) and
    :func:`job_checks` as plug-ins.

    Parameters
    ----------
    path : str or Path
        The trace file.

    Returns
    -------
    Report
        Every check's verdict.

    Raises
    ------
    InvalidInputError
        Not a Flink trace of a user's job, or a malformed line.
    """
    from rollcheck.flink_replay.checks.replay import FlinkCheck, FlinkEvents, check_flink_header
    from rollcheck.pyimpl.traces.api import check_trace_lines
    from rollcheck.pyimpl.traces.reader import TraceLines

    class JobEvents(FlinkEvents):
        """Flink's collector, also keeping the ``end`` event (the outputs are complete only then)."""

        def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
            if obj.get("kind") == "end":
                self.events.append(obj)
            else:
                super().on_event(v, line, obj)

    lines = TraceLines(path)
    header = lines.header
    check_flink_header(header, str(path))
    if header.get("job") != "module":
        raise InvalidInputError("not a trace of a user's Flink job (header \"job\" is not \"module\")",
                                source=str(path), location="line 1")
    col = JobEvents()
    from rollcheck.pyimpl.attribution import check_guarantee

    try:
        sink_name = f"user-sink-{check_guarantee(header.get('sink_guarantee'))}"
    except ValueError as e:
        raise InvalidInputError(f"header sink_guarantee: {e}", source=str(path), location="line 1") from None
    names = [*JOB_CHECKS[:-1], *strike_checks_for(header), sink_name]

    def pick(name: str) -> Any:  # each plug-in computes its own check only (and errors carry its name)
        return lambda h, ev: job_check(name, h, ev)

    report, _ = check_trace_lines(lines, extra=[col, *(FlinkCheck(n, header, col, pick(n)) for n in names)])
    report.extra["module"] = header.get("module")
    return report


def word_count_report(path: str | Path, *, tlc: Any = None) -> Report:
    """The word count's replay: the shared trace checker with Flink's plug-ins.

    The key-by-key restore checks are among them (:func:`rollcheck.flink_replay.checks.replay.replay`).

    Parameters
    ----------
    path : str or Path
        The word count's trace.
    tlc : callable, optional
        Runs TLC on the trace (the ``barrier-alignment-tlc`` check); None: not run.
    """
    from rollcheck.flink_replay.checks.replay import replay

    return replay(path, tlc=tlc)
