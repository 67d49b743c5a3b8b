"""The ``rollcheck`` pytest plugin (entry point ``pytest11``): check your protocol in your test suite.

``--rollcheck-profile ci|verify`` is the random budget of
:func:`rollcheck.testing.assert_protocol_safe` (600 or 3000 schedules) when a test passes none
(default ``$ROLLCHECK_PROFILE`` or ``ci``); ``--rollcheck-out DIR`` is where failing checks save
their counterexample and picture (default: a temporary directory). The session ends with a
summary of every check (docs/internals/testing.md#the-pytest-plugin-rollcheckpytest_plugin).

Examples
--------
A test in the user's suite::

    from rollcheck.testing import assert_protocol_safe
    from mypkg.protocols import MyProtocol

    def test_my_protocol_is_safe():
        assert_protocol_safe(MyProtocol)

References
----------
``specs/protocols.md#your-protocol``; ``docs/your-protocol.md``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "pytest_terminal_summary", "rollcheck_out"]


def pytest_addoption(parser: Any) -> None:
    """Add ``--rollcheck-profile`` and ``--rollcheck-out`` (pytest hook)."""
    group = parser.getgroup("rollcheck", "rollcheck: checking your own checkpointing protocol")
    group.addoption("--rollcheck-profile", choices=["ci", "verify"], default=None,
                    dest="rollcheck_profile",
                    help="budget of rollcheck's checks: ci = 60 schedules, verify = 600 "
                         "(default: $ROLLCHECK_PROFILE or ci)")
    group.addoption("--rollcheck-out", metavar="DIR", default=None, dest="rollcheck_out",
                    help="save counterexamples (.json) and pictures (.png) of failing rollcheck checks here")


def pytest_configure(config: Any) -> None:
    """Set the session defaults of :mod:`rollcheck.testing` from the options (pytest hook)."""
    from rollcheck.testing import _config

    out = config.getoption("rollcheck_out", default=None)
    if out:
        out = os.path.abspath(out)  # tests may change the working directory
    _config.configure(config.getoption("rollcheck_profile", default=None), out)


@pytest.fixture
def rollcheck_out(request: Any, tmp_path: Any) -> str:
    """The directory where this test's rollcheck artifacts go (``--rollcheck-out`` or a tmp dir).

    Parameters
    ----------
    request : pytest.FixtureRequest
        Unused; pytest's request.
    tmp_path : Path
        The test's temporary folder.

    Returns
    -------
    str
        The folder.
    """
    from rollcheck.testing import _config

    return _config.OUT or str(tmp_path)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """List every protocol and engine slice this session checked (pytest hook).

    Parameters
    ----------
    terminalreporter : TerminalReporter
        Where the lines are written.
    exitstatus : int
        The session's exit status (unused).
    config : pytest.Config
        The session's configuration (unused).
    """
    from rollcheck.testing import _config

    if not _config.REPORTS:
        return
    from rollcheck.testing._engines import EngineReport

    tr = terminalreporter
    tr.section("rollcheck")
    for r in _config.REPORTS:
        if isinstance(r, EngineReport):
            _engine_lines(tr, r)
            continue
        rate = "n/a" if r.forced_per_delivery is None else f"{r.forced_per_delivery:.3f}"
        refs = ", ".join(f"{k} {'n/a' if v is None else f'{v:.3f}'}" for k, v in r.compared.items())
        seed = "derandomised" if r.seed is None else r.seed
        line = (f"{r.protocol}: {r.verdict} ({_n(r.examples, 'schedule')}, profile {r.profile}, seed {seed}); "
                f"{r.coverage()}; forced per delivery {rate} ({refs})")
        if r.property:
            line += f"; violated {r.property}"
        tr.write_line(line)
        for label, path in (("counterexample", r.counterexample), ("picture", r.picture)):
            if path:
                tr.write_line(f"    {label}: {path}")


def _engine_lines(tr: Any, r: Any) -> None:
    """Write a matrix slice of ``check_query`` / ``check_job``: verdict, summary, files, bad cells."""
    from rollcheck.infra.matrix.table import cell_word, summary_line

    tr.write_line(f"{r.module} on {r.engine}: {r.verdict} ({summary_line(r.summary)})")
    tr.write_line(f"    files: {r.out}")
    if r.index:
        tr.write_line(f"    table: {r.index}")
    for c in r.failing:
        tr.write_line(f"    {c.get('row')} · {c.get('column')}: {cell_word(c)[1]}")


def _n(count: int, noun: str) -> str:
    """``"1 schedule"``, ``"2 schedules"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
