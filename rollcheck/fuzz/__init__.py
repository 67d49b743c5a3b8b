"""The fuzzer of rollcheck's own CLI inputs: a Hypothesis mutator of valid documents and a runner.

It is not part of the testing API of :mod:`rollcheck.testing`. Every input format and every
numeric option of rollcheck must meet one contract on bad input
(``specs/cli.md``): exit 2 with **one** line naming the file (or flag) and the place, within a
bounded time, nothing written, never a traceback, never exit 4. Valid input may give 0, 1 or 3.

- :mod:`rollcheck.fuzz.formats` — what is fuzzed: :data:`FORMATS`, one entry per input format
  (a :class:`FileFormat`: valid seeds and the commands that read it) or option family
  (:class:`OptionsFormat`), and :data:`TLA_VALUES` for :func:`rollcheck.tla.values.parse_value`;
- :mod:`rollcheck.fuzz.mutate` — how: :func:`mutated_document`, :func:`mutated_options`,
  :func:`mutated_text`;
- :mod:`rollcheck.fuzz.run` — one input run in-process (:func:`run_cli`) and checked against the
  contract (:func:`check_outcome`, :func:`run_file_input`, ...).

``tests/test_fuzz.py`` runs a ci-sized fuzz of every entry; ``rollcheck verify`` (section
``fuzz``) runs ≥ 10^4 inputs per format and reports the counts.
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
