"""The hunt's engine-neutral core: programs and fault schedules drawn from grammars, run as cells.

- :mod:`~rollcheck.infra.hunt.adapter`: what an engine gives the hunt (:class:`HuntAdapter`,
  :class:`Program`, :class:`HuntCell`, :class:`CellOutcome`);
- :mod:`~rollcheck.infra.hunt.draw`: a seeded draw from a Hypothesis strategy;
- :mod:`~rollcheck.infra.hunt.store`: ``DIR/hunt.sqlite``, the state that survives a kill;
- :mod:`~rollcheck.infra.hunt.loop`: the loop (generation, cells, progress, budget);
- :mod:`~rollcheck.infra.hunt.signature`, :mod:`~rollcheck.infra.hunt.minimise`,
  :mod:`~rollcheck.infra.hunt.findings`, :mod:`~rollcheck.infra.hunt.report`: from a candidate
  to a minimised, confirmed, triaged finding with its reproducer and report draft;
- :mod:`~rollcheck.infra.hunt.document`: the JSON document and the exit code.
"""

from rollcheck.infra.hunt.adapter import (
    CHECK_STATES,
    VERDICTS,
    CellOutcome,
    HuntAdapter,
    HuntCell,
    Program,
)
from rollcheck.infra.hunt.budget import Budget, format_seconds, parse_duration
from rollcheck.infra.hunt.document import build_document, exit_code, write_document
from rollcheck.infra.hunt.draw import draw, draw_seed
from rollcheck.infra.hunt.loop import Hunt, HuntOptions
from rollcheck.infra.hunt.signature import is_candidate, signature, violated_checks
from rollcheck.infra.hunt.store import HuntStore

__all__ = [
    "CHECK_STATES",
    "VERDICTS",
    "Budget",
    "CellOutcome",
    "Hunt",
    "HuntAdapter",
    "HuntCell",
    "HuntOptions",
    "HuntStore",
    "Program",
    "build_document",
    "draw",
    "draw_seed",
    "exit_code",
    "format_seconds",
    "is_candidate",
    "parse_duration",
    "signature",
    "violated_checks",
    "write_document",
]
