"""The chaos matrix's engine-neutral core: one implementation for every engine.

A *chaos matrix* runs one recorded, replayed run per *cell* (a configuration of an engine under
one failure) and shows the table. This package holds everything that does not depend on the
engine, one concept per module (cells, document, classify, adapter, runner, cost, run, html,
table, shrink, finding, reproducer); an engine supplies an :class:`~.adapter.EngineAdapter`.
See docs/internals/infra.md#matrix.

References
----------
``specs/verdicts.md`` (the one verdict rule); ``docs/spark-matrix.md``; ``docs/flink.md``.
"""

from rollcheck.infra.matrix.adapter import EngineAdapter, Prepared, Recording, Replayed
from rollcheck.infra.matrix.cells import GenericCell, MatrixCell, axes, cell_key, entry_key
from rollcheck.infra.matrix.classify import classify
from rollcheck.infra.matrix.cost import TreeCpu, Usage
from rollcheck.infra.matrix.document import (
    CELL_KEYS,
    SUMMARY_KEYS,
    base_entry,
    cell_check,
    matrix_verdict,
    summarize,
    write_document,
)
from rollcheck.infra.matrix.finding import (
    MINIMISED_KEYS,
    Minimised,
    attempt,
    minimised_words,
)
from rollcheck.infra.matrix.html import render_html, write_html
from rollcheck.infra.matrix.reproducer import reproduced_words, run_on_releases, run_reproducer
from rollcheck.infra.matrix.run import run_matrix
from rollcheck.infra.matrix.runner import ChildRunner
from rollcheck.infra.matrix.shrink import bisect_fewest, shrink_batches
from rollcheck.infra.matrix.table import cell_word, cost_words, terminal_table

__all__ = [
    "EngineAdapter", "Prepared", "Recording", "Replayed",
    "GenericCell", "MatrixCell", "axes", "cell_key", "entry_key",
    "classify",
    "CELL_KEYS", "SUMMARY_KEYS", "base_entry", "cell_check", "matrix_verdict", "summarize", "write_document",
    "Minimised", "MINIMISED_KEYS", "attempt", "minimised_words",
    "render_html", "write_html",
    "run_reproducer", "run_on_releases", "reproduced_words",
    "run_matrix",
    "ChildRunner", "TreeCpu", "Usage",
    "bisect_fewest", "shrink_batches",
    "cell_word", "cost_words", "terminal_table",
]
