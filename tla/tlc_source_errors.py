"""Parse errors of a TLA+ module (SANY's output) and of a configuration (TLC's messages), located.

A module that does not parse and a configuration TLC rejects are *bad input*: the errors carry
``file:line:col`` (a missing ``EXTENDS``-ed module: the importing line; a configuration error:
``file.cfg:line``), and :func:`raise_source_errors` turns them into
:class:`~rollcheck.pyimpl.errors.InvalidInputError`.
"""

from __future__ import annotations

import re
from pathlib import Path

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.tlc_messages import ANY_MARK, ToolMessage, clean_text
from rollcheck.tla.tlc_result import SourceError

__all__ = ["config_errors", "raise_source_errors", "sany_errors"]

_SANY_LOC = re.compile(
    r"line (\d+), col(?:umn)? (\d+)(?: to line \d+, col(?:umn)? \d+)? of module (\w+)"
)
_PARSE_LOC = re.compile(r"at line (\d+), column (\d+)")
_PARSE_MODULE = re.compile(r"(?:Fatal errors while parsing TLA\+ spec in file|Could not parse module) (\w+)")
_PARSING_FILE = re.compile(r"^Parsing file (.+)$", re.M)


def _module_file(module: str, parsed_files: list[str], spec_dir: Path | None) -> str:
    for f in parsed_files:
        if Path(f).stem == module:
            return f
    return str((spec_dir / f"{module}.tla") if spec_dir else f"{module}.tla")


_MISSING_MODULE = re.compile(r"Cannot find source file for module (\w+)(?: imported in module (\w+))?")


def _import_line(path: str, module: str) -> int | None:
    """The line of ``path`` whose EXTENDS or INSTANCE names ``module`` (1-based), if any."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").split("\n")
    except OSError:
        return None
    word = re.compile(rf"\b{re.escape(module)}\b")
    in_extends = False
    for k, line in enumerate(lines, 1):
        code = line.split("\\*", 1)[0]
        if re.match(r"\s*EXTENDS\b", code):
            in_extends = True
        if word.search(code) and (in_extends or re.search(r"\bINSTANCE\b", code)):
            return k
        if in_extends and code.strip() and not code.rstrip().endswith(","):
            in_extends = False
    return None


def sany_errors(sany_text: str, spec_dir: Path | None) -> list[SourceError]:
    """Locations and reasons from SANY's text.

    The text between codes 2220 and 2219, or ``tla2sany.SANY``'s own output.
    """
    sany_text = ANY_MARK.sub("", sany_text)
    files = [f.strip() for f in _PARSING_FILE.findall(sany_text)]
    errors: list[SourceError] = []
    if "***Parse Error***" in sany_text:
        mod = _PARSE_MODULE.search(sany_text)
        module = mod.group(1) if mod else (Path(files[-1]).stem if files else "?")
        body = sany_text.split("***Parse Error***", 1)[1]
        reason = body.strip().split("\n")[0]
        loc = _PARSE_LOC.search(body)
        errors.append(SourceError(
            f"parse error: {reason}", _module_file(module, files, spec_dir),
            int(loc.group(1)) if loc else None, int(loc.group(2)) if loc else None,
        ))
    if "Semantic errors:" in sany_text or "*** Errors:" in sany_text:
        body = sany_text.split("*** Errors:", 1)[-1]
        # Blocks: a location line followed by the reason paragraph.
        for m in _SANY_LOC.finditer(body):
            rest = body[m.end():].strip("\n").split("\n\n")[0].strip()
            errors.append(SourceError(
                f"semantic error: {' '.join(rest.split())}" if rest else "semantic error",
                _module_file(m.group(3), files, spec_dir), int(m.group(1)), int(m.group(2)),
            ))
    if not errors:
        miss = _MISSING_MODULE.search(sany_text)
        if miss:
            importer = miss.group(2)
            f = _module_file(importer, files, spec_dir) if importer else None
            errors.append(SourceError(
                f"cannot find module {miss.group(1)}" + (f" (imported by {importer})" if importer else "")
                + " in the module's folder or TLC's standard modules",
                f, _import_line(f, miss.group(1)) if f else None,
            ))
    if not errors and ("Could not" in sany_text or "Unknown" in sany_text or "Cannot find" in sany_text
                       or "Fatal errors" in sany_text):
        lines = [ln.strip() for ln in sany_text.split("\n")
                 if ln.strip() and not ln.startswith(("Parsing file", "Semantic processing", "****", "\t"))
                 and not ln.strip().startswith(("at ", "tla2sany.", "Residual stack"))]
        errors.append(SourceError(" ".join(lines)[:400] or "the module could not be parsed"))
    return errors


_CFG_LINE = re.compile(r"configuration file at line (\d+)|line (\d+) of the configuration")


def config_errors(msgs: list[ToolMessage]) -> list[SourceError]:
    """The configuration errors among ``msgs``, with the ``.cfg`` line when TLC names it."""
    out = []
    for m in msgs:
        text = clean_text(m.text)
        loc = _CFG_LINE.search(text)
        line = int(loc.group(1) or loc.group(2)) if loc else None
        out.append(SourceError(f"configuration: {text}", None, line, None, kind="config"))
    return out


def raise_source_errors(errors: list[SourceError], mod: Path, cfg: Path) -> None:
    """Raise the first of ``errors`` (the others after it) as bad input naming ``file:line:col``.

    A configuration error names ``file.cfg:line``.
    """
    first = errors[0]
    if first.kind == "config":
        where = f"{cfg}:{first.line}" if first.line is not None else str(cfg)
    else:
        where = ":".join(str(x) for x in (first.file or str(mod), first.line, first.column) if x is not None)
    raise InvalidInputError("; ".join(e.message if i == 0 else str(e) for i, e in enumerate(errors)),
                            source=where)
