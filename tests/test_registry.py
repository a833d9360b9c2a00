"""SEARCH_MODE_REGISTRY: the one lookup, its aliases, its refusals, and the doc table generated from it."""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from core import registry
from core.errors import CapabilityError, DenseIndexUnavailableError, UnknownModeError, UsageError
from core.modes.context import ModeRun
from core.registry import (
    DEFAULT_MODE,
    DEPRECATED_ALIASES,
    MODE_NAMES,
    SEARCH_MODE_REGISTRY,
    ModeSpec,
    dispatch,
    get_mode,
    markdown_table,
    modes_json,
)

ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
START, END = "<!-- modes:start -->", "<!-- modes:end -->"
MODES = {"fts", "vector", "hybrid", "semantic", "reranked", "graph_assisted", "auto"}


def test_registry_holds_exactly_the_spec_modes_and_auto_is_the_default():
    assert set(SEARCH_MODE_REGISTRY) == MODES
    assert MODE_NAMES == tuple(SEARCH_MODE_REGISTRY)
    assert DEFAULT_MODE == "auto"
    assert "hybrid_reranked" not in SEARCH_MODE_REGISTRY and DEPRECATED_ALIASES["hybrid_reranked"] == "reranked"


def test_every_spec_is_frozen_named_by_its_key_and_holds_its_run_function():
    for name, spec in SEARCH_MODE_REGISTRY.items():
        assert spec.name == name and callable(spec.run) and spec.summary
        assert spec.needs <= {
            registry.FULL_TEXT,
            registry.TERM_VECTORS,
            registry.DENSE,
            registry.RERANKER,
            registry.LINK_GRAPH,
        }
        with pytest.raises(dataclasses.FrozenInstanceError):
            spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        SEARCH_MODE_REGISTRY["new"] = SEARCH_MODE_REGISTRY["fts"]  # type: ignore[index]


def test_exactly_the_dense_modes_fail_closed_and_name_their_extra():
    closed = {n for n, s in SEARCH_MODE_REGISTRY.items() if s.fails_closed}
    assert closed == {"semantic", "reranked"}
    assert all(registry.DENSE in SEARCH_MODE_REGISTRY[n].needs and SEARCH_MODE_REGISTRY[n].extra for n in closed)
    model_free = set(MODES) - closed
    assert all(registry.DENSE not in SEARCH_MODE_REGISTRY[n].needs for n in model_free)
    assert registry.LINK_GRAPH in SEARCH_MODE_REGISTRY["graph_assisted"].needs


def test_get_mode_returns_the_spec():
    assert get_mode("hybrid") is SEARCH_MODE_REGISTRY["hybrid"]


def test_unknown_mode_is_a_value_error_listing_the_valid_modes():
    with pytest.raises(ValueError) as info:
        get_mode("bm42")
    exc = info.value
    assert isinstance(exc, UnknownModeError) and isinstance(exc, UsageError)
    assert exc.reason == "unknown_mode" and exc.evidence["mode"] == "bm42"
    assert all(name in str(exc) for name in MODE_NAMES)
    assert "hybrid_reranked" not in str(exc)  # the deprecated alias is accepted, never advertised


def test_deprecated_alias_warns_and_resolves_to_its_target():
    with pytest.warns(DeprecationWarning, match="reranked"):
        spec = get_mode("hybrid_reranked")
    assert spec is SEARCH_MODE_REGISTRY["reranked"]


def test_a_real_mode_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in MODE_NAMES:
            get_mode(name)


def test_duplicate_mode_names_fail_at_build_time():
    fts = SEARCH_MODE_REGISTRY["fts"]
    with pytest.raises(RuntimeError):
        registry._build((fts, fts))
    with pytest.raises(RuntimeError):
        registry._build((dataclasses.replace(fts, name="hybrid_reranked"),))


def _spec(run, *, fails_closed: bool) -> ModeSpec:
    return ModeSpec("probe", "a probe", frozenset(), ("x",), "none", fails_closed, run)


def test_dispatch_calls_the_run_function_of_the_spec():
    seen = []
    run = ModeRun([], "probe", "probe")
    assert dispatch(_spec(lambda ctx: seen.append(ctx) or run, fails_closed=False), "ctx") is run  # type: ignore
    assert seen == ["ctx"]


def _raise_capability(ctx):
    raise DenseIndexUnavailableError("no vectors")


def test_dispatch_fail_closed_mode_raises_unless_the_caller_allowed_fallback():
    with pytest.raises(DenseIndexUnavailableError):
        dispatch(_spec(_raise_capability, fails_closed=True), SimpleNamespace(allow_fallback=False))  # type: ignore


def test_dispatch_never_falls_back_for_a_mode_that_does_not_fail_closed():
    with pytest.raises(CapabilityError):
        dispatch(_spec(_raise_capability, fails_closed=False), SimpleNamespace(allow_fallback=True))  # type: ignore


def test_markdown_table_has_one_row_per_mode_in_registry_order():
    lines = markdown_table().splitlines()
    assert lines[0].startswith("| mode |") and set(lines[1]) <= {"|", "-"}
    rows = lines[2:]
    assert [r.split("`")[1] for r in rows] == list(MODE_NAMES)
    assert "(default)" in rows[MODE_NAMES.index(DEFAULT_MODE)]
    assert sum("(default)" in r for r in rows) == 1
    assert "hybrid_reranked" not in markdown_table()
    cells = lambda line: len(re.findall(r"(?<!\\)\|", line))  # noqa: E731 - unescaped pipes
    assert all(cells(r) == cells(lines[0]) for r in rows)  # no stray "|" adds a column to a row


def test_modes_json_mirrors_the_registry():
    items = modes_json()
    assert [m["name"] for m in items] == list(MODE_NAMES)
    for m in items:
        spec = SEARCH_MODE_REGISTRY[m["name"]]
        assert m["fails_closed"] == spec.fails_closed and set(m["needs"]) == spec.needs
        assert m["default"] == (m["name"] == DEFAULT_MODE)


def test_architecture_doc_table_is_generated_from_the_registry():
    """Regenerate with: python -m core.cli modes --markdown (paste between the markers)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    between = text[text.index(START) + len(START) : text.index(END)]
    assert between == "\n" + markdown_table()
