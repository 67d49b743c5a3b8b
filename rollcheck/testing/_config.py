"""Session-wide defaults set by the pytest plugin, and the reports it summarises.

:func:`rollcheck.testing.assert_protocol_safe` reads :data:`PROFILE` and :data:`OUT` when its caller
passes none; the plugin (``rollcheck.pytest_plugin``) sets them from ``--rollcheck-profile`` and
``--rollcheck-out`` and prints the :data:`REPORTS` at the end of the session.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROFILE", "OUT", "REPORTS", "configure", "record"]

#: Profile name (``ci``/``verify``) or None for the default.
PROFILE: str | None = None
#: Directory for counterexamples and pictures, or None for a temporary one.
OUT: str | None = None
#: Reports of the checks run in this session, in order.
REPORTS: list[Any] = []


def configure(profile: str | None, out: str | None) -> None:
    """Set the session defaults (the pytest plugin calls this once).

    Parameters
    ----------
    profile : str, optional
        The random budget, ``ci`` or ``verify`` (``--rollcheck-profile``).
    out : str, optional
        The artifacts folder (``--rollcheck-out``).
    """
    global PROFILE, OUT
    PROFILE, OUT = profile, out
    REPORTS.clear()


def record(report: Any) -> None:
    """Remember a report for the end-of-session summary."""
    REPORTS.append(report)
