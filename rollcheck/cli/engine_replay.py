"""The one function that chooses and runs a built-in engine's replay of its trace.

``rollcheck spark replay``, ``rollcheck flink replay`` and ``rollcheck check trace`` on a trace a
built-in recorder wrote all call :func:`replay_engine_trace`, so the three cannot drift apart: the
same checks, verdict and exit code on the same file (``tests/test_check_trace_engines.py``). It
lives in a module of its own because ``check_trace`` and the engine commands must not import each
other (import-linter forbids import cycles between the modules of ``rollcheck.cli``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_TLC_TIMEOUT", "ENGINES", "engine_of", "flink_tlc_validator", "replay_engine_trace"]

#: The built-in engines, by the header ``source`` their recorders write (``spark_replay.jobs.wordcount``,
#: ``.query.record`` and ``.jobs.nhop``; ``flink_replay.recording.record``; the Spark sources before the prefix rule):
#: ``check trace`` runs that engine's replay on them.
ENGINES = {"spark": "spark", "spark-wordcount": "spark", "spark-query": "spark", "spark-nhop": "spark",
           "flink": "flink"}

#: Seconds per TLC run of an engine's replay (``check trace --tlc-timeout``'s default).
DEFAULT_TLC_TIMEOUT = 300.0


def engine_of(header: dict[str, Any]) -> str | None:
    """The built-in engine (``spark``, ``flink``) whose recorder wrote a trace with this header.

    >>> engine_of({"source": "spark-nhop"}), engine_of({"source": "flink"}), engine_of({"source": "toy"})
    ('spark', 'flink', None)
    """
    src = header.get("source")
    return ENGINES.get(src) if isinstance(src, str) else None


def flink_tlc_validator(timeout: float = DEFAULT_TLC_TIMEOUT) -> Callable[[str | Path], Any]:
    """``validate_with_tlc`` bound to rollcheck's TLC runner and its ``ChandyLamport`` model."""
    from importlib import resources

    from rollcheck.flink_replay.checks.tlc import validate_with_tlc
    from rollcheck.tla.runner import run_tlc

    cl = Path(str(resources.files("rollcheck.tla.models").joinpath("ChandyLamport.tla")))
    return lambda path: validate_with_tlc(path, run_tlc, cl, timeout=timeout)


def replay_engine_trace(path: str, *, engine: str | None = None, header: dict[str, Any] | None = None,
                        tlc: bool = True, tlc_timeout: float = DEFAULT_TLC_TIMEOUT) -> Any:
    """Run the replay of the engine that wrote the trace at ``path``; its report.

    Parameters
    ----------
    path : str
        The trace file.
    engine : {"spark", "flink"}, optional
        The engine whose replay runs (``rollcheck ENGINE replay`` names it); default: the one the
        header's ``source`` names (:func:`engine_of`).
    header : dict, optional
        The trace's header line, when the caller has read it already (read here when needed).
    tlc : bool
        TLC validation where the engine's replay has it (``--no-tlc`` turns it off): HMNR
        message-passing segments of a Spark trace, aligned barrier snapshots of a Flink one.
    tlc_timeout : float
        Seconds per TLC run.

    Returns
    -------
    rollcheck.pyimpl.verdict.Report

    Raises
    ------
    rollcheck.pyimpl.errors.InvalidInputError
        An unreadable trace, or one whose header is not the engine's.
    ValueError
        No built-in engine wrote the trace (and none was named).
    """
    if engine is None:
        header = _read_header(path) if header is None else header
        engine = engine_of(header)
    if engine == "spark":
        from rollcheck.spark_replay.replay.conformance import replay_file
        from rollcheck.spark_replay.replay.tlc import tlc_option

        return replay_file(path, tlc=(lambda protocol: tlc_option(protocol, tlc_timeout)) if tlc else None)
    if engine == "flink":
        from rollcheck.flink_replay.checks.replay import check_flink_header, replay

        header = _read_header(path) if header is None else header
        check_flink_header(header, path)
        if header.get("job") == "module":  # a user's job: the checks of the shared verdict model
            from rollcheck.flink_replay.checks.user_replay import replay_job

            return replay_job(path)
        return replay(path, tlc=flink_tlc_validator(tlc_timeout) if tlc else None)
    src = header.get("source") if header is not None else None
    raise ValueError(f"no built-in engine {engine!r} writes source {src!r}")


def _read_header(path: str) -> dict[str, Any]:
    from rollcheck.pyimpl.traces.reader import read_header

    return read_header(path)
