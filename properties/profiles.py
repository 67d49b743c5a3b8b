"""Hypothesis profiles: ``ci`` (fast, for ``make test``) and ``verify`` (thorough, ``make verify``).

The active profile comes from the environment variable ``ROLLCHECK_PROFILE`` (default ``ci``).
Both are derandomised from a seed (``ROLLCHECK_SEED``, default 0) so that the same seed gives the
same examples; the seed is printed by the runners.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROFILES", "active_profile", "load_profile", "seed"]

PROFILES = {"ci": 60, "verify": 600}
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

# Without ROLLCHECK_SEED the runs are derandomised (a fixed seed per property); with it, the
# runners apply that seed to every property (``rollcheck.properties.registry.run_property``).
_DERANDOMIZE = not os.environ.get("ROLLCHECK_SEED", "").strip()
for _name, _n in PROFILES.items():
    settings.register_profile(
        _name, max_examples=_n, deadline=None, derandomize=_DERANDOMIZE,
        suppress_health_check=_SUPPRESS, print_blob=True, database=None,
        report_multiple_bugs=False,
    )


def active_profile() -> str:
    name = os.environ.get("ROLLCHECK_PROFILE", "ci")
    return name if name in PROFILES else "ci"


def seed() -> int | None:
    """The seed from ``ROLLCHECK_SEED``, or None for derandomised runs."""
    try:
        return int(os.environ["ROLLCHECK_SEED"])
    except (KeyError, ValueError):
        return None


def load_profile(name: str | None = None) -> str:
    """Activate ``name`` (or the environment's profile) and return its name."""
    name = name or active_profile()
    settings.load_profile(name)
    return name
