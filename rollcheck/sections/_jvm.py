"""JVM options for the short-lived JVMs a verify section starts (TLC, Spark drivers, PyFlink).

Most JVMs of a verify run live for seconds to a minute on small inputs: their CPU goes to start-up,
class loading and compiling, not to long-running code. Tiered compilation stopped at C1
(``-XX:TieredStopAtLevel=1``) skips the optimising compiler, whose threads cost more CPU there
than they save. Measured on the shared 2-core machine (CPU seconds of the whole process tree,
default → C1 only): TLC on ``cic-hmnr-small`` (13 003 states) 6.8 → 3.5; a Spark session with
three small jobs 19.5 → 11.9; a Flink word count recording (1 500 records, a task failure)
15.7 → 10.6.

A section process calls :func:`use_short_jvm_options` with the environment variable the JVM's
launcher reads (``JAVA_TOOL_OPTIONS`` for TLC, ``SPARK_SUBMIT_OPTS`` for Spark's driver,
``JVM_ARGS`` for PyFlink's local cluster): the JVMs it starts from then on, child processes'
included, get the option. The scheduler runs every section (part) in a process of its own, so
this never reaches another section. Timed measurements (the Flink recovery-time and utilization
sweeps) and long model-checking runs (TLC's large bounds) keep the JVM's defaults.
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
