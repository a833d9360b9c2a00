"""Every test runs with the ``test`` extra alone (issue 27): the bench modules the tests import load
no package that only the ``bench`` extra installs (psutil, tantivy, PyStemmer were each one)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a distribution whose module is named otherwise; the others import as their lower-cased name
IMPORT_NAMES = {"PyStemmer": "Stemmer"}
WITHOUT_BENCH = ("dense", "serve", "test", "dev")  # what `./run test` installs


def distribution(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert found, requirement
    return found.group(0)


def bench_only_modules() -> list[str]:
    """The top-level modules of the bench extra's packages that no other installed part declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    elsewhere = {distribution(r) for r in project["dependencies"]}
    elsewhere |= {distribution(r) for extra in WITHOUT_BENCH for r in extras[extra]}
    only = {distribution(r) for r in extras["bench"]} - elsewhere
    return sorted(IMPORT_NAMES.get(name, name.lower().replace("-", "_")) for name in only)


def bench_modules_the_tests_import() -> list[str]:
    """``bench`` and ``bench.x`` modules named by an import anywhere in tests/ (in a function too)."""
    found: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "bench"}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bench":
                found.add(node.module)
                package = ROOT / node.module.replace(".", "/")
                found |= {f"{node.module}.{a.name}" for a in node.names if (package / f"{a.name}.py").is_file()}
    return sorted(found)


def test_the_bench_modules_the_tests_import_need_no_bench_only_package() -> None:
    blocked, modules = bench_only_modules(), bench_modules_the_tests_import()
    assert {"psutil", "tantivy", "Stemmer"} <= set(blocked)
    assert "bench.common" in modules and "bench.synth" in modules
    # a module set to None in sys.modules cannot be imported: as if the package were not installed
    probe = (
        "import importlib, sys\n"
        f"for name in {blocked!r}:\n    sys.modules[name] = None\n"
        f"for name in {modules!r}:\n    importlib.import_module(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
