"""`vaultsearch eval`: the project's own search, scored on the user's labelled queries."""

from __future__ import annotations

from pathlib import Path

from core import generations as gen
from core.eval.evaluation import DocIdMatcher, EvalReport, evaluate, load_qrels, load_queries
from core.searcher import search_vault


def run_eval(
    vault: Path,
    *,
    queries: Path,
    qrels: Path,
    modes: list[str],
    k: int = 10,
    failures: bool = False,
    index_dir: Path | None = None,
    depth: int = 100,
    model: str | None = None,
    reranker: str | None = None,
) -> EvalReport:
    """Evaluate ``modes`` on a BEIR queries/qrels pair against the vault's verified index.

    ``model`` / ``reranker`` name the embedding model and cross-encoder (preset or directory)
    the dense modes use instead of the index's recorded model and the default reranker."""
    resolved = gen.resolve(gen.layout_for(Path(vault).resolve(), index_dir))
    conn = gen.connect_readonly(resolved)
    try:
        notes = conn.execute("SELECT rel_path, frontmatter_id FROM notes").fetchall()
    finally:
        conn.close()
    matcher = DocIdMatcher(notes)
    options = {"reranker": reranker} if reranker else None

    def search(text: str, mode: str, n: int) -> list[str]:
        return [
            r.rel_path
            for r in search_vault(
                vault, text, mode=mode, limit=n, index_dir=index_dir, passages=False, model=model, options=options
            )
        ]

    return evaluate(
        load_queries(queries), load_qrels(qrels), matcher, search, modes, k=k, depth=depth, failures=failures
    )
