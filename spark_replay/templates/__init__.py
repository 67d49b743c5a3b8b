"""Scripts rollcheck writes out, kept as modules of their own so that ruff and mypy check them.

``spark_reproducer.py`` is the standalone Spark reproducer
(:func:`rollcheck.spark_replay.matrix.reproducer.reproducer_source` fills in its placeholder lines). It
imports only pyspark and the standard library; importing it runs nothing.
"""

__all__: list[str] = []
