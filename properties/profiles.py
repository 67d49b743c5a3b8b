"""Hypothesis profiles and the seed: ``ci`` (fast, ``make test``) and ``verify`` (thorough).

Hypothesis knows the profiles as ``rollcheck-ci`` and ``rollcheck-verify``; :func:`seed` reads
``ROLLCHECK_SEED`` (unset or empty: derandomised). See docs/internals/properties.md#profiles.

Examples
--------
>>> hypothesis_name("ci"), hypothesis_name("rollcheck-verify")
('rollcheck-ci', 'rollcheck-verify')
>>> PROFILES["ci"], PROFILES["verify"]
(60, 600)
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "PROFILES",
    "PREFIX",
    "active_profile",
    "hypothesis_name",
    "short_name",
    "profile_settings",
    "registered",
    "load_profile",
    "seed",
    "seed_text",
    "pin_constants",
]

#: Examples per property, by the name users type.
PROFILES = {"ci": 60, "verify": 600}
#: Prefix of the names rollcheck registers with Hypothesis.
PREFIX = "rollcheck-"
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def seed() -> int | None:
    """The seed from ``ROLLCHECK_SEED``; None (derandomised) when unset or empty.

    Raises
    ------
    InvalidInputError
        If the variable holds something other than an integer.

    Examples
    --------
    >>> seed_text(None), seed_text(7)
    ('derandomised', '7')
    """
    raw = os.environ.get("ROLLCHECK_SEED", "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidInputError(f"must be an integer (or empty for derandomised runs), got {raw!r}",
                                location="ROLLCHECK_SEED") from None


def seed_text(value: int | None) -> str:
    """How runners print a seed: the integer, or ``derandomised``."""
    return "derandomised" if value is None else str(value)


def _derandomize() -> bool:
    try:
        return seed() is None
    except InvalidInputError:  # reported where the seed is used (the CLI exits 2 there)
        return True


def pin_constants() -> bool:
    """Keep Hypothesis from drawing the literals of the modules loaded so far. Idempotent.

    The seed alone then decides the examples (not which modules happen to be imported).

    Hypothesis (6.131 and later) collects the constants of every *local* module in ``sys.modules``
    into a pool it draws from now and then; it has no setting to turn that off, so its collector is
    replaced by one that returns an empty pool (the built-in constants stay). Returns False when
    the installed Hypothesis has no such collector (nothing to pin).

    Examples
    --------
    >>> pin_constants(), pin_constants()
    (True, True)
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        return False
    collector = getattr(providers, "_get_local_constants", None)
    if collector is None or not hasattr(providers, "Constants"):
        return False
    if getattr(collector, "_rollcheck_pinned", False):
        return True
    empty = providers.Constants()

    def no_local_constants() -> Any:
        return empty

    no_local_constants._rollcheck_pinned = True  # type: ignore[attr-defined]
    providers._get_local_constants = no_local_constants
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if cache is not None:  # choices cached from a pool that held local constants
        cache.cache.clear()
    return True


for _name, _n in PROFILES.items():
    settings.register_profile(
        PREFIX + _name, max_examples=_n, deadline=None, derandomize=_derandomize(),
        suppress_health_check=_SUPPRESS, print_blob=True, database=None,
        report_multiple_bugs=False,
    )


def short_name(name: str | None) -> str:
    """``ci`` or ``verify`` for a name users type or a registered name; unknown names give ``ci``."""
    if name and name.startswith(PREFIX):
        name = name[len(PREFIX):]
    return name if name in PROFILES else "ci"


def hypothesis_name(name: str | None = None) -> str:
    """The Hypothesis profile name for ``name`` (``ci`` → ``rollcheck-ci``); default: the active one."""
    return PREFIX + short_name(name or active_profile())


def registered(name: str) -> str:
    """The name Hypothesis knows ``name`` by: ``ci``/``verify`` are prefixed, others kept as given."""
    return PREFIX + name if name in PROFILES else name


def profile_settings(name: str | None = None) -> settings:
    """The :class:`hypothesis.settings` of rollcheck's profile ``name`` (not loaded globally).

    It pins the constant pool (:func:`pin_constants`).
    """
    pin_constants()
    return settings.get_profile(hypothesis_name(name))


def active_profile() -> str:
    """The short profile name from ``ROLLCHECK_PROFILE`` (default and fallback ``ci``)."""
    return short_name(os.environ.get("ROLLCHECK_PROFILE", "ci"))


def load_profile(name: str | None = None) -> str:
    """Activate rollcheck's profile ``name`` (or the environment's) and return its short name."""
    short = short_name(name or active_profile())
    pin_constants()
    settings.load_profile(PREFIX + short)
    return short
