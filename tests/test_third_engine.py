"""A third engine ("kv", a replicated log writing its own ``kv.*`` kinds) checked by the one trace
checker: an adapter maps its events onto the core vocabulary, a plug-in checks its own promise (a
reload restores the node's newest snapshot). ``docs/your-engine.md`` walks through this file."""

from __future__ import annotations

import json

from rollcheck.pyimpl.traces import TraceCheck, check_trace_file
from rollcheck.pyimpl.traces.adapter import Adapter, derived
from rollcheck.pyimpl.verdict import Check


class KvAdapter(Adapter):
    sources = ("kv",)

    def header(self, header):  # its header names the nodes "replicas"
        return {**header, "processes": header["replicas"]}

    def map_event(self, header, e):
        k = e["kind"]
        if k == "kv.ship":
            return [derived(e, "send", process=e["from"], to=e["to"], message=e["id"])]
        if k == "kv.apply":
            return [derived(e, "deliver", process=e["node"], message=e["id"], replayed=e.get("again", False))]
        if k == "kv.snap":
            return [derived(e, "checkpoint", process=e["node"], index=e["n"], forced=False)]
        if k == "kv.crash":
            return [derived(e, "failure", processes=[e["node"]])]
        if k == "kv.reload":
            return [derived(e, "recovery", line=e["line"], in_transit=e["resend"])]
        if k == "kv.put":
            return [derived(e, "output", process=e["node"], key=e["key"], value=e["value"])]
        return [derived(e, "end")] if k == "kv.stop" else []


class ReloadsNewestSnapshot(TraceCheck):
    """The engine's own promise: a crashed node reloads its newest snapshot."""

    name = "reloads-newest-snapshot"
    needs = ("kv.snap", "kv.crash", "kv.reload")

    def __init__(self):
        self.newest, self.crashed, self.bad, self.reloads = {}, None, None, 0

    def on_event(self, v, line, e):
        if e["kind"] == "kv.snap":
            self.newest[e["node"]] = e["n"]
        elif e["kind"] == "kv.crash":
            self.crashed = e["node"]
        elif e["kind"] == "kv.reload" and self.crashed is not None:
            self.reloads += 1
            got, want = e["line"].get(self.crashed), self.newest.get(self.crashed, 0)
            if got != want and self.bad is None:
                self.bad = (e["seq"], f"{self.crashed} reloaded snapshot {got}, its newest is {want}")

    def finish(self, v, results):
        if self.bad:
            return Check.violated(self.name, self.bad[1], offending_seq=self.bad[0])
        if not self.reloads:
            return Check.not_applicable(self.name, "no reload")
        return Check.held(self.name, f"{self.reloads} reload(s) of the newest snapshot", examined=self.reloads)


HEADER = {"format": "rollcheck.trace/1", "source": "kv", "replicas": ["a", "b"]}
RUN = [{"kind": "kv.snap", "node": "b", "n": 1},
       {"kind": "kv.ship", "from": "a", "to": "b", "id": "w1"},
       {"kind": "kv.apply", "node": "b", "id": "w1"},
       {"kind": "kv.crash", "node": "b"},
       {"kind": "kv.reload", "line": {"b": 1}, "resend": ["w1"]},
       {"kind": "kv.apply", "node": "b", "id": "w1", "again": True},
       {"kind": "kv.put", "node": "b", "key": "x", "value": 1},
       {"kind": "kv.stop"}]


def check(tmp_path, events):
    f = tmp_path / "kv.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [HEADER, *({**e, "seq": k} for k, e in enumerate(events, 1))])
                 + "\n")
    report, _ = check_trace_file(f, adapter=KvAdapter(), extra=[ReloadsNewestSnapshot()],
                                 reference=[{"process": "b", "key": "x", "value": 1}])
    return report


def test_kv_run_is_conformant_through_the_shared_checker(tmp_path):
    r = check(tmp_path, RUN)
    assert r.verdict.value == "conformant", [c.line() for c in r.checks]
    held = {c.name for c in r.checks if c.ok}
    assert {"recovery-line", "log-replay", "outputs-exactly-once", "reloads-newest-snapshot"} <= held


def test_kv_mutants_are_caught_by_the_generic_and_the_engine_check(tmp_path):
    old = [dict(e) for e in RUN]
    old[4] = {"kind": "kv.reload", "line": {"b": 0}, "resend": []}  # an older snapshot, nothing resent
    del old[5]
    r = check(tmp_path, old)
    bad = {c.name: c.offending_seq for c in r.checks if c.ok is False}
    assert bad["reloads-newest-snapshot"] == 5 and bad["recovery-line"] == 5 and r.exit_code == 1
    r = check(tmp_path, RUN[:4])  # the recorder died after the crash: never a pass
    assert r.exit_code == 3 and r.check("recovery-line").status.value == "unchecked"


# ----------------------------------------------------------------------------- the third engine's matrix
# The same engine's chaos matrix is one short adapter of the core (rollcheck.infra.matrix): the toy
# "kv" engine below (pure Python, no JVM) runs a module's records, applies them to a keyed state,
# hands every row to the module's sink, snapshots every N records, and on a crash reloads its newest
# snapshot and hands the rows since then to the sink again (its documented at-least-once delivery).
# The adapter supplies recording, replay and the failure points; the core plans, runs, classifies
# (classify_cell), writes matrix.json and index.html, and decides the exit code (decide()).
from pathlib import Path  # noqa: E402

from rollcheck.infra.matrix import (  # noqa: E402
    EngineAdapter,
    GenericCell,
    Recording,
    Replayed,
    matrix_verdict,
    run_matrix,
)
from rollcheck.pyimpl.attribution import judge_sink  # noqa: E402
from rollcheck.pyimpl.verdict import Report  # noqa: E402

KV_DOC = "kv manual, \"Delivery\": after a crash a node re-sends the rows since its newest snapshot"


def kv_run(module, snap_every, crash_at, path):
    """Run ``module`` on the toy engine and write its trace; the sink is the module's (append)."""
    out, state, snap, attempt, pos, crashed, seq = [], {}, ({}, 0), 1, 0, False, 0
    events = []

    def emit(**e):
        nonlocal seq
        seq += 1
        events.append({"seq": seq, **e})

    records = module["records"]
    while pos < len(records):
        if crash_at is not None and pos == crash_at and not crashed:
            crashed, attempt = True, attempt + 1
            emit(kind="kv.crash", node="n", at=pos)
            state, pos = dict(snap[0]), snap[1]
            emit(kind="kv.reload", node="n", position=pos)
            continue
        k, v = records[pos]
        state[k] = state.get(k, 0) + v
        row = [k, state[k]]
        emit(kind="kv.hand", attempt=attempt, position=pos, row=row)
        module["sink"](out, pos, row)
        pos += 1
        if pos % snap_every == 0:
            snap = (dict(state), pos)
            emit(kind="kv.snap", node="n", position=pos)
    emit(kind="kv.output", rows=out)
    header = {"format": "rollcheck.trace/1", "source": "kv", "replicas": ["n"],
              "guarantee": module.get("SINK_GUARANTEE", "exactly-once")}
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *events]))


def kv_report(path, reference_rows):
    """The toy engine's replay: its own promise (a reload restores the newest snapshot) and the
    user-sink check, re-deliveries after the crash counted from the trace's handings."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    header, events = lines[0], lines[1:]
    snaps = [e["position"] for e in events if e["kind"] == "kv.snap"]
    reloads = [e for e in events if e["kind"] == "kv.reload"]
    checks = []
    if reloads:
        crash_seq = next(e["seq"] for e in events if e["kind"] == "kv.crash")
        newest = max([e["position"] for e in events if e["kind"] == "kv.snap" and e["seq"] < crash_seq] or [0])
        got = reloads[0]["position"]
        checks.append(Check.held("reloads-newest-snapshot", f"reloaded {got}", examined=1) if got == newest else
                      Check.violated("reloads-newest-snapshot", f"reloaded {got}, newest {newest}",
                                     offending_seq=reloads[0]["seq"]))
    else:
        checks.append(Check.not_applicable("reloads-newest-snapshot", f"no crash ({len(snaps)} snapshots)"))

    def per_key(rows):
        d = {}
        for k, v in rows:
            d.setdefault(k, {}).setdefault(json.dumps(v), 0)
            d[k][json.dumps(v)] += 1
        return d

    final = next(e["rows"] for e in events if e["kind"] == "kv.output")
    again = {}
    for e in events:
        if e["kind"] == "kv.hand" and e["attempt"] > 1 and any(
                h["kind"] == "kv.hand" and h["attempt"] == 1 and h["position"] == e["position"] for h in events):
            again[e["row"][0]] = again.get(e["row"][0], 0) + 1
    j = judge_sink(header["guarantee"], per_key(reference_rows), per_key(final), redelivered=again,
                   documentation=KV_DOC)
    name = f"user-sink-{header['guarantee']}"
    checks.append(Check.held(name, j["detail"], examined=len(final), **j["data"]) if j["ok"]
                  else Check.violated(name, j["detail"], **j["data"]))
    return Report(checks, subject="kv")


class KvMatrix(EngineAdapter):
    """The toy engine's matrix adapter: recording, replay and failure points; nothing else."""

    engine, title, row_header = "kv", "kv matrix", "module · snapshot every"

    def __init__(self, modules):
        self.modules = modules

    def describe(self, cell):
        return cell.config, cell.failure, {}

    def record(self, cell, context, runner, out):
        trace = out / f"{cell.ident}.jsonl"
        trace.parent.mkdir(parents=True, exist_ok=True)
        kv_run(self.modules[cell.module], cell.config["snap_every"], cell.failure["at"], trace)
        return Recording(trace)

    def replay(self, cell, recording):
        ref = []
        kv_run(self.modules[cell.module], cell.config["snap_every"], None, recording.trace.with_suffix(".ref"))
        for line in recording.trace.with_suffix(".ref").read_text().splitlines()[1:]:
            e = json.loads(line)
            if e["kind"] == "kv.output":
                ref = e["rows"]
        return Replayed(kv_report(recording.trace, ref))


def kv_cells(names, snaps, crashes):
    return [GenericCell(m, f"{m} · {s}", f"crash@{c}", config={"snap_every": s}, failure={"at": c})
            for m in names for s in snaps for c in crashes]


def _append(out, pos, row):  # appends every row it is handed
    out.append(row)


def _by_position(out, pos, row):  # idempotent: the row of a position is written once
    if pos >= len(out):
        out.append(row)


RECORDS = [("a", 1), ("b", 2), ("a", 3), ("c", 1), ("b", 1), ("a", 2)]
MODULES = {
    "append": {"records": RECORDS, "sink": _append},  # declares nothing: exactly-once
    "append_alo": {"records": RECORDS, "sink": _append, "SINK_GUARANTEE": "at-least-once"},
    "keyed": {"records": RECORDS, "sink": _by_position},
}


def test_kv_matrix_through_the_core(tmp_path):
    out = tmp_path / "m"
    cells = kv_cells(["append", "append_alo", "keyed"], [2], [3])
    doc = run_matrix(KvMatrix(MODULES), cells, out, jobs=2)
    by = {c["module"]: c for c in doc["cells"]}
    # cells and table places
    assert [c["row"] for c in doc["cells"]] == ["append · 2", "append_alo · 2", "keyed · 2"]
    assert {c["column"] for c in doc["cells"]} == {"crash@3"}
    # classification: the undeclared appending sink duplicates the re-delivered row -> not conformant,
    # explained by the engine's documentation; declared at-least-once -> conformant; idempotent -> conformant
    assert by["append"]["verdict"] == "not-conformant" and by["append"]["expected_by_engine"] is True
    assert by["append"]["attributed_to"] == "module" and "kv manual" in by["append"]["reason"]
    assert by["append_alo"]["verdict"] == "conformant" and by["keyed"]["verdict"] == "conformant"
    # the JSON document: one set of keys, the summary, the verdict from decide (exit 1)
    saved = json.loads((out / "matrix.json").read_text())
    assert saved["finished"] is True and saved["summary"] == {"conformant": 2, "not_conformant": 1,
                                                              "inconclusive": 0, "expected_by_engine": 1,
                                                              "findings": 0}
    for c in saved["cells"]:
        assert {"engine", "module", "config", "failure", "verdict", "expected_by_engine", "attributed_to", "reason",
                "trace", "witness", "reproducer"} <= set(c) and c["engine"] == "kv"
    assert Path(by["append"]["witness"]).is_file() and by["keyed"]["witness"] is None
    assert matrix_verdict(saved["cells"]).exit_code == 1 and doc["verdict"] == "not-conformant"
    # the HTML table: a row per configuration, links relative to the page
    page = (out / "index.html").read_text()
    assert "rollcheck kv matrix" in page and "append_alo · 2" in page and str(tmp_path) not in page
    assert "not-conformant (expected by the engine)" in page and 'href="append-2/crash-3.jsonl"' in page


def test_kv_matrix_catches_an_engine_that_reloads_an_older_snapshot(tmp_path, monkeypatch):
    """Mutant: the trace says the engine reloaded from scratch instead of its newest snapshot: the
    engine's own promise fails, and the cell is a finding against the engine, exit 1."""
    real = kv_run

    def older(module, snap_every, crash_at, path):
        real(module, snap_every, crash_at, path)
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        for e in lines[1:]:
            if e.get("kind") == "kv.reload":
                e["position"] = 0
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))

    monkeypatch.setitem(globals(), "kv_run", older)
    doc = run_matrix(KvMatrix(MODULES), kv_cells(["append_alo"], [2], [3]), tmp_path / "m")
    (cell,) = doc["cells"]
    assert cell["verdict"] == "not-conformant" and cell["attributed_to"] == "engine"
    assert cell["reason"].startswith("finding: reloads-newest-snapshot") and doc["summary"]["findings"] == 1
    assert matrix_verdict(doc["cells"]).exit_code == 1
