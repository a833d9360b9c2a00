"""docs/architecture.md opens with the package map: every package and top-level module is in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def mapped() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- package-map -->", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `(core/[\w/.]+)`", table, flags=re.M))


def actual() -> set[str]:
    core = ROOT / "core"
    packages = {f"core/{p.name}/" for p in core.iterdir() if (p / "__init__.py").is_file()}
    modules = {f"core/{p.name}" for p in core.glob("*.py") if p.name != "__init__.py"}
    return packages | modules


def test_every_package_and_module_is_in_the_map() -> None:
    missing = actual() - mapped()
    assert not missing, f"add to the package map in docs/architecture.md: {sorted(missing)}"


def test_the_map_names_nothing_that_does_not_exist() -> None:
    stale = mapped() - actual()
    assert not stale, f"the package map names what is gone: {sorted(stale)}"
