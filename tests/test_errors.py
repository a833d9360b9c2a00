"""The error hierarchy: one base, a unique snake_case ``reason`` per class, the tree as documented."""

from __future__ import annotations

import inspect
import re

from core import errors

CLASSES = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.VaultSearchError)]


def test_every_reason_is_unique_and_snake_case() -> None:
    reasons = [c.reason for c in CLASSES]
    assert len(reasons) == len(set(reasons)), sorted(r for r in reasons if reasons.count(r) > 1)
    assert all(re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", r) for r in reasons), reasons


def test_every_reason_is_declared_on_its_own_class() -> None:
    for cls in CLASSES:
        assert "reason" in vars(cls), f"{cls.__name__} inherits its reason"


def test_the_module_docstring_draws_every_class_with_its_reason() -> None:
    doc = errors.__doc__ or ""
    for cls in CLASSES:
        assert re.search(rf"{cls.__name__}\b.*\b{cls.reason}\b", doc), f"{cls.__name__} / {cls.reason} not in the tree"
