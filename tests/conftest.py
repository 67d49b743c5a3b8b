"""Test configuration.

- Activates the Hypothesis profile named by ROLLCHECK_PROFILE (ci by default).
- ``chromium``: headless Chromium as a reader meets a page (skips without it, fails under
  ``CI=true``; ``make chromium`` installs it).
- Under ``CI=true`` every skip for a missing engine environment (PyFlink, a JDK, TLC, pip's package
  index) fails the test instead (:data:`ENGINE_MISSING`).
- No leftovers: ``make test`` points ``TMPDIR`` at a fresh folder and names it in
  ``ROLLCHECK_CHECK_TMPDIR``; when the whole run is over, anything left in it other than pytest's
  own ``pytest-of-*`` folder (and the JVM's ``hsperfdata_*``) fails the run, naming what was left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Generator
from typing import Any

import pytest

from rollcheck.properties.profiles import load_profile

load_profile()

_KEEP = ("pytest-of-", "hsperfdata_")

_CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync",
                   "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"]


@pytest.fixture
def chromium() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``chromium(*args)`` runs headless Chromium with a fresh profile in a short scratch folder of
    its own (its singleton socket path must stay under 108 bytes), removed afterwards."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        msg = "headless Chromium not found (make chromium installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="rcc-") as scratch:
            env = {**os.environ, "TMPDIR": scratch, "HOME": scratch}
            return subprocess.run([exe, *_CHROMIUM_FLAGS, f"--user-data-dir={scratch}/profile", *args],
                                  capture_output=True, text=True, timeout=120, env=env, start_new_session=True)

    return run


#: How a real-engine test words a skip for a missing engine environment (PyFlink, a JDK, TLC, pip's
#: package index, Chromium). Under ``CI=true`` such a skip fails the test instead: a CI run must not
#: pass by leaving its engines out.
ENGINE_MISSING = ("no PyFlink environment", "PyFlink is not installed", "no flink-dist jar", "javac/jar not found",
                  "pip cannot reach the package index", "no java", "no TLC", "headless Chromium not found")


def skip_reason(report: pytest.TestReport) -> str:
    """The reason of a skipped test's report (``""`` when it carries none)."""
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2]).removeprefix("Skipped: ")
    return str(lr or "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Under ``CI=true``, a skip for a missing engine environment (:data:`ENGINE_MISSING`) fails."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or os.environ.get("CI") != "true":
        return
    reason = skip_reason(report)
    if any(w in reason for w in ENGINE_MISSING):
        report.outcome = "failed"
        report.longrepr = f"CI=true: a missing engine environment fails the run instead of skipping: {reason}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks once
        return
    root = os.environ.get("ROLLCHECK_CHECK_TMPDIR")
    if not root or not os.path.isdir(root):
        return
    left = sorted(p for p in os.listdir(root) if not p.startswith(_KEEP))
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        def inside(name: str) -> str:  # what a left folder holds names the test that left it
            path = os.path.join(root, name)
            if not os.path.isdir(path):
                return name
            found = [os.path.relpath(os.path.join(d, f), root)
                     for d, _, fs in os.walk(path) for f in fs][:5]
            return f"{name} ({', '.join(found) or 'empty'})"

        msg = f"tests left {len(left)} entries in the temp directory: {', '.join(map(inside, left[:20]))}"
        if reporter is not None:
            reporter.write_line(msg, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
