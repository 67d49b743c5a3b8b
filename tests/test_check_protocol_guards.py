"""``check protocol`` on protocols that misbehave: a call that hangs, a ``must_force`` that lies about
its type, a state changed in place — exit 2 naming the file, the method and the value or limit;
nothing left running."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BASE = """
from typing import NamedTuple
from rollcheck.testing import Protocol

class S(NamedTuple):
    lc: int = 0

class P(Protocol):
    zcycle_free = True
    def initial(self, i, n): return S()
    def on_checkpoint(self, st): return S(st.lc + 1)
    def on_send(self, st, dst): return st, st.lc
    def must_force(self, st, src, pb): return pb > st.lc
    def on_deliver(self, st, src, pb): return S(max(st.lc, pb))
"""

CASES = {
    "hangs": ("def must_force(self, st, src, pb):\n    while True: pass",
              ["Bad.must_force", "did not return within 1 s", "hangs.py"]),
    "sleeps": ("def on_send(self, st, dst):\n    import time; time.sleep(60); return st, 0",
               ["Bad.on_send", "did not return within 1 s"]),
    "says_yes": ("def must_force(self, st, src, pb):\n    return 'yes'",
                 ["Bad.must_force", "must return a bool", "'yes'"]),
    "says_none": ("def must_force(self, st, src, pb):\n    return None",
                  ["Bad.must_force", "returned None"]),
    "one_tuple": ("def must_force(self, st, src, pb):\n    return (pb > st.lc,)",
                  ["Bad.must_force", "of type tuple"]),
    "mutates": ("def initial(self, i, n):\n    return [0]\n"
                "def on_checkpoint(self, st):\n    st[0] += 1\n    return st\n"
                "def on_send(self, st, dst):\n    return st, st[0]\n"
                "def must_force(self, st, src, pb):\n    return pb > st[0]\n"
                "def on_deliver(self, st, src, pb):\n    return [max(st[0], pb)]",
                ["Bad.on_checkpoint", "changed its state argument in place"]),
}


def _write(tmp_path: Path, name: str) -> Path:
    body, _ = CASES[name]
    src = BASE + "\n\nclass Bad(P):\n" + textwrap.indent(body, "    ") + "\n"
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_misbehaving_protocol_exits_2_naming_the_method(tmp_path, name):
    path = _write(tmp_path, name)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "check", "protocol",
                           f"{path}:Bad", "--call-timeout", "1", "--bound", "2x5",
                           "--max-examples", "5", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=""))
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr
    assert "Traceback" not in err
    for needle in CASES[name][1]:
        assert needle in err, (needle, err)
    assert time.monotonic() - t0 < 60
    # nothing of the run is left behind (workers, watchdog): the process is gone and had no children
    out = subprocess.run(["pgrep", "-f", f"{path}:Bad"], capture_output=True, text=True)
    assert out.stdout.strip() == ""
