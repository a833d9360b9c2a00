"""SEARCH_MODE_REGISTRY: one frozen spec per retrieval mode, holding the function that runs it.

Dispatch, the CLI's --mode choices, capability checks and the reference table in
docs/architecture.md all come from here: adding a mode is adding one entry.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from core.errors import CapabilityError, UnknownModeError
from core.modes import graph, lexical
from core.modes.context import ModeRun, SearchContext

FULL_TEXT, TERM_VECTORS, DENSE, RERANKER, LINK_GRAPH = (
    "full_text",
    "term_vectors",
    "dense_vectors",
    "reranker",
    "link_graph",
)
DEFAULT_MODE = "auto"
DEPRECATED_ALIASES = MappingProxyType({"hybrid_reranked": "reranked"})


@dataclass(frozen=True)
class ModeSpec:
    name: str
    summary: str
    needs: frozenset[str]
    candidates: tuple[str, ...]
    fusion: str
    fails_closed: bool
    run: Callable[[SearchContext], ModeRun]
    extra: str | None = None  # the pip extra the mode needs


def _dense_modes() -> Any:
    """The dense pipeline (numpy matrices, the model catalog, onnxruntime on first use), imported when a
    dense-capable mode first runs: a process that only runs fts/vector/hybrid never loads it."""
    from core.modes import dense_pipeline

    return dense_pipeline


def _run_semantic(ctx: SearchContext) -> ModeRun:
    return _dense_modes().run_semantic(ctx)


def _run_reranked(ctx: SearchContext) -> ModeRun:
    return _dense_modes().run_reranked(ctx)


def _run_auto(ctx: SearchContext) -> ModeRun:
    """Dense when a verified dense index and its model are ready, else fts, labelled."""
    dense_modes = _dense_modes()
    reason = dense_modes.dense_readiness(ctx)
    if reason is None:
        return dense_modes.run_dense_auto(ctx)
    return _fts_fallback(ctx, reason)


def _fts_fallback(ctx: SearchContext, reason: str) -> ModeRun:
    """fts in place of the mode asked for, labelled as the fallback it is."""
    fts = SEARCH_MODE_REGISTRY["fts"]
    return ModeRun(fts.run(ctx).hits, fts.name, f"{fts.name}_fallback", reason)


_SPECS = (
    ModeSpec(
        "fts",
        "BM25F over the FTS5 tokens (title, description, tags, headings above body); "
        "raw=True passes FTS5 syntax through",
        frozenset({FULL_TEXT, TERM_VECTORS}),
        ("fts",),
        "none",
        False,
        lexical.run_fts,
    ),
    ModeSpec(
        "vector",
        "BM25 over field-weighted chunk term counts (idf^1.5 on the query side, length-normalised per chunk), "
        "best chunk per note",
        frozenset({TERM_VECTORS}),
        ("vector",),
        "none",
        False,
        lexical.run_vector,
    ),
    ModeSpec(
        "hybrid",
        "weighted reciprocal rank fusion (k=60, ranks from 1, weights fts 1.0 / vector 0.4) of fts and vector",
        frozenset({FULL_TEXT, TERM_VECTORS}),
        ("fts", "vector"),
        "rrf",
        False,
        lexical.run_hybrid,
    ),
    ModeSpec(
        "semantic",
        "exact cosine over the generation's dense chunk embeddings, best chunk per note",
        frozenset({DENSE}),
        ("dense",),
        "none",
        True,
        _run_semantic,
        "dense",
    ),
    ModeSpec(
        "reranked",
        "RRF of fts + vector + dense candidates, then an ONNX cross-encoder",
        frozenset({FULL_TEXT, TERM_VECTORS, DENSE, RERANKER}),
        ("fts", "vector", "dense"),
        "rrf+cross_encoder",
        True,
        _run_reranked,
        "dense",
    ),
    ModeSpec(
        "graph_assisted",
        "hybrid anchors, then expansion through links and typed relations "
        "(both directions, 2 hops, score x0.5 per hop)",
        frozenset({FULL_TEXT, TERM_VECTORS, LINK_GRAPH}),
        ("fts", "vector", "graph"),
        "rrf+graph_decay",
        False,
        graph.run_graph,
    ),
    ModeSpec(
        "auto",
        "the default: the dense pipeline when its vectors and model are ready, otherwise fts labelled fts_fallback",
        frozenset({FULL_TEXT, TERM_VECTORS}),
        ("dense|fts",),
        "as chosen",
        False,
        _run_auto,
    ),
)


def _build(specs: tuple[ModeSpec, ...]) -> Mapping[str, ModeSpec]:
    out: dict[str, ModeSpec] = {}
    for spec in specs:
        if spec.name in out or spec.name in DEPRECATED_ALIASES:
            raise RuntimeError(f"duplicate retrieval mode {spec.name!r}")
        out[spec.name] = spec
    return MappingProxyType(out)


SEARCH_MODE_REGISTRY: Mapping[str, ModeSpec] = _build(_SPECS)
MODE_NAMES: tuple[str, ...] = tuple(SEARCH_MODE_REGISTRY)


def get_mode(name: str) -> ModeSpec:
    """The spec of ``name``; a deprecated alias warns, an unknown name lists the valid ones."""
    if name in DEPRECATED_ALIASES:
        target = DEPRECATED_ALIASES[name]
        warnings.warn(f"mode {name!r} is deprecated; use {target!r}", DeprecationWarning, stacklevel=3)
        name = target
    try:
        return SEARCH_MODE_REGISTRY[name]
    except KeyError:
        raise UnknownModeError(f"unknown mode {name!r}; valid modes: {', '.join(MODE_NAMES)}", mode=name) from None


def dispatch(spec: ModeSpec, ctx: SearchContext) -> ModeRun:
    """Run a mode; a fail-closed mode falls back to fts only when the caller allowed it, labelled."""
    try:
        run = spec.run(ctx)
    except CapabilityError as exc:
        if not (spec.fails_closed and ctx.allow_fallback):
            raise
        return _fts_fallback(ctx, exc.reason)
    if run.actual_mode is None:  # ran as the spec says: the label is the spec's name
        return replace(run, actual_mode=spec.name, retrieval_contract=spec.name)
    return run


def markdown_table() -> str:
    """The reference table of docs/architecture.md, generated from the registry."""
    lines = [
        "| mode | what it does | needs | candidates | fusion | fails closed | extra |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in SEARCH_MODE_REGISTRY.values():
        cells = (
            f"`{s.name}`{' (default)' if s.name == DEFAULT_MODE else ''}",
            s.summary,
            ", ".join(sorted(s.needs)),
            ", ".join(s.candidates),
            s.fusion,
            "yes" if s.fails_closed else "no",
            s.extra or "-",
        )
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")  # a "|" in a cell is escaped
    return "\n".join(lines) + "\n"


def modes_json() -> list[dict[str, object]]:
    return [
        {
            "name": s.name,
            "summary": s.summary,
            "needs": sorted(s.needs),
            "candidates": list(s.candidates),
            "fusion": s.fusion,
            "fails_closed": s.fails_closed,
            "extra": s.extra,
            "default": s.name == DEFAULT_MODE,
        }
        for s in SEARCH_MODE_REGISTRY.values()
    ]
