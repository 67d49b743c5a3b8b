"""The chaos matrix's engine-neutral core: one implementation for every engine.

A *chaos matrix* runs one recorded, replayed run per *cell* (a configuration of an engine under
one failure) and shows the table. Everything that does not depend on the engine lives here, one
concept per module:

- :mod:`~rollcheck.infra.matrix.cells` — what a cell must say about itself (its table row and
  column, its file stem) and the table's axes;
- :mod:`~rollcheck.infra.matrix.document` — a cell's JSON entry (one set of keys for every
  engine), the ``summary``, the matrix's verdict (from :func:`rollcheck.pyimpl.verdict.decide`
  only) and the atomic writing of ``matrix.json``;
- :mod:`~rollcheck.infra.matrix.classify` — a cell's verdict and attribution
  (``expected_by_engine``, ``attributed_to``, ``reason``: :mod:`rollcheck.pyimpl.attribution`);
- :mod:`~rollcheck.infra.matrix.adapter` — what an engine supplies (:class:`EngineAdapter`:
  recording, replay, failure points, witness, the reproducer);
- :mod:`~rollcheck.infra.matrix.runner` — child processes bounded in time that die with the
  matrix (:class:`ChildRunner`);
- :mod:`~rollcheck.infra.matrix.cost` — what a cell costs: wall and CPU seconds of every process
  it ran (:class:`TreeCpu`, :class:`Usage`);
- :mod:`~rollcheck.infra.matrix.run` — :func:`run_matrix`: planning order, shared preparations,
  ``jobs`` cells at a time, retries, Ctrl-C / SIGTERM handling (children die, nothing half-written);
- :mod:`~rollcheck.infra.matrix.html` and :mod:`~rollcheck.infra.matrix.table` — the HTML table
  and the terminal table (one of each for every engine);
- :mod:`~rollcheck.infra.matrix.shrink` — the minimiser's searches (fewest records by bisection,
  fewest batches and rows by halving);
- :mod:`~rollcheck.infra.matrix.reproducer` — running a reproducer script once, as a user would
  (with ``--engine-version``: on the release under test and on the reference release).

Why here, in ``pyimpl``
-----------------------
The engines' adapters (``rollcheck.spark_replay.matrix``, ``rollcheck.flink_replay.matrix``) may
import only ``rollcheck.pyimpl`` (the layering contracts of ``pyproject.toml``), and the matrix
must also run from a user's test suite (``rollcheck.testing.check_query``) and from ``rollcheck
verify``. A core in the CLI layer would leave the adapters unable to use it and force every caller
through the CLI; a core in ``pyimpl`` imports no engine (it knows cells, reports and files only),
so every layer above can use it and a third engine's matrix is one more adapter module.

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
    "render_html", "write_html",
    "run_reproducer", "run_on_releases", "reproduced_words",
    "run_matrix",
    "ChildRunner", "TreeCpu", "Usage",
    "bisect_fewest", "shrink_batches",
    "cell_word", "cost_words", "terminal_table",
]
