"""Scripts kept as modules of their own and filled in line by line (the engines' reproducers).

A template is a real ``.py`` file of a package, checked by ruff and mypy like any module; its
placeholder lines (``X = None  # filled by rollcheck``) are replaced whole by
:func:`fill_template`, so the script rollcheck writes is the template with those lines changed.
"""

from __future__ import annotations

from importlib import resources

__all__ = ["fill_template", "read_template"]


def read_template(package: str, name: str) -> str:
    """The text of template ``name`` shipped in ``package``.

    Parameters
    ----------
    package : str
        The package holding the template (e.g. ``rollcheck.flink_replay.templates``).
    name : str
        Its file name.

    Returns
    -------
    str
    """
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def fill_template(template: str, lines: dict[str, str]) -> str:
    r"""``template`` with each line named by a key of ``lines`` replaced by its value.

    Parameters
    ----------
    template : str
        The script's text.
    lines : dict of str to str
        Exact line (without its newline) → replacement (one or more lines, without the last
        newline).

    Returns
    -------
    str
        The filled script.

    Raises
    ------
    RuntimeError
        A placeholder line is missing or present more than once (a broken template).

    Examples
    --------
    >>> fill_template("A = None  # filled by rollcheck\nB = A\n", {"A = None  # filled by rollcheck": "A = 1"})
    'A = 1\nB = A\n'
    """
    out = template.splitlines(keepends=True)
    where: dict[int, str] = {}
    for placeholder in lines:
        hits = [i for i, line in enumerate(out) if line.rstrip("\r\n") == placeholder]
        if len(hits) != 1:
            raise RuntimeError(f"the reproducer template has {len(hits)} lines {placeholder!r}, not one")
        where[hits[0]] = placeholder
    for i, placeholder in where.items():
        out[i] = lines[placeholder] + "\n"
    return "".join(out)
