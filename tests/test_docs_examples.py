"""Every shell example in README.md and docs/ runs as written.

A fenced block marked ``console`` is a transcript: each line starting with ``$ `` is a command, the
lines up to the next command are its expected output. The commands run with ``bash`` in a scratch
copy of the repository's ``examples/`` (so ``examples/useless.json`` resolves and ``-o out.png``
writes nowhere that matters), with the venv's ``rollcheck`` first on ``PATH``. The commands of one
block run in order in one fresh scratch directory (a block may write a file that a later command of
the same block reads); blocks are independent of each other, so they may run in parallel.

Expected output is compared after normalising: a JSON document is compared in its one-line form (the
CLI prints indented JSON; a doc may show it on one line), other text line by line with trailing
white space dropped; ``...`` stands for any text. An expected exit code other than 0 is written as a
trailing comment ``# exit N`` on the command line. A block that shows a command without running it
(for instance a command that needs a cluster) is fenced ``text``, not ``console``; a ``sh``/``bash``/
plain block may not contain a ``$ rollcheck`` line (so no example escapes this test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)\s*$")
EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")


@dataclass
class Example:
    doc: str
    line: int
    command: str
    expected: list[str]
    exit_code: int
    block: int = 0

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks(path: Path) -> list[tuple[str, int, list[str]]]:
    out: list[tuple[str, int, list[str]]] = []
    lang: str | None = None
    start = 0
    body: list[str] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if m and lang is None:
            lang, start, body = m.group(1) or "", n, []
        elif line.strip() == "```" and lang is not None:
            out.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def _examples() -> list[Example]:
    found: list[Example] = []
    for path in DOCS:
        rel = str(path.relative_to(ROOT))
        for lang, start, body in _blocks(path):
            if lang != "console":
                continue
            current: Example | None = None
            cont = False
            for k, line in enumerate(body):
                if cont and current is not None:  # a command continued with a trailing backslash
                    current.command = current.command[:-1] + " " + line.strip()
                    cont = current.command.endswith("\\")
                    m = EXIT.search(current.command)
                    current.exit_code = int(m.group(1)) if m else 0
                elif line.startswith("$ "):
                    cmd = line[2:].rstrip()
                    cont = cmd.endswith("\\")
                    m = EXIT.search(cmd)
                    code = int(m.group(1)) if m else 0
                    current = Example(rel, start + 1 + k, cmd, [], code, start)
                    found.append(current)
                elif current is not None:
                    current.expected.append(line)
    return found


EXAMPLES = _examples()


def _one_line_json(text: str) -> str | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return json.dumps(doc, separators=(", ", ": "), ensure_ascii=False)


def _squash(text: str) -> str:
    text = re.sub(r"\s+", " ", text.strip())
    return re.sub(r"([\[{]) | ([\]}])", lambda m: m.group(1) or m.group(2), text)


def _matches(expected: list[str], actual: str) -> bool:
    exp = "\n".join(expected).strip()
    if not exp:
        return True
    if exp[:1] in "{[":
        got = _one_line_json(actual.strip())
        if got is not None:
            want = _one_line_json(exp)
            if want is not None:
                return want == got
            pattern = ".*?".join(re.escape(part) for part in _squash(exp).split("..."))
            return re.fullmatch(pattern, _squash(got), flags=re.S) is not None
    exp_lines = [ln.rstrip() for ln in exp.splitlines()]
    act = "\n".join(ln.rstrip() for ln in actual.strip().splitlines())
    pattern = "\n".join(".*?".join(re.escape(p) for p in ln.split("...")) for ln in exp_lines)
    return re.fullmatch(pattern, act, flags=re.S) is not None


def test_examples_found() -> None:
    assert len(EXAMPLES) >= 10, [e.id for e in EXAMPLES]


def test_no_unrun_shell_examples() -> None:
    """A ``$ rollcheck`` line outside a ``console`` block would never run: forbid it."""
    stray = []
    for path in DOCS:
        for lang, start, body in _blocks(path):
            if lang in ("console", "text"):
                continue
            stray += [f"{path.relative_to(ROOT)}:{start}" for ln in body if ln.startswith("$ rollcheck")]
    assert not stray, f"shell examples outside ```console blocks: {stray}"


def _block_of(ex: Example) -> str:
    return f"{ex.doc}:{ex.block}"


BLOCKS: dict[str, list[Example]] = {}
for _ex in EXAMPLES:
    BLOCKS.setdefault(_block_of(_ex), []).append(_ex)


def _run(ex: Example, cwd: Path) -> str | None:
    """Run one command; return a description of the mismatch, or None."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("ROLLCHECK_PROFILE", "ci")
    proc = subprocess.run(["bash", "-c", ex.command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != ex.exit_code:
        return (f"{ex.id}: `{ex.command}` exited {proc.returncode}, expected {ex.exit_code}\n"
                f"stderr: {proc.stderr[-2000:]}")
    outputs = (proc.stdout, proc.stderr + proc.stdout, proc.stdout + proc.stderr)
    if not any(_matches(ex.expected, out) for out in outputs):
        return (f"{ex.id}: `{ex.command}` printed\n{(proc.stdout + proc.stderr)[-3000:]}\nexpected\n"
                + "\n".join(ex.expected))
    return None


#: Tutorials whose commands still write next to the checkout's files (their owners move them
#: into ``out/``); every other document's commands must leave the checkout clean.
NOT_YET_CLEAN = {"docs/your-engine.md", "docs/your-protocol.md", "docs/your-flink-job.md"}


def _left_behind(scratch: Path, before: set[str]) -> list[str]:
    """Files the commands created in ``scratch`` (a stand-in for the checkout) that git would not
    ignore: run from the checkout, the same commands would leave them there."""
    new = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*")
                 if p.is_file() and str(p.relative_to(scratch)) not in before)
    if not new or not (ROOT / ".git").exists() or shutil.which("git") is None:
        return []
    proc = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "--stdin"], input="\n".join(new),
                          capture_output=True, text=True, timeout=60)
    ignored = set(proc.stdout.split("\n"))
    return [p for p in new if p not in ignored]


@pytest.mark.parametrize("block", list(BLOCKS), ids=list(BLOCKS))
def test_doc_example_runs(block: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    before = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    failures = [msg for ex in BLOCKS[block] if (msg := _run(ex, tmp_path)) is not None]
    assert not failures, "\n\n".join(failures)
    if block.split(":")[0] not in NOT_YET_CLEAN:
        left = _left_behind(tmp_path, before)
        assert not left, f"{block}: the commands leave {left} in the checkout (write into out/, which git ignores)"


def test_left_behind_detects_an_unignored_file(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "run.json").write_text("{}", encoding="utf-8")
    (tmp_path / "run.json").write_text("{}", encoding="utf-8")
    assert _left_behind(tmp_path, set()) == ["run.json"]


def test_every_example_file_named_in_the_docs_ships() -> None:
    """A file the README or a doc names under ``examples/`` (or passes to ``--module`` in the
    README) exists, so a command shown in a ``text`` block, not run here, still runs as written."""
    missing = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        names = set(re.findall(r"(?<![\w/.])examples/[\w./-]*\w\.\w+", text))
        if path.name == "README.md":
            names |= {n for n in re.findall(r"--module\s+(\S+\.py)", text) if not re.fullmatch(r"[A-Z_]+\.py", n)}
        missing += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(names) if not (ROOT / n).exists()]
    assert not missing, missing
