"""`vaultsearch eval`: the project's own search, scored on the user's labelled queries."""

from __future__ import annotations

from pathlib import Path

from core.eval.evaluation import EvalReport, RankedPaths, evaluate
from core.eval.inputs import load_qrels, load_queries
from core.eval.matching import DocIdMatcher
from core.index.layout import layout_for
from core.index.tables.notes import visible_doc_ids
from core.index.verify import connect_readonly, resolve
from core.ranking.filters import Filters
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
    classifications: list[str] | tuple[str, ...] | None = None,
) -> EvalReport:
    """Evaluate ``modes`` on a BEIR queries/qrels pair against the vault's verified index.

    ``model`` / ``reranker`` name the embedding model and cross-encoder (preset or directory)
    the dense modes use instead of the index's recorded model and the default reranker.
    ``classifications`` (as for search_vault) evaluates as a caller who sees only those notes: qrels
    ids are matched against the visible notes alone, so no report line names a hidden note; None
    (the default) sees every note, secret ones included."""
    filters = Filters.make(classifications=list(classifications) if classifications is not None else None)
    resolved = resolve(layout_for(Path(vault).resolve(), index_dir))
    conn = connect_readonly(resolved)
    try:
        clause, vals = filters.visible_classification_clause()
        notes = visible_doc_ids(conn, clause, vals)
    finally:
        conn.close()
    matcher = DocIdMatcher(notes)
    options = {"reranker": reranker} if reranker else None

    def search(text: str, mode: str, n: int) -> RankedPaths:
        results = search_vault(
            vault,
            text,
            mode=mode,
            limit=n,
            index_dir=index_dir,
            passages=False,
            model=model,
            options=options,
            classifications=filters.classifications,
        )
        return RankedPaths([r.rel_path for r in results], results.actual_mode, results.fallback_reason)

    return evaluate(
        load_queries(queries), load_qrels(qrels), matcher, search, modes, k=k, depth=depth, failures=failures
    )
