"""Under ``CI=true`` a real-engine test whose engine environment is missing fails; elsewhere it skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

_TINY = '''
import pytest

def test_flink_missing():
    pytest.skip("no PyFlink environment (make flink-setup)")

@pytest.mark.skipif(True, reason="pip cannot reach the package index")
def test_index_missing():
    pass

def test_not_applicable():
    pytest.skip("does not apply to this trace")

@pytest.mark.xfail(reason="no java", strict=False)
def test_expected_failure():
    raise RuntimeError("x")
'''


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_tiny.py").write_text(_TINY, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_tiny.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_missing_engine_fails_under_ci(tmp_path: Path) -> None:
    r = _run(tmp_path, "true")
    assert r.returncode == 1, r.stdout[-2000:]
    # a skipif of the setup phase fails as an error of the setup
    assert "1 failed, 1 skipped, 1 xfailed, 1 error" in r.stdout, r.stdout[-2000:]
    assert "CI=true: a missing engine environment fails the run" in r.stdout


def test_missing_engine_skips_outside_ci(tmp_path: Path) -> None:
    r = _run(tmp_path, None)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "3 skipped, 1 xfailed" in r.stdout, r.stdout[-2000:]
