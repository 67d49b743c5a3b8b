"""rollcheck: verification and property testing of rollback-recovery algorithms.

The ``rollcheck`` console command lives in :mod:`rollcheck.cli`; the reference implementations in
:mod:`pyimpl`, the Hypothesis/Z3 properties in :mod:`properties`, the TLA+ models and TLC runner in
:mod:`tla`, and the Spark record/replay harness in :mod:`spark_replay`.
"""

__version__ = "0.1.0"
