"""Running a finding's reproducer once, as a user would, and whether it showed the finding.

A reproducer is a standalone script an engine adapter writes from its template (it imports only
the engine's own Python package); the matrix runs it once in isolated mode (``python -I``: no
current folder on the path, so it cannot lean on rollcheck) and keeps the lines it printed about
lost or duplicated rows.

Examples
--------
>>> import sys, tempfile, pathlib
>>> from rollcheck.pyimpl.matrix.runner import ChildRunner
>>> with tempfile.TemporaryDirectory() as d:
...     s = pathlib.Path(d) / "r.py"
...     _ = s.write_text("import sys\\nprint('LOST row: 1')\\nsys.exit(1)\\n")
...     r = run_reproducer([sys.executable, "-I", str(s)], ChildRunner().run, 60, pathlib.Path(d) / "r.log")
>>> r["reproduced"], r["exit"], r["shows"]
(True, 1, ['LOST row: 1'])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["run_reproducer", "SHOWS"]

#: How a reproducer's output line that shows the finding begins (Spark's and Flink's templates).
SHOWS = ("LOST row", "DUPLICATED row", "KEY ")


def run_reproducer(argv: list[str], run: Callable[[list[str], float, Path], tuple[int | None, str]],
                   timeout: float, log: Path, shows: Sequence[str] = SHOWS) -> dict[str, Any]:
    """Run a reproducer with ``run(argv, timeout, log) -> (exit status or None, stdout)`` (a
    :meth:`ChildRunner.run <rollcheck.pyimpl.matrix.runner.ChildRunner.run>`); return ``{"exit",
    "seconds", "shows", "reproduced"}`` (it showed the finding when it exited 1 and printed at
    least one line beginning with one of ``shows``)."""
    t0 = time.perf_counter()
    rc, out = run(argv, timeout, log)
    lines = [ln for ln in out.splitlines() if ln.startswith(tuple(shows))]
    return {"exit": rc, "seconds": round(time.perf_counter() - t0, 1), "shows": lines,
            "reproduced": rc == 1 and bool(lines)}
