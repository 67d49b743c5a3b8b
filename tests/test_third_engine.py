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
