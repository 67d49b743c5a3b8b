"""The fuzz harness of the tests: see :mod:`rollcheck.fuzz` (shipped with rollcheck so
that ``rollcheck verify`` runs the same harness at scale).

To fuzz a new input format, add one :class:`FileFormat` entry to ``FORMATS`` there: valid seed
documents and the commands that read the file; ``tests/test_fuzz.py`` and verify's ``fuzz``
section pick it up.
"""

from rollcheck.fuzz import (  # noqa: F401
    FORMATS,
    TLA_VALUES,
    FileFormat,
    OptionsFormat,
    Outcome,
    ValueFormat,
    check_outcome,
    mutated_document,
    mutated_options,
    mutated_text,
    run_cli,
    run_file_input,
    run_options_input,
    run_value_input,
)
