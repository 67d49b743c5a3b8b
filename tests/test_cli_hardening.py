"""Issue 14 ("hardened inputs everywhere"): every reproducer of its "Why", as a test.

Each bad input must give exit 2 with one line naming the file (or flag) and the place, quickly;
valid-but-extreme input must give the right answer; outputs are written safely; SIGTERM unwinds.
"""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rollcheck.cli._util import emit_json, json_safe
from rollcheck.cli.main import build_parser as _REAL_BUILD
from rollcheck.fuzz import run_cli
from rollcheck.pyimpl import patternio

PATTERN = {
    "format": "rollcheck.pattern/1", "processes": ["P0", "P1"],
    "events": [{"process": "P0", "kind": "send", "message": "m1", "to": "P1"},
               {"process": "P1", "kind": "deliver", "message": "m1"},
               {"process": "P1", "kind": "checkpoint"},
               {"process": "P0", "kind": "checkpoint"}],
}
ELASTIC = {"format": "rollcheck.elastic/1", "keys": 4, "ops": ["affine", "sum"], "rounds": 5}
SPANS = {"format": "rollcheck.spans/1",
         "processors": {"p": {"chain": [[], ["e1:1"]], "top": ["e1:1", "e1:2"]}, "q": {"chain": [[], ["e2:1"]]}},
         "edges": [{"name": "e2", "src": "p", "dst": "q", "discarded": [[], ["e2:1"]],
                    "discarded_top": ["e2:1", "e2:2"], "processed": ["e2:1"], "phi": [[], ["e2:1"]]}]}


def write(tmp_path: Path, name: str, data: bytes | str | object) -> str:
    p = tmp_path / name
    if isinstance(data, bytes):
        p.write_bytes(data)
    elif isinstance(data, str):
        p.write_text(data, encoding="utf-8")
    else:
        p.write_text(json.dumps(data), encoding="utf-8")
    return str(p)


def bad_input(argv: list[str], *needles: str, seconds: float = 10.0) -> str:
    """Run ``argv``: exit 2, one error line containing every needle, no traceback, quickly."""
    t0 = time.perf_counter()
    o = run_cli(argv, time_limit=seconds + 20)
    took = time.perf_counter() - t0
    assert o.code == 2, (o.code, o.stderr[-500:])
    assert "Traceback" not in o.stderr
    lines = [ln for ln in o.stderr.splitlines() if ": error:" in ln]
    assert len(lines) == 1, o.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert took < seconds, took
    return lines[0]


# ----------------------------------------------------------------------------- JSON loaders
LOADERS = [
    ("pattern", lambda f: ["validate", f]),
    ("elastic", lambda f: ["elastic", "simulate", f, "--json"]),
    ("spans", lambda f: ["spans", f, "--json"]),
]


@pytest.mark.parametrize("name, argv", LOADERS, ids=[n for n, _ in LOADERS])
@pytest.mark.parametrize("data, needle", [
    (b"[" * 100_000 + b"]" * 100_000, "nested"),                     # RecursionError before
    (b"[" * 1_000 + b"]" * 1_000, "nested"),
    (b'{"format": ' + b"9" * 5000 + b"}", "digits"),                 # over Python's 4,300 digits
    (b'{"format": "x", "a": "\xff\xfe"}', "UTF-8"),                   # UnicodeDecodeError before
])
def test_every_loader_rejects_malformed_json(tmp_path, name, argv, data, needle):
    f = write(tmp_path, "in.json", data)
    bad_input(argv(f), f, needle)


@pytest.mark.parametrize("name, argv", LOADERS[:2], ids=[n for n, _ in LOADERS[:2]])
@pytest.mark.parametrize("data, needle", [
    (b"\xef\xbb\xbf{}", "byte-order mark"),
    (b'{"format": NaN}', "NaN"),
    (b'{"format": 1e999}', "infinite"),
    (b"", "empty"),
])
def test_bom_nan_infinity_empty(tmp_path, name, argv, data, needle):
    f = write(tmp_path, "in.json", data)
    bad_input(argv(f), f, needle)


def test_input_is_a_directory(tmp_path):
    bad_input(["validate", str(tmp_path)], str(tmp_path), "directory")
    bad_input(["elastic", "simulate", str(tmp_path)], str(tmp_path), "directory")


# ----------------------------------------------------------------------------- pattern loader
def test_pattern_first_offending_event(tmp_path):
    doc = dict(PATTERN, events=[{"process": "P1", "kind": "deliver", "message": "zz"},
                                {"process": "nobody", "kind": "send"}])
    line = bad_input(["validate", write(tmp_path, "p.json", doc)], "events[0]", "before its send")
    assert "events[1]" not in line


def test_pattern_nan_rejected_even_with_strict(tmp_path):
    text = json.dumps(PATTERN)[:-1] + ', "extra": NaN}'
    f = write(tmp_path, "p.json", text)
    bad_input(["validate", "--strict", f], f, "NaN")
    bad_input(["validate", f], f, "NaN")


def test_pattern_names_are_cut_in_messages(tmp_path):
    huge = "m" * 2_000_000
    doc = dict(PATTERN, events=[{"process": "P0", "kind": "send", "message": huge, "to": "P1"},
                                {"process": "P0", "kind": "send", "message": huge, "to": "P1"}])
    line = bad_input(["validate", write(tmp_path, "p.json", doc)], "events[1]", "duplicate message id")
    assert len(line) < 1000
    doc = dict(PATTERN, events=[{"process": "Q" * 2_000_000, "kind": "checkpoint"}])
    line = bad_input(["validate", write(tmp_path, "q.json", doc)], "events[0].process", "characters")
    assert len(line) < 1000


def test_pattern_memory_estimate_refuses_before_loading(tmp_path, monkeypatch):
    f = write(tmp_path, "p.json", PATTERN)
    size = os.path.getsize(f)
    monkeypatch.setattr(patternio, "MEMORY_LIMIT", patternio.estimate_memory(size) - 1)
    bad_input(["useless", f, "--json"], f, "GiB of memory", "--allow-large")
    o = run_cli(["useless", f, "--json", "--allow-large"])
    assert o.code == 0 and json.loads(o.stdout) == {"useless": []}


def test_memory_estimate_is_documented_and_measured():
    # 1.6 GB per million messages (about 150 bytes of compact file per message)
    per_million = patternio.BYTES_PER_FILE_BYTE * 115 * 10**6
    assert 1.2e9 < per_million < 2.5e9
    assert patternio.MEMORY_LIMIT == 4 * 2**30


# ----------------------------------------------------------------------------- safe printing
SURROGATE = dict(PATTERN, processes=["\ud800", "$\\frac$"],
                 events=[{"process": "\ud800", "kind": "send", "message": "m1", "to": "$\\frac$"},
                         {"process": "$\\frac$", "kind": "deliver", "message": "m1"},
                         {"process": "$\\frac$", "kind": "checkpoint"}])


def _surrogate_file(tmp_path: Path) -> str:
    return write(tmp_path, "s.json", json.dumps(SURROGATE))  # \ud800 as a JSON escape


@pytest.mark.parametrize("argv", [
    ["recovery-line", "{f}", "--failed", "$\\frac$"],
    ["useless", "{f}", "--witness"],
    ["zpath", "{f}", "--from", "\ud800:0", "--to", "$\\frac$:1"],
    ["recovery-line", "{f}", "--failed", "\ud800", "--json"],
])
def test_surrogate_names_print_escaped(tmp_path, argv):
    f = _surrogate_file(tmp_path)
    o = run_cli([a.replace("{f}", f) for a in argv])
    assert o.code == 0, o.stderr
    if "--json" in argv:
        assert "\ud800" in json.loads(o.stdout)["line"]


def test_surrogate_names_reach_a_real_terminal_escaped(tmp_path):
    """Through a real process (stdout encoded as UTF-8): escaped, not a UnicodeEncodeError."""
    f = _surrogate_file(tmp_path)
    r = subprocess.run([sys.executable, "-P", "-m", "rollcheck.cli.main", "recovery-line", f, "--failed",
                        "$\\frac$"], capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 0, r.stderr
    assert b"\\ud800" in r.stdout


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_render_names_with_mathtext_and_surrogates(tmp_path, suffix):
    f = _surrogate_file(tmp_path)
    out = tmp_path / f"d.{suffix}"
    o = run_cli(["render", f, "-o", str(out), "--title", "$\\frac$ \ud800"])
    assert o.code == 0, o.stderr
    assert out.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([Path(f).name, out.name])


# ----------------------------------------------------------------------------- output paths
def test_output_is_a_directory_or_under_a_file(tmp_path):
    f = write(tmp_path, "p.json", PATTERN)
    d = tmp_path / "dir.png"
    d.mkdir()
    bad_input(["render", f, "-o", str(d)], "-o", "folder")
    bad_input(["render", f, "-o", str(Path(f) / "x.png")], "-o", "is a file, not a folder")
    bad_input(["elastic", "simulate", "--keys", "3", "--write-config", str(Path(f) / "c.json")],
              "--write-config")


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_read_only_folder_and_write_protected_file(tmp_path):
    f = write(tmp_path, "p.json", PATTERN)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        bad_input(["render", f, "-o", str(ro / "x.png")], "-o", "not writable")
    finally:
        ro.chmod(0o755)
    locked = tmp_path / "locked.json"
    locked.write_text("keep")
    locked.chmod(0o444)
    bad_input(["elastic", "simulate", "--keys", "3", "--write-config", str(locked)],
              "--write-config", "write-protected")
    assert locked.read_text() == "keep"


def test_written_files_get_umask_modes_and_keep_modes(tmp_path):
    new = tmp_path / "new.json"
    o = run_cli(["elastic", "simulate", "--keys", "3", "--write-config", str(new)])
    assert o.code == 0, o.stderr
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~mask  # not 0600
    new.chmod(0o640)
    o = run_cli(["elastic", "simulate", "--keys", "4", "--write-config", str(new)])
    assert o.code == 0 and stat.S_IMODE(new.stat().st_mode) == 0o640
    assert json.loads(new.read_text())["keys"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json"]


def test_verify_out_checked_before_the_run(tmp_path):
    f = write(tmp_path, "report", "a file")
    bad_input(["verify", "--quick", "--out", f], "--out", "not a folder", seconds=5)
    user = tmp_path / "mine"
    user.mkdir()
    (user / "report.md").write_text("# my own report\n")
    bad_input(["verify", "--quick", "--out", str(user)], "--out", "report.md", "--force", seconds=5)
    assert (user / "report.md").read_text() == "# my own report\n"


def test_verify_seed_comes_from_the_environment(monkeypatch):
    import argparse

    from rollcheck.cli.cmd_verify import _seed

    monkeypatch.setenv("ROLLCHECK_SEED", "41")
    assert _seed(argparse.Namespace(seed=None)) == (41, "ROLLCHECK_SEED")
    assert _seed(argparse.Namespace(seed=5)) == (5, "--seed")
    monkeypatch.delenv("ROLLCHECK_SEED")
    assert _seed(argparse.Namespace(seed=None)) == (0, "default")


# ----------------------------------------------------------------------------- elastic bounds
@pytest.mark.parametrize("argv, needle", [
    (["--keys", "1000000000"], "--keys"),
    (["--keys", "100000000000000000000000"], "--keys"),
    (["--keys", "1e9"], "--keys"),
    (["--rate", "1000000000"], "--rate"),
    (["--rounds", "100000000"], "--rounds"),
    (["--ack-interval", "1000000000"], "--ack-interval"),
    (["--seed", "9" * 40], "--seed"),
])
def test_elastic_flags_bounded(argv, needle):
    bad_input(["elastic", "simulate", *argv, "--json"], needle, seconds=5)


@pytest.mark.parametrize("field, value, needle", [
    ("keys", 2**64, "keys"),
    ("ack_interval", 10**9, "ack_interval"),
    ("checkpoint_interval", 10**9, "checkpoint_interval"),
    ("colour", "red", "unknown field"),
    ("failure", {"step": 1, "op": 1, "key": 0, "when": 3}, "failure.when"),
    ("scaling", [{"round": 1, "op": 1, "parallelism": 1, "x": 0}], "scaling[0].x"),
    ("workload", "bursty", "workload"),
])
def test_elastic_config_fields(tmp_path, field, value, needle):
    f = write(tmp_path, "c.json", dict(ELASTIC, **{field: value}))
    bad_input(["elastic", "simulate", f, "--json"], f, needle, seconds=5)


def test_elastic_huge_intervals_allowed_large_are_instant(tmp_path):
    f = write(tmp_path, "c.json", dict(ELASTIC, ack_interval=10**9, checkpoint_interval=10**9 - 1))
    t0 = time.perf_counter()
    o = run_cli(["elastic", "simulate", f, "--json", "--allow-large"], time_limit=60)
    assert o.code == 0, o.stderr
    assert json.loads(o.stdout)["queue_bound"]["1"] > 10**9
    assert time.perf_counter() - t0 < 20


# ----------------------------------------------------------------------------- interval / trt
@pytest.mark.parametrize("argv, needle", [
    (["--runs", "1000000000"], "--runs"),
    (["--horizon-failures", "1e12"], "--horizon-failures"),
    (["--horizon-failures", "inf"], "--horizon-failures"),
    (["--seed", "-1"], "--seed"),
    (["--restart-cost", "2000"], "--restart-cost"),      # λ·R = 20: e^20 restarts per failure
    (["--restart-cost", "900", "--runs", "100000"], "--restart-cost"),  # λ·R = 9, but 10^9 draws
    (["--restart-cost", "1e9"], "--restart-cost"),       # 112 GiB before
])
def test_interval_simulate_bounded(argv, needle):
    bad_input(["interval", "simulate", "--failure-rate", "0.01", "--checkpoint-cost", "1", *argv], needle, seconds=5)


@pytest.mark.parametrize("command", ["optimal", "compare", "simulate"])
def test_tiny_rate_and_cost_give_the_limit_not_an_interval_error(command):
    extra = ["--runs", "3", "--horizon-failures", "5"] if command == "simulate" else []
    o = run_cli(["interval", command, "--failure-rate", "1e-300", "--checkpoint-cost", "1e-300", "--json", *extra])
    assert o.code == 0, o.stderr
    assert "--interval" not in o.stderr
    assert math.isclose(json.loads(o.stdout)["interval"], math.sqrt(2.0))


def test_trt_json_has_no_infinity():
    """A TRT too large for a float is a clear exit-2 error, never ``Infinity`` in the JSON."""
    o = run_cli(["trt", "--ci", "1e308", "--timeout", "1", "--recovery", "1", "--warmup", "1", "--ratio", "0.5",
                 "--json"])
    assert "Infinity" not in o.stdout and "NaN" not in o.stdout
    assert o.code == 2 and o.stdout == ""
    assert "overflows a float" in o.stderr and o.stderr.count("\n") == 1


def test_emit_json_non_finite(capsys):
    emit_json({"a": [1.0, float("-inf")], "note": "x"})
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"a": [1.0, None], "note": "x; not finite, written as null: a[1] = -inf"}
    assert json_safe([float("nan")]) == ([None], ["[0] = nan"])
    assert json_safe(float("inf")) == (None, ["(document) = inf"])


# ----------------------------------------------------------------------------- last line of defence
def _command(monkeypatch, handler):
    import argparse

    import rollcheck.cli.main as cli_main

    real = _REAL_BUILD

    def build():
        parser = real()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.add_parser("probe")
        p.add_argument("input", nargs="?")
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
        p.set_defaults(handler=handler)
        return parser

    monkeypatch.setattr(cli_main, "build_parser", build)


def test_unexpected_exception_is_internal_error_exit_4(monkeypatch):
    _command(monkeypatch, lambda args: {}["missing"])
    o = run_cli(["probe"])
    assert o.code == 4 and "Traceback" not in o.stderr
    assert "internal error: KeyError" in o.stderr and "--debug" in o.stderr
    o = run_cli(["probe", "--debug"])
    assert o.code == 4 and "Traceback (most recent call last)" in o.stderr


def test_internal_error_type_is_exit_4(monkeypatch):
    from rollcheck.pyimpl.errors import InternalError

    def boom(args):
        raise InternalError("invariant broken")

    _command(monkeypatch, boom)
    o = run_cli(["probe"])
    assert o.code == 4 and "internal error: invariant broken" in o.stderr


def test_input_shaped_library_errors_are_exit_2_naming_the_file(monkeypatch, tmp_path):
    f = write(tmp_path, "x.json", b"\xff")
    _command(monkeypatch, lambda args: open(args.input, encoding="utf-8").read())
    o = run_cli(["probe", f])
    assert o.code == 2 and f in o.stderr and "byte 0" in o.stderr



# Issue 19: RecursionError / OverflowError / MemoryError are bad input only where an input bound
# was hit (the reader raises InvalidInputError there); one that escapes every bound is a bug.
@pytest.mark.parametrize("error", [RecursionError("maximum recursion depth exceeded"),
                                   OverflowError("int too large to convert to float"),
                                   MemoryError()], ids=["recursion", "overflow", "memory"])
def test_resource_errors_outside_an_input_bound_are_exit_4(monkeypatch, tmp_path, error):
    f = write(tmp_path, "x.json", b"[]")

    def boom(args):
        raise error

    _command(monkeypatch, boom)
    o = run_cli(["probe", f])
    assert o.code == 4 and "internal error" in o.stderr and "no input bound" in o.stderr, o.stderr
    assert "Traceback" not in o.stderr


def test_an_unbounded_library_recursion_is_exit_4_not_bad_input(monkeypatch, tmp_path):
    """A reader that forgot its bound (plain json.loads on a deep document) is caught as a bug."""
    f = write(tmp_path, "x.json", b"[]")
    _command(monkeypatch, lambda args: json.loads("[" * 100_000 + "]" * 100_000))
    o = run_cli(["probe", f])
    assert o.code == 4 and "RecursionError" in o.stderr


def test_internal_recursion_bug_in_a_real_command_is_exit_4(monkeypatch, tmp_path):
    """A recursion bug inside ``useless`` on a valid, small pattern: exit 4, not "bad input"."""
    import rollcheck.pyimpl.zpaths as zpaths

    def runaway(pattern, *a, **k):
        return runaway(pattern)

    monkeypatch.setattr(zpaths, "useless_checkpoints", runaway)
    f = write(tmp_path, "ok.json", PATTERN)
    o = run_cli(["useless", f, "--json"])
    assert o.code == 4 and "internal error: RecursionError" in o.stderr, o.stderr
    assert ": error:" not in o.stderr


@pytest.mark.parametrize("argv, data", [
    (lambda f: ["validate", f], b"[" * 100_000 + b"]" * 100_000),
    (lambda f: ["useless", f], b'{"format": "rollcheck.pattern/1", "processes": ' + b"[" * 5000
     + b"]" * 5000 + b"}"),
    (lambda f: ["check", "trace", f, "--no-tlc"], b'{"format": "rollcheck.trace/1", "processes": '
     + b"[" * 5000 + b"]" * 5000 + b"}\n"),
    (lambda f: ["trace", "validate", f], b'{"format": "rollcheck.trace/1", "processes": ["a"]}\n'
     + b'{"seq": 1, "process": "a", "kind": "checkpoint", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"),
    (lambda f: ["spans", f, "--json"], b"[" * 100_000 + b"]" * 100_000),
], ids=["validate", "useless", "check-trace", "trace-validate", "spans"])
def test_deeply_nested_input_hits_the_bound_exit_2_naming_the_file(tmp_path, argv, data):
    f = write(tmp_path, "deep.json", data)
    bad_input(argv(f), f, "nested")


SIGTERM_PROBE = textwrap.dedent("""
    import argparse, sys, tempfile, time
    import rollcheck.cli.main as m
    real = m.build_parser
    def build():
        parser = real()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.add_parser("probe")
        def handler(args):
            with tempfile.TemporaryDirectory(prefix="rollcheck-probe-") as d:
                print(d, flush=True)
                time.sleep(60)
        p.set_defaults(handler=handler)
        return parser
    m.build_parser = build
    sys.exit(m.main(["probe"]))
""")


def test_sigterm_unwinds_and_cleans_up(tmp_path):
    proc = subprocess.Popen([sys.executable, "-P", "-c", SIGTERM_PROBE], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        folder = proc.stdout.readline().strip()
        assert os.path.isdir(folder)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    assert not os.path.exists(folder)


def test_sigterm_during_a_long_simulation():
    """A real long run (interval simulate) stops cleanly on SIGTERM with exit 143."""
    proc = subprocess.Popen([sys.executable, "-P", "-m", "rollcheck.cli.main", "interval", "simulate",
                             "--failure-rate", "0.01", "--checkpoint-cost", "1", "--runs", "100000",
                             "--horizon-failures", "5000", "--allow-large"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "seed=" in proc.stderr.readline()
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143 and "Traceback" not in err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_stream_is_bounded():
    bad_input(["validate", "/dev/zero"], "/dev/zero", "not a regular file", seconds=20)
    bad_input(["elastic", "simulate", "/dev/zero"], "/dev/zero", "not a regular file", seconds=20)


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text.encode() in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


@pytest.mark.tlc
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for Java")
def test_sigterm_stops_tlc_java_and_removes_its_folder(tmp_path):
    """Issue 14: SIGTERM left Java running (76 s) and the rollcheck-tlc-* folder behind."""
    from rollcheck.tla.runner import TLCUnavailable, find_jar, find_java

    try:
        find_jar()
        find_java()
    except TLCUnavailable as e:
        pytest.fail(f"make test installs Java and the TLC jar: {e}")
    import rollcheck.tla.models as models

    mdir = Path(models.__file__).parent
    proc = subprocess.Popen([sys.executable, "-P", "-m", "rollcheck.cli.main", "tlc", str(mdir / "CIC.tla"),
                             "--config", str(mdir / "cic-hmnr-large.cfg")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _processes_mentioning(str(tmp_path) + "/rollcheck-tlc-"):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert _processes_mentioning(str(tmp_path) + "/rollcheck-tlc-"), "Java did not start"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    time.sleep(0.5)
    assert _processes_mentioning(str(tmp_path) + "/rollcheck-tlc-") == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rollcheck-tlc-")]


def test_nhop_trace_header_config_is_checked(tmp_path):
    """A recorded nhop trace whose header config is absurd is bad input (exit 2), not a crash."""
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop

    good = tmp_path / "t.jsonl"
    record_nhop(NhopConfig(protocol="hmnr", topology="cyclic", seed=1, processes=3, rounds=3,
                           fail_process=1, fail_round=2), good, engine="local")
    lines = good.read_text(encoding="utf-8").splitlines()
    for field, value in (("processes", 10**30), ("max_fanout", [1]), ("rounds", "3")):
        header = json.loads(lines[0])
        header["config"][field] = value
        bad = tmp_path / f"{field}.jsonl"
        bad.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
        o = run_cli(["spark", "replay", str(bad), "--json"])
        assert o.code == 2 and o.stderr.count("\n") == 1 and field in o.stderr, (field, o.stderr)


# ----------------------------------------------------------------------------- issue 19: loose ends
def _all_parsers(parser, path=()):
    import argparse

    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _all_parsers(sp, (*path, name))


def test_every_numeric_option_refuses_non_finite_values():
    """Walk every (sub)command: each option whose type yields a float refuses nan, inf and 1e309."""
    import argparse

    parser = _REAL_BUILD()
    numeric = []
    for path, p in _all_parsers(parser):
        assert type(p).__name__ == "_Parser", path  # every subcommand parses with the refusing parser
        for a in p._actions:
            if a.type is None or not a.option_strings:
                continue
            try:
                v = a.type("1e309")
            except Exception:  # noqa: BLE001 - not a float-valued option
                continue
            if not isinstance(v, float):
                continue
            numeric.append((" ".join(path), a.option_strings[-1]))
            for text in ("1e309", "nan", "inf", "-Infinity"):
                with pytest.raises(argparse.ArgumentError, match="finite"):
                    p._get_value(a, text)
            assert p._get_value(a, "2.5") == 2.5
    assert len(numeric) >= 30, numeric  # the walk reached the numeric options of every family
    assert ("trt", "--i-max") in numeric and ("check trace", "--tlc-timeout") in numeric


@pytest.mark.parametrize("argv, flag", [
    (["trt", "--ci", "10", "--timeout", "5", "--recovery", "3", "--warmup", "2", "--i-avg", "1",
      "--i-max", "1e309"], "--i-max"),
    (["trt", "--ci", "nan", "--timeout", "5", "--recovery", "3", "--warmup", "2", "--ratio", "0.5"], "--ci"),
    (["interval", "optimal", "--failure-rate", "inf", "--checkpoint-cost", "1"], "--failure-rate"),
    (["tlc-trace", "hmnr", "x.jsonl", "--timeout", "1e400"], "--timeout"),
    (["check", "trace", "x.jsonl", "--tlc-timeout", "NaN"], "--tlc-timeout"),
])
def test_non_finite_option_is_exit_2_naming_the_flag(argv, flag):
    o = run_cli(argv)
    assert o.code == 2 and "Traceback" not in o.stderr
    assert f"argument {flag}" in o.stderr and "finite" in o.stderr, o.stderr


def _trace_file(tmp_path, head):
    f = tmp_path / "big.jsonl"
    f.write_text(json.dumps(head) + "\n" + json.dumps({"seq": 1, "kind": "checkpoint", "process": "P0"}) + "\n")
    return str(f)


@pytest.mark.parametrize("head, field", [
    ({"format": "rollcheck.trace/1", "config": {"processes": 300_000_000}}, "config.processes"),
    ({"format": "rollcheck.trace/1", "config": {"processes_names": ["p"] * 5000}}, "config.processes_names"),
    ({"format": "rollcheck.trace/1", "processes": [f"p{i}" for i in range(1001)]}, "processes"),
])
def test_tlc_trace_header_sizes_bounded_up_front(tmp_path, head, field):
    f = _trace_file(tmp_path, head)
    line = bad_input(["tlc-trace", "hmnr", f], f, f"{field}:", "above the limit", "--allow-large", seconds=5)
    assert "line 1" in line


def test_tlc_trace_header_bound_lifted_by_allow_large(tmp_path):
    from rollcheck.tla.trace import MAX_PROCESSES, load_trace_events

    f = _trace_file(tmp_path, {"format": "rollcheck.trace/1", "config": {"processes": MAX_PROCESSES + 1}})
    p = load_trace_events(f, allow_large=True)
    assert len(p.processes) == MAX_PROCESSES + 1


def test_check_subcommand_that_fails_to_import_is_internal_error(monkeypatch):
    """A ``check`` subcommand whose module does not import is exit 4 when run, not dropped (2)."""
    import importlib

    import rollcheck.cli.main as cli_main

    real_import = importlib.import_module

    def failing(name, *a, **k):
        if name == "rollcheck.cli.check_trace":
            raise ImportError("cannot import name 'TraceChecker' (simulated broken install)")
        return real_import(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", failing)
    monkeypatch.setattr(cli_main, "build_parser", lambda: _REAL_BUILD())  # a fresh parser
    o = run_cli(["check", "trace", "examples/trace-hmnr-3p.jsonl", "--no-tlc"])
    assert o.code == 4, o.stderr
    assert "internal error" in o.stderr and "check_trace failed to import" in o.stderr
    assert "TraceChecker" in o.stderr and "Traceback" not in o.stderr
    o = run_cli(["check", "protocol", "--help"])  # the other subcommand still works
    assert o.code == 0


def test_trt_tiny_threshold_is_not_a_math_domain_error():
    """Found by the options fuzzer: threshold / a_1 underflowed to 0 before its logarithm."""
    o = run_cli(["trt", "--json", "--ci=1e-300", "--timeout=0.5", "--recovery=1e-300", "--warmup", "2",
                 "--ratio", "0.5", "--threshold=5e-324"])
    assert o.code == 0, o.stderr
    doc = json.loads(o.stdout)
    assert doc and "Traceback" not in o.stderr


def test_interval_simulate_tiny_interval_is_bounded_up_front():
    """Found by the options fuzzer: 5e-324 gave inf periods per run, NaN, a ValueError (exit 4)."""
    line = bad_input(["interval", "simulate", "--json", "--failure-rate=0.5", "--checkpoint-cost=0",
                      "--horizon-failures", "50", "--seed=3", "--interval=5e-324"], "--interval", "periods")
    assert "limit" in line
