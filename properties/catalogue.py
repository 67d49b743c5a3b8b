"""Running the mutation catalogue and saving its evidence.

The runner behind ``rollcheck mutants`` and the catalogue section of ``rollcheck verify``.

Each mutant runs in a forked checker with a time limit; a killed mutant's counterexample, reproducer
and picture are written under the output folder (``specs/theorems.md`` — the catalogue).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_TIMEOUT", "run_catalogue"]

DEFAULT_TIMEOUT = {"ci": 300.0, "verify": 1800.0}


def _files(spec: Any, o: Any, profile: str, seed: int | None, out: Path, pictures: bool) -> dict[str, Any]:
    """Write the counterexample, the reproducer and the picture of a killed mutant."""
    from rollcheck.properties.reproducer import reproducer_doc, write_reproducer
    from rollcheck.pyimpl.pattern import Pattern
    from rollcheck.pyimpl.patternio import atomic_write_text, dump_pattern

    out.mkdir(parents=True, exist_ok=True)
    rep = write_reproducer(out / f"{spec.name}.replay.json",
                           reproducer_doc(spec.name, o.killed_by, profile, seed, o.drawn, o.detail))
    cex = o.counterexample
    cex_path: Path = out / f"{spec.name}.json"
    if isinstance(cex, Pattern):
        dump_pattern(cex, cex_path)
    elif isinstance(cex, dict) and "format" in cex:
        atomic_write_text(cex_path, json.dumps(cex, indent=1, default=str) + "\n")
    else:  # parameters only: the reproducer is the file rollcheck reads back
        cex_path = rep
    png = None
    if pictures:
        from rollcheck.properties.pictures import draw_mutant

        png = str(draw_mutant(spec, o, out / f"{spec.name}.png"))
    return {"counterexample": str(cex_path), "reproducer": str(rep), "picture": png}


def _run_one(spec: Any, profile: str, out: Path, pictures: bool) -> dict[str, Any]:
    """Run one mutant and write its files; a plain, picklable record."""
    from rollcheck.properties.profiles import seed as env_seed

    seed = env_seed()
    o = spec.check(profile)
    rec: dict[str, Any] = {"verdict": o.verdict, "detail": o.detail, "examples": o.examples,
                           "ratio": o.ratio if o.verdict == "safe" else None,
                           "killed_by": o.killed_by, "counterexample": None, "reproducer": None, "picture": None}
    if o.verdict == "killed":
        try:
            rec.update(_files(spec, o, profile, seed, out, pictures))
        except Exception as e:  # the evidence could not be written: nothing is claimed
            rec.update(verdict="error", detail=f"{o.detail}; writing the reproducer/picture failed: "
                                               f"{type(e).__name__}: {e}")
    return rec


def _run_with_timeout(spec: Any, profile: str, out: Path, pictures: bool, timeout: float | None) -> dict[str, Any]:
    """Run one mutant in a forked child so that a hanging check cannot hang the run."""
    import multiprocessing as mp

    if timeout is None or "fork" not in mp.get_all_start_methods():
        return _run_one(spec, profile, out, pictures)
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            rec = _run_one(spec, profile, out, pictures)
        except Exception as e:
            rec = {"verdict": "error", "detail": f"the check crashed: {type(e).__name__}: {e}"}
        send.send(rec)
        send.close()

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    send.close()
    try:
        if recv.poll(timeout):
            return recv.recv()
        return {"verdict": "survived", "detail": f"no verdict within the {timeout:.0f} s limit"}
    except EOFError:
        return {"verdict": "error", "detail": f"the check died (exit code {proc.exitcode})"}
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        recv.close()


def run_catalogue(profile: str, out_dir: str | os.PathLike[str], only: Sequence[str] = (),
                  pictures: bool = True, log: Callable[[str], None] | None = None,
                  timeout: float | None = -1.0, areas: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Run every registered mutant (or those in ``only`` / of ``areas``) and return one record each.

    Each check runs in a forked child limited to ``timeout`` seconds (-1: the profile's default,
    None: in this process, no limit). A killed mutant always has a counterexample, a reproducer
    and a picture (unless ``pictures`` is False); if they cannot be written its verdict is "error".
    """
    from rollcheck.pyimpl.errors import InvalidInputError

    os.environ["ROLLCHECK_PROFILE"] = profile
    from rollcheck.properties.profiles import load_profile

    load_profile(profile)  # before the property modules are imported: Hypothesis reads it then
    from rollcheck.properties.mutation import load_all

    mutants = load_all()
    unknown = [n for n in only if n not in mutants]
    if unknown:
        raise InvalidInputError(f"unknown mutant(s) {', '.join(unknown)}", location="--only")
    out = Path(out_dir)
    if timeout is not None and timeout < 0:
        timeout = DEFAULT_TIMEOUT.get(profile, 300.0)
    if pictures:  # import once here: the forked children inherit it instead of importing it each
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot  # noqa: F401
    records = []
    for name, m in mutants.items():
        if (only and name not in only) or (areas and m.area not in areas):
            continue
        t0 = time.perf_counter()
        try:
            o = _run_with_timeout(m, profile, out, pictures, timeout)
        except Exception as e:  # a crash of the harness itself
            o = {"verdict": "error", "detail": f"the check crashed: {type(e).__name__}: {e}"}
        dt = time.perf_counter() - t0
        verdict = o["verdict"]
        if m.safe and verdict == "survived":
            verdict = "error"  # a safe variant's check that never came back proved nothing
        rec = {
            "name": name, "target": m.target, "area": m.area, "verdict": verdict,
            "killed_by": o.get("killed_by") if verdict == "killed" else None,
            "counterexample": o.get("counterexample"), "reproducer": o.get("reproducer"),
            "picture": o.get("picture"),
            "ratio": o.get("ratio") if verdict == "safe" else None,
            "safe": m.safe, "description": m.description, "detail": o.get("detail", ""),
            "examples": o.get("examples", 0), "seconds": round(dt, 2),
        }
        records.append(rec)
        if log:
            log(f"{name:34s} {verdict:9s} {dt:6.1f}s  {rec['detail'][:110]}")
    return records
