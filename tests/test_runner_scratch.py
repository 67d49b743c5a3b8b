"""A matrix child's temporary files live and die with its run (the clean-TMPDIR rule of CI)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rollcheck.infra.matrix.runner import ChildRunner

# an engine launcher's habit: a tempfile.mkdtemp() emptied at once, removed only if it is not killed
_LAUNCHER = ("import os, sys, tempfile, time; d = tempfile.mkdtemp(); print(d, flush=True); "
             "open(os.path.join(d, 'conn'), 'w').close(); os.unlink(os.path.join(d, 'conn')); "
             "time.sleep(float(sys.argv[1]))")


def _run(tmp_path: Path, monkeypatch, sleep: float, timeout: float) -> tuple[int | None, str, Path]:
    outside = tmp_path / "tmp"
    outside.mkdir()
    monkeypatch.setenv("TMPDIR", str(outside))
    monkeypatch.setattr(tempfile, "tempdir", None)  # the parent's own temporary folder follows TMPDIR
    rc, out = ChildRunner().run([sys.executable, "-c", _LAUNCHER, str(sleep)], timeout, tmp_path / "cell" / "c.log")
    return rc, out, outside


def test_a_killed_child_leaves_no_temporary_folder(tmp_path, monkeypatch):
    rc, out, outside = _run(tmp_path, monkeypatch, sleep=60, timeout=3)
    assert rc is None and "timed out" in out
    assert list(outside.iterdir()) == []  # the user's temporary folder is untouched
    assert [p.name for p in (tmp_path / "cell").iterdir()] == ["c.log"]  # the run's own is gone


def test_a_child_sees_its_own_temporary_folder(tmp_path, monkeypatch):
    rc, out, outside = _run(tmp_path, monkeypatch, sleep=0, timeout=60)
    made = Path(out.strip())
    assert rc == 0 and made.parent.parent == tmp_path / "cell" and not made.exists()
    assert list(outside.iterdir()) == []
