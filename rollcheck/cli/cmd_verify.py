"""``rollcheck verify``: the main job — every section, progress while it runs, a verdict, and report/.

Independent sections run side by side, each in a process of its own (``rollcheck.scheduler``:
longest first, CPU-bound sections beside the one Spark or Flink section running at a time). On a
terminal every running section has a live line (its title, elapsed time and the last thing it
reported) and the end is a table; in a log (stdout not a terminal) every progress message is one
plain line prefixed by its section, and every check one untruncated line. Output of the JVMs and
of Spark (which write straight to the process's file descriptors) goes to
``report/logs/<section>.log``, one file per section; ``report/verify.log`` keeps every progress
line. The last line is the verdict, as pytest ends its run:
``247 checks: 245 passed, 0 failed, 2 inconclusive in 16m31s``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

from rollcheck.cli._util import add_parser


def register(sub: Any) -> None:
    """Add ``rollcheck verify`` to ``sub``."""
    p = add_parser(sub, "verify", "Run every check (properties, Z3, mutants, TLC, Spark) and write report/.", _run)
    p.add_argument("--quick", action="store_true", help="the ci profile and small bounds (minutes instead of the full run's tens of minutes)")
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
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="sections run at once, each in a process of its own (default: the usable cores "
                        "plus one, at least 2)")
    p.add_argument("--engine-jobs", type=int, default=None, metavar="N",
                   help="Spark/Flink sections run at once (default 2, or 1 with less than 4 GB of memory "
                        "available)")


_REPORT_FILES = ("report.md", "index.html", "results.json", "verify.log")


def _check_out_dir(path: str, force: bool) -> Path:
    """Check ``--out`` before the run: exit 2 up front when it cannot hold the report.

    That is a file, an unwritable folder, or (unless ``force``) a non-empty folder that does not
    hold a previous rollcheck report.
    """
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


def _plain_line(r: Any) -> str:
    return (f"{r.status.upper():<12} {r.algorithm} | {r.method} | {r.check} | {r.count} {r.unit} | "
            f"{r.seconds:.1f}s" + (f" | {r.detail}" if r.detail else ""))


def _previous_times(out_dir: Path, quick: bool) -> dict[str, float]:
    """Section wall times of the previous report in ``out_dir`` with the same quick setting, or {}.

    They are the scheduler's best estimate of this run's.
    """
    import json

    try:
        doc = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
        if bool(doc.get("quick")) != quick:
            return {}
        return {str(k): float(v) for k, v in dict(doc.get("job_seconds") or doc.get("section_seconds") or {}).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


class _Progress:
    """What the terminal (or the log) shows while the sections run."""

    def __init__(self, console: Any, interactive: bool, log_fh: IO[str], titles: dict[str, str]) -> None:
        self.console = console
        self.interactive = interactive
        self.log_fh = log_fh
        self.titles = titles
        self.running: dict[str, list[Any]] = {}  # name -> [t0, last message]
        self.finished = 0
        self.t0 = time.perf_counter()

    def _log(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.log_fh.write(line + "\n")
            self.log_fh.flush()

    def render(self) -> Any:
        from rich.table import Table

        t = Table(show_header=True, header_style="bold", box=None, expand=False,
                  title=f"{self.finished}/{len(self.titles)} sections done, {len(self.running)} running, "
                        f"{time.perf_counter() - self.t0:.0f}s", title_justify="left")
        t.add_column("section", no_wrap=True)
        t.add_column("s", justify="right", no_wrap=True)
        t.add_column("last message", overflow="ellipsis", no_wrap=True)
        now = time.perf_counter()
        for name, (t0, msg) in self.running.items():
            t.add_row(f"[bold]{name}[/bold]", f"{now - t0:.0f}", msg)
        return t

    def event(self, kind: str, name: str, payload: Any) -> None:
        now = time.perf_counter()
        if kind == "start":
            self.running[name] = [now, "starting"]
            self._log(f"[{name}] started: {self.titles[name]}")
            if not self.interactive:
                self.console.print(f"== {self.titles[name]} (section {name}, started at "
                                   f"{now - self.t0:.0f}s)", markup=False)
        elif kind == "log":
            if name in self.running:
                self.running[name][1] = str(payload).strip()
                elapsed = now - self.running[name][0]
            else:
                elapsed = 0.0
            self._log(f"[{name}] {payload}")
            if not self.interactive:
                self.console.print(f"  [{name} {elapsed:6.1f}s] {str(payload).strip()}", markup=False)
        elif kind == "done":
            self.running.pop(name, None)
            self.finished += 1
            got = payload.rows
            n_fail = sum(r.status == "fail" for r in got)
            n_inc = sum(r.status == "inconclusive" for r in got)
            from rollcheck.suite import plural

            line = (f"{self.titles[name]}: {plural(len(got), 'check')}, {n_fail} failed, {n_inc} inconclusive "
                    f"in {payload.seconds:.1f}s" + (f", CPU {payload.cpu_seconds:.0f}s" if payload.cpu_seconds is not None
                                             else "") + f" (log: logs/{name}.log)")
            self._log(f"[{name}] done: {line}" + (f"; crashed: {payload.error}" if payload.error else ""))
            colour = "red" if n_fail else ("yellow" if n_inc else "green")
            if self.interactive:
                self.console.print(f"[{colour}]✓[/{colour}] {line}", markup=True, highlight=False)
            else:
                self.console.print(line, markup=False)
                for r in got:
                    self.console.print(_plain_line(r), markup=False)


def _section_seconds(plan: list[Any], outcomes: dict[str, Any], what: str = "seconds") -> dict[str, float]:
    """Seconds per section (``what``: ``seconds`` of wall time or ``cpu_seconds``).

    A section run in parts counts the sum of its parts' times; a part that reported no CPU time
    counts none.
    """
    out: dict[str, float] = {}
    for j in plan:
        out[j.section] = round(out.get(j.section, 0.0) + float(getattr(outcomes[j.name], what) or 0.0), 1)
    return out


def _load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS does not say)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _header_words(profile: str, quick: bool, seed: int, seed_from: str, hyp: int | None, jobs: int,
                  engine_jobs: int) -> dict[str, str]:
    """The report's and the terminal's header in words: run, profile, seed, Hypothesis, jobs."""
    how = {"--seed": "given with --seed", "ROLLCHECK_SEED": "from ROLLCHECK_SEED",
           "default": "the default; --seed N to change"}[seed_from]
    return {
        "run": "quick run (small bounds)" if quick else "full run",
        "profile": profile,
        "seed": f"{seed} ({how})",
        "Hypothesis": ("derandomised (the same examples every run; set ROLLCHECK_SEED to vary them)"
                       if hyp is None else f"seeded with {hyp} (ROLLCHECK_SEED)"),
        "sections at once": (f"{jobs}, each in a process of its own (at most {engine_jobs} Spark/Flink "
                             f"section{'s' if engine_jobs != 1 else ''} at a time), and beside them up to "
                             f"{engine_jobs} timed Flink sweep{'s' if engine_jobs != 1 else ''}"),
    }


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live

    from rollcheck.calibration import calibrate, describe, finish
    from rollcheck.properties.profiles import load_profile
    from rollcheck.properties.profiles import seed as env_seed
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.report import write_report
    from rollcheck.scheduler import default_engine_slots, default_jobs, plan_jobs, run_sections
    from rollcheck.suite import environment, summary_line

    out_dir = _check_out_dir(args.out, args.force)
    seed, seed_from = _seed(args)
    hyp = env_seed()
    profile = args.profile or ("ci" if args.quick else "verify")
    if args.jobs is not None and args.jobs < 1:
        raise InvalidInputError(f"must be at least 1, got {args.jobs}", location="--jobs")
    if args.engine_jobs is not None and args.engine_jobs < 1:
        raise InvalidInputError(f"must be at least 1, got {args.engine_jobs}", location="--engine-jobs")
    jobs = args.jobs or default_jobs()
    engine_jobs = min(jobs, args.engine_jobs or default_engine_slots())
    load_profile(profile)
    sections = _selected_sections(args.only)
    plan = plan_jobs(sections, args.quick, _previous_times(out_dir, args.quick))
    interactive = sys.stdout.isatty()
    log_path = out_dir / "verify.log"
    log_dir = out_dir / "logs"
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in [log_path, *(log_dir.glob("*.log") if log_dir.is_dir() else [])]:
        old.unlink(missing_ok=True)
    words = _header_words(profile, args.quick, seed, seed_from, hyp, jobs, engine_jobs)
    t_all = time.perf_counter()
    load_start = _load_average()
    # the machine's calibration (a CPU loop, one JVM start, cores, load) next to the times, so that
    # the times of runs on different machines compare (rollcheck.calibration)
    calibration = calibrate(load_start=load_start)
    console = Console(file=sys.stderr, force_terminal=interactive or None,
                      highlight=False, width=None if interactive else 10_000, soft_wrap=not interactive)
    console.print(f"rollcheck verify: {words['run']}; profile {words['profile']}; seed {words['seed']}; "
                  f"Hypothesis {words['Hypothesis']}; sections at once: {words['sections at once']}"
                  f" (each section's JVM and Spark output: {os.path.relpath(log_dir)}/)", markup=False)
    console.print(f"machine: {describe({'calibration': calibration}, load=False)}, load {load_start}", markup=False)
    ctx_args = {"profile": profile, "quick": args.quick, "out_dir": str(out_dir), "seed": seed}
    with open(log_path, "a", encoding="utf-8") as log_fh:
        progress = _Progress(console, interactive, log_fh, {j.name: j.title for j in plan})
        live = Live(get_renderable=progress.render, console=console, refresh_per_second=4,
                    transient=True) if interactive else contextlib.nullcontext()
        with live:
            outcomes = run_sections(plan, ctx_args, log_dir, jobs, progress.event, engine_slots=engine_jobs,
                                    timed_slots=engine_jobs)
    rows = [r for name, _ in sections for j in plan if j.section == name for r in outcomes[j.name].rows]
    seconds = time.perf_counter() - t_all
    verdict = summary_line(rows, seconds)
    calibration = finish(calibration, _load_average())
    words["machine"] = describe({"calibration": calibration})
    if interactive:
        _print_table(rows)
    meta: dict[str, object] = {
        "verdict": verdict, "words": words, "profile": profile, "quick": args.quick, "seed": seed,
        "seed_from": seed_from, "hypothesis_seed": hyp, "jobs": jobs, "engine_jobs": engine_jobs,
        **_times(seconds, plan, outcomes, t_all, sections),
        "cores": _cores(), "load_average": dict(calibration["load_average"]), "calibration": calibration,
        "versions": environment(),
    }
    try:
        md, html = write_report(rows, out_dir, meta)
    except OSError as e:
        from rollcheck.suite import environment_failure

        env = environment_failure(f"[Errno {e.errno}] {e.strerror}")
        if env is None:
            raise
        print(f"rollcheck verify: the report could not be written to {os.path.relpath(out_dir)}: {env} "
              f"(an environment failure, not a finding); {verdict}", file=sys.stderr)
        from rollcheck.pyimpl.verdict import Check
        from rollcheck.pyimpl.verdict import exit_code as checks_exit_code

        return checks_exit_code([Check.unchecked("report", f"the report could not be written: {env}")])
    print(f"report: {os.path.relpath(md)} and {os.path.relpath(html)}; logs: {os.path.relpath(log_path)}, "
          f"{os.path.relpath(log_dir)}/")
    print(verdict)
    fault = _environment_fault(rows, out_dir)
    if fault is not None:  # a full disk is the machine's: exit 2 naming the path, never a FAIL (1)
        print(f"rollcheck: environment error: {fault}", file=sys.stderr)
        return 2
    from rollcheck.suite import exit_code

    return exit_code([r.status for r in rows])


def _selected_sections(only: list[str] | None) -> list[Any]:
    """The report's sections, those named by ``--only`` when given (exit 2 naming an unknown one)."""
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.suite import discover_sections

    sections = discover_sections()
    if only:
        names = {n for n, _ in sections}
        unknown = set(only) - names
        if unknown:
            raise InvalidInputError(f"unknown section(s) {sorted(unknown)}; known: {sorted(names)}", location="--only")
        sections = [(n, m) for n, m in sections if n in only]
    return sections


def _print_table(rows: list[Any]) -> None:
    """The rows as a table on the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="rollcheck verify")
    for col in ("algorithm", "method", "check", "result", "count", "s"):
        table.add_column(col, overflow="fold")
    colour = {"pass": "green", "fail": "red", "inconclusive": "yellow"}
    for r in rows:
        table.add_row(r.algorithm, r.method, r.check, f"[{colour[r.status]}]{r.status}",
                      f"{r.count} {r.unit}", f"{r.seconds:.1f}")
    Console().print(table)


def _times(seconds: float, plan: list[Any], outcomes: dict[str, Any], t_all: float,
           sections: list[Any]) -> dict[str, object]:
    """The report's times: the total and each section's and job's wall and CPU seconds.

    Also when each job started, and the sections' titles.
    """
    from rollcheck.suite import format_duration

    return {
        "total_seconds": round(seconds, 1),
        "total_time": format_duration(seconds), "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "section_seconds": _section_seconds(plan, outcomes),
        "job_seconds": {n: round(o.seconds, 1) for n, o in outcomes.items()},
        # user + system CPU of each section's process and the children (JVMs, TLC) it waited for
        "section_cpu_seconds": _section_seconds(plan, outcomes, "cpu_seconds"),
        "job_cpu_seconds": {n: o.cpu_seconds for n, o in outcomes.items()},
        "job_started": {n: round(o.started - t_all, 1) for n, o in outcomes.items()},
        "section_titles": {name: str(getattr(m, "TITLE", name)) for name, m in sections},
    }


def _environment_fault(rows: list[Any], out_dir: Path) -> Any:
    """The environment fault (disk full, read-only, no permission) that cut a row short, if any."""
    from rollcheck.pyimpl.errors import environment_fault_in_text

    for r in rows:
        if r.status != "pass":
            fault = environment_fault_in_text(r.detail or "", str(out_dir))
            if fault is not None:
                return fault
    return None
