"""The fuzzer of rollcheck's own CLI inputs: a Hypothesis mutator of valid documents and a runner.

Not part of the testing API. On bad input every format and numeric option must exit 2 with
**one** line naming the file (or flag), in time, writing nothing (``specs/cli.md``).
:mod:`~rollcheck.fuzz.formats` says what is fuzzed (:data:`FORMATS`), :mod:`~rollcheck.fuzz.mutate`
how, and :mod:`~rollcheck.fuzz.run` runs and checks one input. See docs/internals/fuzz.md.
"""

from rollcheck.fuzz.formats import (
    FORMATS,
    TLA_VALUES,
    FileFormat,
    OptionsFormat,
    ValueFormat,
    special_inputs,
)
from rollcheck.fuzz.mutate import mutated_document, mutated_options, mutated_text
from rollcheck.fuzz.run import (
    TIME_LIMIT,
    Outcome,
    check_outcome,
    run_cli,
    run_file_input,
    run_options_input,
    run_value_input,
)

__all__ = [
    "FileFormat",
    "OptionsFormat",
    "ValueFormat",
    "FORMATS",
    "TLA_VALUES",
    "TIME_LIMIT",
    "Outcome",
    "mutated_document",
    "mutated_options",
    "mutated_text",
    "run_cli",
    "check_outcome",
    "run_file_input",
    "run_options_input",
    "run_value_input",
    "special_inputs",
]
