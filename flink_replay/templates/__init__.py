"""Scripts rollcheck writes out, kept as modules of their own so that ruff and mypy check them.

``flink_reproducer.py`` is the standalone Flink reproducer
(:func:`rollcheck.flink_replay.reproducer.write_reproducer` fills in its placeholder lines). It
imports only pyflink and the standard library; importing it runs nothing.
"""

__all__: list[str] = []
