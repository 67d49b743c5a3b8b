"""Real Apache Flink runs recorded and replayed against the coordinated-snapshot model.

``rollcheck flink record`` runs a keyed word count with aligned or unaligned checkpoints and an
injected failure in a separate PyFlink environment (:mod:`.environment`, :mod:`.job`), writes a
``rollcheck.trace/1`` file (:mod:`.recording`), and ``rollcheck flink replay`` checks it
(:mod:`.checks`). See ``docs/flink.md``.
"""

__all__: list[str] = []
