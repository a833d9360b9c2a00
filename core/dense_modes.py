"""Run functions of the dense-backed modes (semantic, reranked) and auto's dense check.

They fail closed with a typed CapabilityError naming what is missing; the searcher turns
that into a labelled fts fallback only when the caller allowed it (or for ``auto``).
"""

from __future__ import annotations

from core.errors import DenseIndexUnavailableError
from core.retrieval import ModeRun, SearchContext


def dense_readiness(ctx: SearchContext) -> str | None:
    """None when a dense pipeline can run honestly, else the stable reason why not."""
    if ctx.conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] == 0:
        return DenseIndexUnavailableError.reason
    return DenseIndexUnavailableError.reason  # model loading lands with the dense issue


def _require_dense(ctx: SearchContext) -> None:
    reason = dense_readiness(ctx)
    if reason is not None:
        raise DenseIndexUnavailableError(
            f"the index of {ctx.vault} has no usable dense vectors ({reason})", vault=str(ctx.vault))


def run_semantic(ctx: SearchContext) -> ModeRun:
    _require_dense(ctx)
    raise AssertionError("unreachable until dense vectors exist")


def run_reranked(ctx: SearchContext) -> ModeRun:
    _require_dense(ctx)
    raise AssertionError("unreachable until dense vectors exist")


def run_dense_auto(ctx: SearchContext) -> ModeRun:
    return run_semantic(ctx)
