"""Protocol names and lookup: ``get_protocol(name)``.

References
----------
``specs/protocols.md``.
"""

from __future__ import annotations

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols.base import Protocol
from rollcheck.pyimpl.protocols.bcs import BCS
from rollcheck.pyimpl.protocols.hmnr import HMNR
from rollcheck.pyimpl.protocols.uc import UC
from rollcheck.pyimpl.protocols.variants import SAFE_VARIANTS, UNSAFE_VARIANTS

__all__ = ["PROTOCOLS", "VARIANTS", "get_protocol"]

#: The reference protocols.
PROTOCOLS: tuple[str, ...] = ("uc", "bcs", "hmnr")
#: The mutation catalogue's variants (unsafe ones first).
VARIANTS: tuple[str, ...] = tuple(v.name for v in UNSAFE_VARIANTS + SAFE_VARIANTS)

_CLASSES: dict[str, type[Protocol]] = {
    "uc": UC,
    "bcs": BCS,
    "hmnr": HMNR,
    **{v.name: v for v in UNSAFE_VARIANTS + SAFE_VARIANTS},
}


def get_protocol(name: str) -> Protocol:
    """A fresh protocol object by name (a reference protocol or a variant).

    Raises
    ------
    InvalidInputError
        Naming the unknown protocol and the known ones.

    Examples
    --------
    >>> get_protocol("hmnr").name
    'hmnr'
    >>> get_protocol("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: unknown protocol 'nope' (known: uc, bcs, hmnr; variants: ...)
    """
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidInputError(
            f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)}; variants: {', '.join(VARIANTS)})"
        )
    return cls()
