"""The ``rollcheck`` pytest plugin (entry point ``pytest11``): check your protocol in your test suite.

Options
-------
``--rollcheck-profile ci|verify``
    The budget of :func:`rollcheck.testing.assert_protocol_safe` (60 or 600 schedules) when a test
    does not pass one; default ``$ROLLCHECK_PROFILE`` or ``ci``.
``--rollcheck-out DIR``
    Where failing checks save their counterexample (``rollcheck.pattern/1`` JSON) and its picture
    (PNG); default: a temporary directory per check.

The plugin never loads or replaces a Hypothesis profile: rollcheck's own are registered as
``rollcheck-ci`` and ``rollcheck-verify`` and only used for rollcheck's checks, so profiles the user
registered (``ci`` included) stay as they are. At the end of the session every protocol checked is
listed with its verdict, forced-checkpoint rate and saved files, and every engine slice of
:func:`~rollcheck.testing.check_query` / :func:`~rollcheck.testing.check_job` (and their
``assert_*_exactly_once``) with its verdict, its cells' summary, its folder and table, and the
cells that are not conformant.

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
    group = parser.getgroup("rollcheck", "rollcheck: checking your own checkpointing protocol")
    group.addoption("--rollcheck-profile", choices=["ci", "verify"], default=None,
                    dest="rollcheck_profile",
                    help="budget of rollcheck's checks: ci = 60 schedules, verify = 600 "
                         "(default: $ROLLCHECK_PROFILE or ci)")
    group.addoption("--rollcheck-out", metavar="DIR", default=None, dest="rollcheck_out",
                    help="save counterexamples (.json) and pictures (.png) of failing rollcheck checks here")


def pytest_configure(config: Any) -> None:
    from rollcheck.testing import _config

    out = config.getoption("rollcheck_out", default=None)
    if out:
        out = os.path.abspath(out)  # tests may change the working directory
    _config.configure(config.getoption("rollcheck_profile", default=None), out)


@pytest.fixture
def rollcheck_out(request: Any, tmp_path: Any) -> str:
    """The directory where this test's rollcheck artifacts go (``--rollcheck-out`` or a tmp dir)."""
    from rollcheck.testing import _config

    return _config.OUT or str(tmp_path)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
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
    """A matrix slice of ``check_query`` / ``check_job``: verdict, summary, folder, table, and each
    cell that is not conformant."""
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
