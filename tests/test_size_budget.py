"""The size budget of ``core/`` (STYLE.md 14, issue #10): no function over 60 lines, no module over 500.

A function counts from its first decorator (or ``def``) to its last line, docstring included.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500


def over_budget(path: Path) -> list[str]:
    """What in one module is over the budget: the module itself, and each long function."""
    source = path.read_text(encoding="utf-8")
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"module: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - start + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{node.name} (line {node.lineno}): {length} lines")
    return found


def budget_report() -> dict[str, list[str]]:
    out = {}
    for path in sorted(CORE.rglob("*.py")):
        found = over_budget(path)
        if found:
            out[path.relative_to(ROOT).as_posix()] = found
    return out


def test_no_function_or_module_of_core_is_over_budget() -> None:
    over = budget_report()
    listing = "\n".join(f"  {f}: {what}" for f, found in over.items() for what in found)
    assert not over, f"over {MAX_FUNCTION_LINES} lines a function / {MAX_MODULE_LINES} a module:\n{listing}"


def test_the_budget_counts_decorators_and_docstrings(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(57))
    module = tmp_path / "m.py"
    module.write_text(f'@staticmethod\ndef f():\n    """Doc."""\n{body}\n\n\ndef g():\n    return 1\n')
    assert over_budget(module) == []  # 60 lines with its decorator: within budget
    module.write_text(f'@staticmethod\n@staticmethod\ndef f():\n    """Doc."""\n{body}\n')
    assert over_budget(module) == ["f (line 3): 61 lines"]
    module.write_text("x = 1\n" * 501)
    assert over_budget(module) == ["module: 501 lines"]
