r"""The report draft of an open finding (``DIR/findings/F1.md``): what a maintainer's issue needs.

Title, the affected release, the minimised program, the steps (the standalone reproducer),
expected against actual, the checks that failed, the releases tried, and how the hunt found it.

Examples
--------
>>> text = report_draft({"id": "F1", "checks": ["exactly-once"], "exception": None,
...     "operators": ["source", "dedup"], "cell": "fail@b1", "status": "open",
...     "reproducer_run": {"1.0": "reproduced"}, "detail": "key 3 twice", "program": "P0002",
...     "programs": 1}, engine="toy", release="1.0", seed=7, programs=12,
...     module_text="SPEC = {}\n", reproducer_text="print(1)\n", reproducer_name="F1.reproducer.py")
>>> text.splitlines()[0]
'# toy 1.0: exactly-once violated after recovery (dedup, source)'
"""

from __future__ import annotations

from typing import Any

__all__ = ["report_draft"]


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}python\n{text.rstrip()}\n{ticks}"


def report_draft(finding: dict[str, Any], *, engine: str, release: str, seed: int, programs: int,
                 module_text: str, reproducer_text: str, reproducer_name: str) -> str:
    """The Markdown of the report draft of ``finding`` (its stored document).

    Parameters
    ----------
    finding : dict
        The finding's document (checks, exception, operators, cell, reproducer_run, detail...).
    engine, release : str
        The engine and the release hunted.
    seed, programs : int
        The hunt's seed and how many programs it had generated when it found this.
    module_text, reproducer_text : str
        The minimised module and the standalone reproducer.
    reproducer_name : str
        The reproducer's file name.

    Returns
    -------
    str
    """
    checks = list(finding.get("checks") or [])
    exc = finding.get("exception")
    ops = sorted(set(finding.get("operators") or []))
    symptom = (" and ".join(checks) + " violated") if checks else "an exception"
    if exc:
        symptom += f" ({exc})"
    runs = finding.get("reproducer_run") or {}
    lines = [
        f"# {engine} {release}: {symptom} after recovery ({', '.join(ops)})",
        "",
        f"**Affected release:** {engine} {release}"
        + "".join(f"; {r}: {v}" for r, v in runs.items() if r != release),
        "",
        *([f"**Doubtful:** {finding['doubtful']}: check by hand before reporting.", ""]
          if finding.get("doubtful") else []),
        "## The program (minimised)",
        "",
        f"Operators: {', '.join(finding.get('operators') or [])}. "
        f"Configuration and fault schedule: `{finding.get('cell')}`.",
        "",
        _fence(module_text),
        "",
        "## Steps to reproduce",
        "",
        f"Run the standalone script `{reproducer_name}` (the engine only):",
        "",
        _fence(reproducer_text),
        "",
        "## Expected",
        "",
        "Recovery is invisible in the result: the run with the failure gives what the failure-free "
        "run and the program's batch evaluation give, and every check below holds.",
        "",
        "## Actual",
        "",
        str(finding.get("detail") or symptom),
        "",
        "Checks that failed: " + (", ".join(f"`{c}`" for c in checks) or "none")
        + (f"; exception `{exc}`" if exc else "") + ".",
        "",
        "## Releases tried",
        "",
        *[f"- {r}: {v}" for r, v in runs.items()],
        "",
        "## How it was found",
        "",
        f"A generated program ({finding.get('program')}) of a hunt with seed {seed}, among the first "
        f"{programs} programs; {finding.get('programs', 1)} program(s) showed the same signature "
        f"`{finding.get('signature', '')}`. It was minimised and confirmed by running the module "
        "again through the ordinary matrix.",
        "",
    ]
    return "\n".join(lines)
