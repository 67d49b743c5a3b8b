"""JVM options for the short-lived JVMs a verify section starts (TLC, Spark drivers, PyFlink).

Tiered compilation stopped at C1 (``-XX:TieredStopAtLevel=1``) nearly halves the CPU of such
JVMs (TLC on ``cic-hmnr-small``: 6.8 → 3.5 CPU s). A section process calls
:func:`use_short_jvm_options` with the variable its JVM's launcher reads; timed measurements and
TLC's large bounds keep the defaults. See docs/internals/verify.md#jvm-options-rollchecksections_jvm.
"""

from __future__ import annotations

import os

__all__ = ["SHORT_JVM_OPTIONS", "use_short_jvm_options"]

#: The option (C1 only); see the module docstring.
SHORT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

_VARIABLES = ("JAVA_TOOL_OPTIONS", "SPARK_SUBMIT_OPTS", "JVM_ARGS")


def use_short_jvm_options(variable: str) -> None:
    """Add :data:`SHORT_JVM_OPTIONS` to ``variable`` in this process's environment (once).

    ``ROLLCHECK_JVM_DEFAULTS=1`` turns it off (the JVMs' own defaults, e.g. to compare).

    Examples
    --------
    >>> import os
    >>> old = os.environ.pop("JVM_ARGS", None)
    >>> use_short_jvm_options("JVM_ARGS"); use_short_jvm_options("JVM_ARGS")
    >>> os.environ["JVM_ARGS"] == SHORT_JVM_OPTIONS or os.environ.get("ROLLCHECK_JVM_DEFAULTS") == "1"
    True
    >>> _ = os.environ.pop("JVM_ARGS") if old is None else os.environ.update(JVM_ARGS=old)
    """
    if variable not in _VARIABLES:
        raise ValueError(f"unknown JVM options variable {variable!r}; one of {_VARIABLES}")
    if os.environ.get("ROLLCHECK_JVM_DEFAULTS") == "1":
        return
    prev = os.environ.get(variable, "")
    if SHORT_JVM_OPTIONS not in prev.split():
        os.environ[variable] = f"{prev} {SHORT_JVM_OPTIONS}".strip()
