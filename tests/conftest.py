"""Test configuration.

- Activates the Hypothesis profile named by ROLLCHECK_PROFILE (ci by default).
- No leftovers: ``make test`` points ``TMPDIR`` at a fresh folder and names it in
  ``ROLLCHECK_CHECK_TMPDIR``; when the whole run is over, anything left in it other than pytest's
  own ``pytest-of-*`` folder (and the JVM's ``hsperfdata_*``) fails the run, naming what was left.
"""

from __future__ import annotations

import os

import pytest

from rollcheck.properties.profiles import load_profile

load_profile()

_KEEP = ("pytest-of-", "hsperfdata_")


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
