"""A long-lived reader switching to a generation that adds one small segment (issue 29, storage step 2b):
what the ranking arrays cost when the big segment is already cached (core.modes.segment_arrays).

The corpus is built twice: ``base`` (every note but the last one by path) and ``small`` (that note alone,
its note id shifted past the base's, as a build numbers notes once). The reader holds the base's arrays;
the new generation is base + small with one base note tombstoned (the edited note's old version). Timed,
median of ``--repeat``:

- ``load_small_ms``: the new segment's arrays (load_sparse + paths; chunk vectors);
- ``tombstone_ms``: the dead row's per-class statistics counted from the base's arrays;
- ``combine_ms`` / ``combine_chunks_ms``: the combined index and chunk vectors (strategy (a): O(postings));
- ``first_query_vocabulary_ms``: the query vocabulary and BM25F factors the first query builds (the
  combined index has no stored vocabulary; the base loads the build's), not a median;
- ``cold_load_ms``: for scale, loading the base's whole arrays (what a reader without the cache pays);
- ``query_p50_ms``: fts scoring (bm25_scores of the analysed terms) of the dev queries, combined index vs base.

    .venv/bin/python -m bench.bench_segment_arrays --corpus scifact --work /tmp/segarr-scifact [--out FILE]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA_DIR, copy_vault, load_queries, machine_info, write_json


def _median_ms(fn: Any, repeat: int) -> tuple[Any, float]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, round(statistics.median(times) * 1000, 2)


def _built(src: Path, dst: Path, keep: Any) -> Path:
    from core.build.builder import build_index

    if not (dst / ".vaultsearch").exists():
        shutil.rmtree(dst, ignore_errors=True)
        copy_vault(src, dst)
        for path in sorted(dst.rglob("*.md")):
            if not keep(path.relative_to(dst).as_posix()):
                path.unlink()
        build_index(dst)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="scifact")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from core import generations as gen
    from core.ranking import segments
    from core.ranking.chunk_vectors import load_chunk_vectors
    from core.ranking.expansion import QueryAnalyzer, vocabulary
    from core.ranking.segment_chunks import combine_chunks
    from core.ranking.sparse import bm25_scores, load_sparse, query_postings

    src = DATA_DIR / args.corpus / "vault"
    src = src if src.is_dir() else DATA_DIR / args.corpus
    names = sorted(p.relative_to(src).as_posix() for p in src.rglob("*.md"))
    last = names[-1]
    base_root = _built(src, args.work / "base", lambda p: p != last)
    small_root = _built(src, args.work / "small", lambda p: p == last)

    def load(root: Path, shift: int) -> tuple[segments.Segment, Any]:
        conn = gen.connect_readonly(gen.resolve(gen.layout_for(root)))
        sparse = load_sparse(conn)
        by_id = {i: p for p, i in conn.execute("SELECT rel_path, id FROM notes")}
        chunks = load_chunk_vectors(conn, sparse)
        paths = [by_id[int(i)] for i in sparse.note_ids]
        return segments.Segment(root.name, replace(sparse, note_ids=sparse.note_ids + shift), paths), chunks

    (base, base_chunks), cold_ms = _median_ms(lambda: load(base_root, 0), 1)
    shift = int(base.sparse.note_ids.max())
    (small, small_chunks), small_ms = _median_ms(lambda: load(small_root, shift), args.repeat)
    tomb, tomb_ms = _median_ms(lambda: segments.tombstone(base.sparse, np.asarray([0])), args.repeat)
    parts = [(base, tomb), (small, None)]
    combined, combine_ms = _median_ms(lambda: segments.combine(parts), args.repeat)
    _, chunks_ms = _median_ms(lambda: combine_chunks(combined, [base_chunks, small_chunks]), args.repeat)
    queries = _queries(args.corpus)

    def first_use(sparse: Any) -> Any:  # what the first query after the switch computes once
        return QueryAnalyzer(sparse.term_id, vocabulary(sparse), ["en"]).analyse(queries[0]), sparse.factors()

    _, vocab_ms = _median_ms(lambda: first_use(combined.sparse), 1)
    _, vocab_base_ms = _median_ms(lambda: first_use(base.sparse), 1)

    def p50(sparse: Any) -> float:
        """fts's scoring of each dev query's analysed terms (analysis not timed), median."""
        analyzer = QueryAnalyzer(sparse.term_id, vocabulary(sparse), ["en"])
        times = []
        for q in queries:
            a = analyzer.analyse(q)
            start = time.perf_counter()
            bm25_scores(sparse, a.terms, query_postings(sparse, a.terms, a.weights, a.cover))
            times.append(time.perf_counter() - start)
        return round(statistics.median(times) * 1000, 2)

    result = {
        "machine": machine_info(),
        "corpus": args.corpus,
        "notes": base.sparse.n_docs + small.sparse.n_docs,
        "postings": int(base.sparse.indptr[-1]),
        "cold_load_ms": cold_ms,
        "load_small_ms": small_ms,
        "tombstone_ms": tomb_ms,
        "combine_ms": combine_ms,
        "combine_chunks_ms": chunks_ms,
        "first_query_vocabulary_ms": {"combined": vocab_ms, "base": vocab_base_ms},
        "query_p50_ms": {"combined": p50(combined.sparse), "base": p50(base.sparse)},
    }
    print(result)
    if args.out:
        write_json(args.out, result)


def _queries(corpus: str) -> list[str]:
    found = DATA_DIR / corpus / "dev_queries.jsonl"
    if not found.exists():
        return ["get help about commands", "set execution policy", "remote session", "module path"]
    return list(load_queries(found).values())


if __name__ == "__main__":
    main()
