r"""Running a finding's reproducer once, as a user would, and whether it showed the finding.

A reproducer is a standalone script an engine adapter writes from its template (it imports only
the engine's own Python package); the matrix runs it once in isolated mode (``python -I``: no
current folder on the path, so it cannot lean on rollcheck) and keeps the lines it printed about
lost or duplicated rows. On a matrix with ``--engine-version V`` it runs on V and on the reference
release R, each with its own environment's interpreter (:func:`run_on_releases`): the cell's
``reproducer_run`` is then keyed by release (``{"V": {...}, "R": {...}}``) and the tables say
"reproduced on V / not on R" (:func:`reproduced_words`).

Examples
--------
>>> import sys, tempfile, pathlib
>>> from rollcheck.infra.matrix.runner import ChildRunner
>>> with tempfile.TemporaryDirectory() as d:
...     s = pathlib.Path(d) / "r.py"
...     _ = s.write_text("import sys\nprint('LOST row: 1')\nsys.exit(1)\n")
...     r = run_reproducer([sys.executable, "-I", str(s)], ChildRunner().run, 60, pathlib.Path(d) / "r.log")
>>> r["reproduced"], r["exit"], r["shows"]
(True, 1, ['LOST row: 1'])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["run_reproducer", "run_on_releases", "per_release", "reproduced_words", "SHOWS"]

#: How a reproducer's output line that shows the finding begins (Spark's and Flink's templates).
SHOWS = ("LOST row", "DUPLICATED row", "KEY ")


def run_reproducer(argv: list[str], run: Callable[[list[str], float, Path], tuple[int | None, str]],
                   timeout: float, log: Path, shows: Sequence[str] = SHOWS) -> dict[str, Any]:
    """Run a reproducer once and say whether it showed the finding.

    ``run(argv, timeout, log) -> (exit status or None, stdout)`` is a
    :meth:`ChildRunner.run <rollcheck.infra.matrix.runner.ChildRunner.run>`. Returns
    ``{"exit", "seconds", "shows", "reproduced"}``: it showed the finding when it exited 1 and
    printed at least one line beginning with one of ``shows``.

    Parameters
    ----------
    argv : list of str
        The reproducer's command.
    run : callable
        Runs it (above).
    timeout : float
        Seconds it may take.
    log : Path
        Its log file.
    shows : sequence of str, optional
        The prefixes of the lines that show a finding.
    """
    t0 = time.perf_counter()
    rc, out = run(argv, timeout, log)
    lines = [ln for ln in out.splitlines() if ln.startswith(tuple(shows))]
    return {"exit": rc, "seconds": round(time.perf_counter() - t0, 1), "shows": lines,
            "reproduced": rc == 1 and bool(lines)}


def run_on_releases(argv_for: Callable[[str], list[str]], releases: Sequence[str],
                    run: Callable[[list[str], float, Path], tuple[int | None, str]], timeout: float,
                    log_for: Callable[[str], Path], shows: Sequence[str] = SHOWS) -> dict[str, dict[str, Any]]:
    """Run a reproducer once on each release: the one under test first, then the reference.

    ``argv_for(release)`` is its command with that release's interpreter, ``log_for(release)``
    its log. Returns ``{release: run}`` (each :func:`run_reproducer`'s result; a release named
    twice runs once).

    Parameters
    ----------
    argv_for : callable
        Release -> its command.
    releases : sequence of str
        The releases, the one under test first.
    run : callable
        Runs a command (as :func:`run_reproducer`).
    timeout : float
        Seconds each run may take.
    log_for : callable
        Release -> its log file.
    shows : sequence of str, optional
        The prefixes of the lines that show a finding.

    Examples
    --------
    >>> fake = lambda argv, t, log: (1, "LOST row: 3") if argv[0] == "py-2.2.1" else (0, "")
    >>> got = run_on_releases(lambda r: [f"py-{r}", "-I", "r.py"], ["2.2.1", "2.3.0"], fake, 60,
    ...                       lambda r: Path(f"r.{r}.log"))
    >>> {r: x["reproduced"] for r, x in got.items()}
    {'2.2.1': True, '2.3.0': False}
    >>> reproduced_words(got)
    'reproduced on 2.2.1 / not on 2.3.0'
    """
    return {r: run_reproducer(argv_for(r), run, timeout, log_for(r), shows) for r in dict.fromkeys(releases)}


def per_release(run: Mapping[str, Any] | None) -> bool:
    """Whether a cell's ``reproducer_run`` is keyed by release (:func:`run_on_releases`) rather than one run."""
    if not run:
        return False
    return "reproduced" not in run and all(isinstance(v, Mapping) for v in run.values())


def reproduced_words(run: Mapping[str, Any] | None) -> str:
    """What the tables say of a cell's ``reproducer_run``.

    ``"shows it"`` / ``"did NOT show it"`` for one run, ``"reproduced on V / not on R"`` (and the
    like) for runs keyed by release; ``""`` for none.

    Examples
    --------
    >>> reproduced_words({"reproduced": False, "exit": 0})
    'did NOT show it'
    >>> reproduced_words({"3.5.3": {"reproduced": True}, "3.5.9": {"reproduced": True}})
    'reproduced on 3.5.3 / reproduced on 3.5.9'
    """
    if not run:
        return ""
    if not per_release(run):
        return "shows it" if run.get("reproduced") else "did NOT show it"
    words = []
    for i, (release, r) in enumerate(run.items()):
        if r.get("reproduced"):
            words.append(f"reproduced on {release}")
        else:
            words.append(f"not on {release}" if i else f"not reproduced on {release}")
    return " / ".join(words)
