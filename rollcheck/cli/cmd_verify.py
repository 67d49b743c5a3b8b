"""``rollcheck verify``: the main job — every section, progress while it runs, a verdict, and report/.

On a terminal each section shows a live status line (what runs, the last thing it reported, the
elapsed time) and the end is a table; in a log (stdout not a terminal) every check is one plain,
untruncated line. Output of the JVMs and of Spark (which write straight to the process's file
descriptors) goes to ``report/verify.log``, not to the terminal. The last line is the verdict, as
pytest ends its run: ``247 checks: 245 passed, 0 failed, 2 inconclusive in 16m31s``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rollcheck.cli._util import add_parser


def register(sub: Any) -> None:
    p = add_parser(sub, "verify", "Run every check (properties, Z3, mutants, TLC, Spark) and write report/.", _run)
    p.add_argument("--quick", action="store_true", help="the ci profile and small bounds (under 5 minutes)")
    p.add_argument("--profile", choices=["ci", "verify"], default=None,
                   help="Hypothesis profile (default: verify, or ci with --quick)")
    p.add_argument("--out", default="report", help="report folder (default: report); an existing folder must be "
                   "empty or hold a previous rollcheck report (else --force)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out folder that does not hold a previous rollcheck report")
    p.add_argument("--seed", type=int, default=None,
                   help="seed for every random run (default: ROLLCHECK_SEED, else 0; printed and reported)")
    p.add_argument("--only", action="append", default=[], metavar="SECTION",
                   help="run only this section (repeatable)")


_REPORT_FILES = ("report.md", "index.html", "results.json", "verify.log")


def _check_out_dir(path: str, force: bool) -> Path:
    """``--out`` is checked before the run: a file, an unwritable folder, or a non-empty folder
    that does not hold a previous rollcheck report (unless ``force``) → exit 2 up front."""
    from rollcheck.cli._util import check_output_path
    from rollcheck.pyimpl.errors import InvalidInputError

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"{path} exists and is not a folder", location="--out")
    check_output_path(out, "--out", directory=True)
    if out.is_dir() and any(out.iterdir()) and not force:
        ours = False
        try:
            with open(out / "report.md", encoding="utf-8", errors="replace") as fh:
                ours = fh.readline().startswith("# rollcheck verification report")
        except OSError:
            ours = False
        if not ours:
            present = [f for f in _REPORT_FILES if (out / f).exists()]
            what = (f"holds {', '.join(present)} not written by rollcheck" if present
                    else "is not empty and holds no previous rollcheck report")
            raise InvalidInputError(f"{path} {what}; choose another folder or pass --force to write into it",
                                    location="--out")
    return out.resolve()


def _seed(args: argparse.Namespace) -> tuple[int, str]:
    """The seed in use and where it came from (``--seed``, ``ROLLCHECK_SEED`` or the default 0)."""
    from rollcheck.properties.profiles import seed as env_seed

    if args.seed is not None:
        return args.seed, "--seed"
    s = env_seed()
    return (s, "ROLLCHECK_SEED") if s is not None else (0, "default")


@contextlib.contextmanager
def _captured_fds(log_path: Path) -> Iterator[IO[str]]:
    """Send file descriptors 1 and 2 to ``log_path`` (child JVMs, Spark, py4j write there) and
    yield a text stream on the original stderr for our own progress."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    progress = os.fdopen(os.dup(saved_err), "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    try:
        yield progress
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for fd in (saved_out, saved_err, log_fd):
            os.close(fd)
        progress.close()


def _plain_line(r: Any) -> str:
    return (f"{r.status.upper():<12} {r.algorithm} | {r.method} | {r.check} | {r.count} {r.unit} | "
            f"{r.seconds:.1f}s" + (f" | {r.detail}" if r.detail else ""))


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from rollcheck.properties.profiles import load_profile
    from rollcheck.properties.profiles import seed as env_seed
    from rollcheck.suite import (
        Row,
        VerifyContext,
        discover_sections,
        environment,
        summary_line,
        write_report,
    )

    out_dir = _check_out_dir(args.out, args.force)
    seed, seed_from = _seed(args)
    hyp = env_seed()
    hyp_seed = "derandomised (no ROLLCHECK_SEED)" if hyp is None else str(hyp)
    profile = args.profile or ("ci" if args.quick else "verify")
    load_profile(profile)
    sections = discover_sections()
    if args.only:
        names = {n for n, _ in sections}
        unknown = set(args.only) - names
        if unknown:
            from rollcheck.pyimpl.errors import InvalidInputError

            raise InvalidInputError(f"unknown section(s) {sorted(unknown)}; known: {sorted(names)}", location="--only")
        sections = [(n, m) for n, m in sections if n in args.only]
    interactive = sys.stdout.isatty()
    log_path = out_dir / "verify.log"
    if log_path.exists():
        log_path.unlink()
    rows: list[Row] = []
    t_all = time.perf_counter()
    with _captured_fds(log_path) as progress:
        console = Console(file=progress, force_terminal=interactive or None, highlight=False,
                          width=None if interactive else 10_000, soft_wrap=not interactive)
        console.print(f"rollcheck verify: profile={profile} quick={args.quick} seed={seed} ({seed_from}), "
                      f"hypothesis seed={hyp_seed} (JVM and Spark output: {os.path.relpath(log_path)})")
        for name, module in sections:
            title = getattr(module, "TITLE", name)
            t0 = time.perf_counter()
            status = console.status(f"[bold]{title}[/bold]: starting") if interactive else contextlib.nullcontext()
            with status as live:
                def log(msg: str, _t0: float = t0, _title: str = title, _live: Any = live, _name: str = name) -> None:
                    elapsed = time.perf_counter() - _t0
                    if _live is not None:
                        _live.update(f"[bold]{_title}[/bold] ({elapsed:.0f}s): {msg}")
                    else:
                        console.print(f"  [{elapsed:6.1f}s] {msg}")
                    print(f"[{_name}] {msg}", file=sys.stderr)  # the log file keeps everything

                ctx = VerifyContext(profile=profile, quick=args.quick, out_dir=out_dir, seed=seed, log=log)
                if not interactive:
                    console.print(f"== {title}")
                try:
                    got = module.run(ctx)  # type: ignore[attr-defined]
                except Exception as e:  # a crashing section is a failure of that section, not of the job
                    import traceback

                    traceback.print_exc()  # into verify.log
                    got = [Row(name, "pyimpl", "section ran", "fail", 0, "runs", time.perf_counter() - t0,
                               f"{type(e).__name__}: {e}")]
            rows.extend(got)
            n_fail = sum(r.status == "fail" for r in got)
            n_inc = sum(r.status == "inconclusive" for r in got)
            console.print(f"{title}: {len(got)} checks, {n_fail} failed, {n_inc} inconclusive "
                          f"in {time.perf_counter() - t0:.1f}s")
            if not interactive:
                for r in got:
                    console.print(_plain_line(r), markup=False)
    seconds = time.perf_counter() - t_all
    verdict = summary_line(rows, seconds)
    if interactive:
        table = Table(title="rollcheck verify")
        for col in ("algorithm", "method", "check", "result", "count", "s"):
            table.add_column(col, overflow="fold")
        colour = {"pass": "green", "fail": "red", "inconclusive": "yellow"}
        for r in rows:
            table.add_row(r.algorithm, r.method, r.check, f"[{colour[r.status]}]{r.status}",
                          f"{r.count} {r.unit}", f"{r.seconds:.1f}")
        Console().print(table)
    meta: dict[str, object] = {"verdict": verdict, "profile": profile, "quick": args.quick,
                               "seed": seed, "seed from": seed_from, "hypothesis seed": hyp_seed,
                               "total time (s)": round(seconds, 1),
                               "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
                               "versions": environment()}
    md, html = write_report(rows, out_dir, meta)
    print(f"report: {os.path.relpath(md)} and {os.path.relpath(html)}; log: {os.path.relpath(log_path)}")
    print(verdict)
    fault = _environment_fault(rows, out_dir)
    if fault is not None:  # a full disk is the machine's: exit 2 naming the path, never a FAIL (1)
        print(f"rollcheck: environment error: {fault}", file=sys.stderr)
        return 2
    if any(r.status == "fail" for r in rows):
        return 1
    if not rows or any(r.status == "inconclusive" for r in rows):
        return 3
    return 0


def _environment_fault(rows: list[Any], out_dir: Path) -> Any:
    """The environment fault (disk full, read-only, no permission) that cut a row short, if any."""
    from rollcheck.pyimpl.errors import environment_fault_in_text

    for r in rows:
        if r.status != "pass":
            fault = environment_fault_in_text(r.detail or "", str(out_dir))
            if fault is not None:
                return fault
    return None
