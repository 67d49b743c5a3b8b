"""The hunt's engine-neutral core: programs and fault schedules drawn from grammars, run as cells.

See :mod:`rollcheck.infra.hunt.draw` (a seeded draw from a Hypothesis strategy).
"""

from rollcheck.infra.hunt.draw import draw, draw_seed

__all__ = ["draw", "draw_seed"]
