"""Replay a recorded run of a user's own PyFlink job (``rollcheck flink record job --module``).

rollcheck knows nothing of the user's job but its contract: the input (``records(seed)``), the
output rows and ``KEY``, the fields that identify a row of the final output table. The recorder
runs the job twice in one JVM — failure-free (the reference) and with the injected failure — and
puts rollcheck's keyed tap after the job: keyed by ``KEY``, it numbers the rows of each key (keyed
state, restored with the checkpoint), and a transactional ``FileSink`` commits them. The checks:

``failure-observed``
    the injected failure happened and the job restored (a TaskManager kill also reported by the
    JobManager); otherwise the replay is inconclusive.
``restore-latest-completed``
    every task restored the same checkpoint, the latest completed before the restore (and not
    older than any completed before the failure).
``keyed-state-restored-once``, ``operator-state-restored``, ``user-state-restored-once``
    :mod:`rollcheck.flink_replay.rescale_checks` (rescaled restores included): rollcheck's keyed
    tap, the source's operator state, and the keyed state of the user's own operators, key by key.
``output-exactly-once``
    per KEY, the committed rows are numbered 1..n without a duplicate or a gap, n is the number of
    rows the reference run produced for the key, and the last row equals the reference's last row.
``user-sink-exactly-once``
    with the module's own ``sink``/``read_output``: per KEY, as many rows as in the reference run
    (a duplicate or a lost row otherwise).

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

from rollcheck.flink_replay.rescale_checks import KEYED, OPERATOR, USER, rescale_checks
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.verdict import Check, Report, Status

__all__ = ["replay_job", "word_count_report", "job_checks", "failure_check", "restore_check", "output_check", "parse_rows"]

SEP = "\x1f"


def failure_check(events: list[dict[str, Any]]) -> Check:
    """``failure-observed``: the failure event and restores in a later attempt."""
    name = "failure-observed"
    failure = next((e for e in events if e["kind"] == "failure"), None)
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    if failure is None:
        return Check.unchecked(name, "no failure event: nothing about recovery can be checked")
    if not restores:
        return Check.unchecked(name, f"a failure was recorded (seq {failure['seq']}) but the job never restored")
    if failure.get("failure") == "taskmanager" and not any(e["kind"] == "flink.taskmanager_lost" for e in events):
        return Check.unchecked(name, "a TaskManager kill was recorded but the JobManager never reported it lost")
    what = "TaskManager process killed" if failure.get("failure") == "taskmanager" else "task failure"
    return Check.held(name, f"{what} at seq {failure['seq']} (record {failure.get('record')}), "
                      f"{len(restores)} operator restores after it", examined=1)


def restore_check(events: list[dict[str, Any]]) -> Check:
    """``restore-latest-completed`` (see the module docstring)."""
    name = "restore-latest-completed"
    failure = next((e for e in events if e["kind"] == "failure"), None)
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    if failure is None:
        return Check.not_applicable(name, "no failure in the run")
    if not restores:
        return Check.unchecked(name, "no restore after the failure")
    first = min(restores, key=lambda e: e["seq"])
    ids = {e["checkpoint"] for e in restores if e["attempt"] == first["attempt"]}
    if len(ids) != 1:
        return Check.violated(name, f"tasks restored different checkpoints {sorted(map(str, ids))}",
                              offending_seq=first["seq"])
    rid = ids.pop()
    restart = next((e for e in events if e["kind"] == "flink.job_state" and e["state"] == "RESTARTING"), None)
    limit = restart["seq"] if restart is not None else first["seq"]
    completed = [e for e in events if e["kind"] == "flink.checkpoint_completed"]
    before_restart = [e["checkpoint"] for e in completed if e["seq"] < limit]
    before_failure = [e["checkpoint"] for e in completed if e["seq"] < failure["seq"]]
    latest = max(before_restart) if before_restart else None
    if rid != latest or (before_failure and (rid is None or rid < max(before_failure))):
        return Check.violated(name, f"restored checkpoint {rid}, but the latest completed before the restore was "
                              f"{latest} (before the failure: {max(before_failure) if before_failure else None})",
                              offending_seq=first["seq"])
    return Check.held(name, f"restored checkpoint {rid} = latest completed before the restore "
                      f"({len(before_restart)} completed)", examined=1)


def parse_rows(lines: list[str], where: str) -> dict[str, list[tuple[int, str]]]:
    """``N<US>KEY<US>ROW`` lines -> {KEY: [(N, ROW), ...]} in the order given."""
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
    """``output-exactly-once`` on the transactional sink's rows against the reference run (``why``:
    Flink's reason when the job did not finish)."""
    name = "output-exactly-once"
    tx, ref = outputs.get("tx"), outputs.get("reference")
    if tx is None or ref is None or not ended:
        return Check.unchecked(name, "no complete committed and reference output (the run was cut short or the "
                               "job did not finish" + (f"; Flink: {why}" if why else "") + ")")
    got = parse_rows(tx["lines"], "tx output")
    want = parse_rows(ref["lines"], "reference output")
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
            if json.loads(last) != json.loads(w[-1][1]):
                return Check.violated(name, f"KEY {key}: final row {last}, the failure-free run ends with {w[-1][1]}",
                                      offending_seq=tx["seq"], examined=rows)
        rows += len(g)
    return Check.held(name, f"{rows} committed rows over {len(want)} keys: each once, final rows = the "
                      "failure-free run's", examined=rows)


def user_sink_check(outputs: dict[str, dict[str, Any]], key_idx: list[int], ended: bool) -> Check:
    """``user-sink-exactly-once``: the module's own sink against its failure-free run."""
    name = "user-sink-exactly-once"
    user, ref = outputs.get("user"), outputs.get("user-reference")
    if user is None and ref is None:
        return Check.not_applicable(name, "the job module has no sink of its own")
    if user is None or ref is None or not ended:
        return Check.unchecked(name, "the module's sink output of one of the runs is missing")

    def per_key(rows: list[list[Any]]) -> Counter[str]:
        return Counter(json.dumps([r[i] for i in key_idx], default=str) for r in rows)

    got, want = per_key(user["lines"]), per_key(ref["lines"])
    for key in sorted(set(got) | set(want)):
        if got[key] != want[key]:
            what = "duplicated" if got[key] > want[key] else "lost"
            return Check.violated(name, f"KEY {key}: the module's sink wrote {got[key]} rows, {want[key]} without "
                                  f"the failure ({what} output)", offending_seq=user["seq"])
    return Check.held(name, f"{sum(got.values())} rows of the module's sink, per KEY as many as without the failure",
                      examined=max(1, sum(got.values())))


def job_checks(header: dict[str, Any], events: list[dict[str, Any]]) -> list[Check]:
    """Every check on a user's job trace (see the module docstring)."""
    outputs = {e["sink"]: e for e in events if e["kind"] == "flink.sink_output"}
    # the outputs are only complete when the (last) job finished its input
    ended = bool(events) and events[-1]["kind"] == "end" and \
        (header.get("flink") or {}).get("final_state", "FINISHED") == "FINISHED"
    key_idx = header.get("key") or []
    fo = failure_check(events)
    keyed, operator, user = rescale_checks(header, events)
    if keyed.status is Status.UNCHECKED and "held no keyed state" in keyed.detail and user.status is Status.HELD:
        # no output row had passed rollcheck's tap by the restored checkpoint (a window that had not
        # fired yet): the tap's state was empty in the checkpoint and after the restore, and the
        # keyed state that did exist, the job's own, was compared key by key
        keyed = Check.not_applicable(KEYED, f"{keyed.detail} (no output row had passed rollcheck's tap by then); "
                                     f"the job's own keyed state was compared key by key ({USER})")
    why = (header.get("flink") or {}).get("failure_cause")
    checks = [fo, restore_check(events), keyed, operator, user, output_check(outputs, ended, why),
              user_sink_check(outputs, key_idx, ended)]
    return checks


def replay_job(path: str | Path) -> Report:
    """Replay a user's job trace through the shared trace checker: its generic checks on the core
    events (``pattern-valid``, ``recovery-line``, ...) and :func:`job_checks` as plug-ins.

    Raises
    ------
    InvalidInputError
        Not a Flink trace of a user's job, or a malformed line.
    """
    from rollcheck.flink_replay.replay import FlinkCheck, FlinkEvents, check_flink_header
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
    names = ["failure-observed", "restore-latest-completed", KEYED, OPERATOR, USER, "output-exactly-once",
             "user-sink-exactly-once"]

    def pick(name: str) -> Any:
        return lambda h, ev: next(c for c in job_checks(h, ev) if c.name == name)

    report, _ = check_trace_lines(lines, extra=[col, *(FlinkCheck(n, header, col, pick(n)) for n in names)])
    report.extra["module"] = header.get("module")
    return report


def word_count_report(path: str | Path, *, tlc: Any = None) -> Report:
    """The word count's replay (:func:`rollcheck.flink_replay.replay.replay`: the shared trace
    checker with Flink's plug-ins, the key-by-key restore checks among them)."""
    from rollcheck.flink_replay.replay import replay

    return replay(path, tlc=tlc)
