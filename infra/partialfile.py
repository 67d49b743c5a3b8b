"""Results that appear whole or not at all: a recording writes ``OUT.partial``, renamed when done.

:func:`partial_output` renames ``OUT.partial`` to ``OUT`` when the run succeeds, keeps the
fragment beside an untouched ``OUT`` when the run is cut short, and removes it when the input is
refused. See docs/internals/infra.md#partialfile.

References
----------
``specs/cli.md`` ("Faults the commands survive": atomic results).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["PARTIAL_SUFFIX", "partial_path", "partial_output"]

#: The suffix of a recording in progress (or cut short).
PARTIAL_SUFFIX = ".partial"


def partial_path(out: str | os.PathLike[str]) -> Path:
    """``OUT.partial`` for ``OUT``.

    Examples
    --------
    >>> str(partial_path("/x/o.jsonl"))
    '/x/o.jsonl.partial'
    """
    p = Path(out)
    return p.with_name(p.name + PARTIAL_SUFFIX)


@contextlib.contextmanager
def partial_output(out: str | os.PathLike[str]) -> Iterator[Path]:
    r"""Yield ``OUT.partial`` (removed first if stale) and rename it to ``OUT`` at the end.

    It is renamed when the block ends normally, removed on :class:`InvalidInputError`, kept on
    any other way out.

    If the block wrote nothing on a normal end, ``OUT`` is left untouched (a run that records
    nothing does not erase an earlier result).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); out = os.path.join(d, "t.jsonl")
    >>> with partial_output(out) as tmp:
    ...     _ = open(tmp, "w").write("new\n")
    >>> open(out).read(), os.path.exists(out + ".partial")
    ('new\n', False)
    >>> try:
    ...     with partial_output(out) as tmp:
    ...         _ = open(tmp, "w").write("frag")
    ...         raise KeyboardInterrupt
    ... except KeyboardInterrupt:
    ...     pass
    >>> open(out).read(), open(out + ".partial").read()
    ('new\n', 'frag')
    >>> import shutil; shutil.rmtree(d)
    """
    target = Path(out)
    tmp = partial_path(target)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        yield tmp
    except InvalidInputError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if tmp.exists():
        os.replace(tmp, target)
