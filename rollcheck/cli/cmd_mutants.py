"""``rollcheck mutants [--profile ci|verify] [--out DIR] --json``: run the mutation catalogue.

Every ``rollcheck.properties.mutants_*`` module is loaded; each mutant's check runs the properties it must
break. Unsafe mutants are *killed* (their shrunk counterexample saved as ``DIR/<name>.json`` and
drawn as ``DIR/<name>.png``) or *survived*; safe (costlier) variants are reported as *safe* with
their cost ratio and never count as killed. Exit 1 if any unsafe mutant survived.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rollcheck.cli._util import add_parser, emit_json

__all__ = ["register", "run_catalogue"]


def register(sub: Any) -> None:
    p = add_parser(sub, "mutants", "Run the mutation catalogue: every deliberately broken variant must "
                   "be killed by the properties; safe variants are reported with their cost ratio.", _run)
    p.add_argument("--profile", choices=["ci", "verify"], default=None,
                   help="Hypothesis budget (default: $ROLLCHECK_PROFILE or ci)")
    p.add_argument("--out", metavar="DIR", default="report/mutants",
                   help="where counterexamples (.json) and pictures (.png) go (default report/mutants)")
    p.add_argument("--only", metavar="NAME", action="append", default=[],
                   help="run only this mutant (repeatable)")
    p.add_argument("--no-pictures", action="store_true", help="do not draw PNG pictures")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="per-mutant time limit (default 300 for ci, 1800 for verify); a mutant that "
                        "runs out of time is reported as survived")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _save(name: str, cex: Any, out: Path, pictures: bool) -> tuple[str | None, str | None]:
    from rollcheck.pyimpl.pattern import Pattern
    from rollcheck.pyimpl.patternio import atomic_write_text, dump_pattern

    if cex is None:
        return None, None
    json_path = out / f"{name}.json"
    if isinstance(cex, Pattern):
        dump_pattern(cex, json_path)
        png = None
        if pictures:
            from rollcheck.pyimpl.render import render_pattern

            png_path = out / f"{name}.png"
            render_pattern(cex, png_path, zcycles=True, title=name)
            png = str(png_path)
        return str(json_path), png
    try:
        atomic_write_text(json_path, json.dumps(cex, indent=1, default=str) + "\n")
    except (TypeError, ValueError):
        return None, None
    return str(json_path), None


DEFAULT_TIMEOUT = {"ci": 300.0, "verify": 1800.0}


def _check_with_timeout(m: Any, profile: str, timeout: float | None) -> Any:
    """Run ``m.check(profile)`` in a forked child so that a hanging check cannot hang the run."""
    import multiprocessing as mp

    from rollcheck.properties.mutation import MutantOutcome

    if timeout is None or "fork" not in mp.get_all_start_methods():
        return m.check(profile)
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            out: Any = m.check(profile)
        except Exception as e:
            out = MutantOutcome("survived", f"the check crashed: {type(e).__name__}: {e}")
        try:
            send.send(out)
        except Exception as e:  # an unpicklable counterexample: keep the verdict
            send.send(MutantOutcome(out.verdict, f"{out.detail} (counterexample not transferable: {e})",
                                    None, out.ratio, out.examples))
        send.close()

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    send.close()
    try:
        if recv.poll(timeout):
            return recv.recv()
        return MutantOutcome("survived", f"no verdict within the {timeout:.0f} s limit")
    except EOFError:
        return MutantOutcome("survived", f"the check died (exit code {proc.exitcode})")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        recv.close()


def run_catalogue(profile: str, out_dir: str | os.PathLike[str], only: Sequence[str] = (),
                  pictures: bool = True, log: Callable[[str], None] | None = None,
                  timeout: float | None = -1.0) -> list[dict[str, Any]]:
    """Run every registered mutant (or those in ``only``) and return one record per mutant.

    Each check runs in a forked child limited to ``timeout`` seconds (-1: the profile's default,
    None: in this process, no limit)."""
    from rollcheck.pyimpl.errors import InvalidInputError

    os.environ["ROLLCHECK_PROFILE"] = profile
    from rollcheck.properties.profiles import load_profile

    load_profile(profile)  # before the property modules are imported: Hypothesis reads it then
    from rollcheck.properties.mutation import MutantOutcome, load_all

    mutants = load_all()
    unknown = [n for n in only if n not in mutants]
    if unknown:
        raise InvalidInputError(f"unknown mutant(s) {', '.join(unknown)}", location="--only")
    out = Path(out_dir)
    if timeout is not None and timeout < 0:
        timeout = DEFAULT_TIMEOUT.get(profile, 300.0)
    records = []
    for name, m in mutants.items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            o = _check_with_timeout(m, profile, timeout)
        except Exception as e:  # a crashing check examined nothing we can trust
            o = MutantOutcome("survived", f"the check crashed: {type(e).__name__}: {e}")
        dt = time.perf_counter() - t0
        verdict = o.verdict
        if m.safe and verdict == "survived":
            verdict = "safe"
        cex, png = (None, None)
        if verdict == "killed":
            cex, png = _save(name, o.counterexample, out, pictures)
        rec = {
            "name": name, "target": m.target, "verdict": verdict,
            "counterexample": cex, "picture": png,
            "ratio": o.ratio if verdict == "safe" else None,
            "safe": m.safe, "description": m.description, "detail": o.detail,
            "examples": o.examples, "seconds": round(dt, 2),
        }
        records.append(rec)
        if log:
            log(f"{name:32s} {verdict:9s} {dt:6.1f}s  {o.detail[:110]}")
    return records


def _run(args: argparse.Namespace) -> int:
    from rollcheck.properties.profiles import active_profile
    from rollcheck.properties.profiles import seed as env_seed

    profile = args.profile or active_profile()
    seed = env_seed()  # empty = derandomised; not an integer: exit 2
    print(f"mutants: profile {profile}, seed {seed if seed is not None else 'derandomised'}", file=sys.stderr)
    if args.timeout is not None and args.timeout <= 0:
        from rollcheck.pyimpl.errors import InvalidInputError

        raise InvalidInputError(f"--timeout must be > 0, got {args.timeout}", location="--timeout")
    records = run_catalogue(profile, args.out, args.only, not args.no_pictures,
                            log=lambda s: print(s, file=sys.stderr, flush=True),
                            timeout=args.timeout if args.timeout is not None else -1.0)
    counts = {v: sum(1 for r in records if r["verdict"] == v) for v in ("killed", "survived", "safe")}
    bad = [r["name"] for r in records if not r["safe"] and r["verdict"] != "killed"]
    if args.json:
        emit_json({"mutants": records, "profile": profile, **counts, "survived_unsafe": bad})
    else:
        for r in records:
            extra = f" ratio {r['ratio']}" if r["ratio"] is not None else ""
            where = f" -> {r['counterexample']}" if r["counterexample"] else ""
            print(f"{r['name']:32s} {r['verdict']:9s}{extra}{where}")
        print(f"{counts['killed']} killed, {counts['safe']} safe, {counts['survived']} survived")
    if not records:
        from rollcheck.pyimpl.errors import InconclusiveError

        raise InconclusiveError("no mutant was run")
    return 1 if bad else 0
