"""The README's map of top-level folders to import names names every folder the wheel installs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_maps_every_installed_folder_to_its_import_name() -> None:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([\w/]+)/` \| `([\w.]+)` \|", readme, flags=re.M))
    for package, folder in mapping.items():
        assert rows.get(folder) == package, f"README's map lacks `{folder}/` -> `{package}`"
