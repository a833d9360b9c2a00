"""Reference engines the benchmarks compare vaultsearch against: bare SQLite FTS5 and bm25s.

* :class:`BareFts5` is the floor for build time and the yardstick for query latency and
  quality: one plain FTS5 table (``porter unicode61``) of (title, body), filled in one
  transaction, queried with the OR of the query's quoted words ranked by ``bm25()``.
* :class:`Bm25sBaseline` is bm25s (k1=1.2, b=0.75, English stopwords, Snowball stemmer
  when PyStemmer is importable; ``stemmer`` says which ran) over title + body.

Both read notes the same crude way (:func:`iter_vault_notes`): every ``*.md`` under the
vault, YAML frontmatter split off, the title from a ``title:`` line or the file stem.

``python -m bench.baselines`` builds both on SciFact (and bare FTS5 on PowerShell docs),
times the builds and the dev queries and scores nDCG@10; it writes
``bench/results/baselines.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.common import (
    DATA_DIR,
    RESULTS_DIR,
    load_qrels,
    load_queries,
    machine_info,
    mean_ndcg,
    timed,
    write_json,
)

try:  # optional: PyStemmer gives bm25s its Snowball stemmer; without it bm25s runs unstemmed.
    import Stemmer as _pystemmer
except ModuleNotFoundError:
    _pystemmer = None

_WORD = re.compile(r"\w+", re.UNICODE)
_TITLE_LINE = re.compile(r"^title:\s*(.*?)\s*$")


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """Crudely split ``---`` YAML frontmatter off a note: ``(title or None, body)``.

    Only the ``title:`` line is read (surrounding quotes stripped); no YAML parser, on
    purpose: this is what a minimal FTS5 indexer would do.
    """
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---", 4)
    if end < 0:
        return None, text
    title = None
    for line in text[4:end].splitlines():
        match = _TITLE_LINE.match(line)
        if match:
            title = match.group(1).strip("'\"") or None
            break
    after = text.find("\n", end + 4)
    body = text[after + 1 :] if after >= 0 else ""
    return title, body


def iter_vault_notes(vault: Path) -> Iterator[tuple[str, str, str]]:
    """Yield ``(rel_path, title, body)`` for every ``*.md`` under ``vault`` in sorted path order."""
    for root, dirs, files in os.walk(vault):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            full = Path(root, name)
            title, body = split_frontmatter(full.read_text(encoding="utf-8"))
            yield full.relative_to(vault).as_posix(), title or full.stem, body


def fts5_or_query(query: str) -> str:
    """The FTS5 MATCH expression ``"w1" OR "w2" ...`` of the query's words ('' if it has none)."""
    return " OR ".join(f'"{word}"' for word in _WORD.findall(query))


class BareFts5:
    """Plain FTS5 over (title, body) in a file database: the simplest index one could build."""

    DDL = "CREATE VIRTUAL TABLE t USING fts5(rel_path UNINDEXED, title, body, tokenize='porter unicode61')"
    INSERT = "INSERT INTO t (rel_path, title, body) VALUES (?, ?, ?)"
    SEARCH = "SELECT rel_path FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?"

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None

    def build(self, vault: Path, db_path: Path) -> float:
        """Read every note and fill a fresh database at ``db_path`` in one transaction; return seconds."""
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{db_path}{suffix}").unlink(missing_ok=True)
        start = time.perf_counter()
        conn = sqlite3.connect(db_path)
        conn.execute(self.DDL)
        with conn:
            conn.executemany(self.INSERT, iter_vault_notes(vault))
        self._conn = conn
        return time.perf_counter() - start

    def search(self, query: str, k: int = 10) -> list[str]:
        """Top-``k`` rel_paths by bm25 for the OR of the query's words ([] for a query with no words)."""
        if self._conn is None:
            raise RuntimeError("BareFts5.search called before build")
        expr = fts5_or_query(query)
        if not expr:
            return []
        return [row[0] for row in self._conn.execute(self.SEARCH, (expr, k))]

    def close(self) -> None:
        """Close the database connection if one is open."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class Bm25sBaseline:
    """bm25s over title + body: default tokenizer, English stopwords, Snowball stemmer if installed."""

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        import bm25s  # the bench-only dependency is needed only when this baseline is used

        self._bm25s = bm25s
        self.k1 = k1
        self.b = b
        self.stemmer_name: str | None = "snowball-english (PyStemmer)" if _pystemmer is not None else None
        self._stemmer = _pystemmer.Stemmer("english").stemWords if _pystemmer is not None else None
        self._retriever: Any = None
        self._paths: list[str] = []

    def _tokenize(self, texts: Sequence[str], *, return_ids: bool) -> Any:
        return self._bm25s.tokenize(
            list(texts), stopwords="en", stemmer=self._stemmer, return_ids=return_ids, show_progress=False
        )

    def build(self, vault: Path) -> float:
        """Read every note, tokenize and index it; return seconds (reading included, like BareFts5)."""
        start = time.perf_counter()
        notes = list(iter_vault_notes(vault))
        self._paths = [rel for rel, _title, _body in notes]
        tokens = self._tokenize([f"{title}\n{body}" for _rel, title, body in notes], return_ids=True)
        retriever = self._bm25s.BM25(k1=self.k1, b=self.b)
        retriever.index(tokens, show_progress=False)
        self._retriever = retriever
        return time.perf_counter() - start

    def search(self, query: str, k: int = 10) -> list[str]:
        """Top-``k`` rel_paths with a positive BM25 score (notes sharing no term are not hits)."""
        if self._retriever is None:
            raise RuntimeError("Bm25sBaseline.search called before build")
        tokens = self._tokenize([query], return_ids=False)
        docs, scores = self._retriever.retrieve(tokens, k=min(k, len(self._paths)), show_progress=False)
        return [self._paths[int(d)] for d, s in zip(docs[0], scores[0]) if s > 0]


# ---------------------------------------------------------------- the baseline run


def _stem_of(rel_path: str) -> str:
    """SciFact's corpus-id is the note's file stem."""
    return Path(rel_path).stem


def evaluate_engine(
    engine: BareFts5 | Bm25sBaseline, queries: dict[str, str], qrels: dict[str, dict[str, int]], k: int = 10
) -> dict[str, float]:
    """Run every query once (after one warm-up); return median/p95 latency in ms and nDCG@k."""
    engine.search(next(iter(queries.values())), k)
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, text in queries.items():
        hits, seconds = timed(engine.search, text, k)
        latencies.append(seconds * 1000.0)
        run[qid] = [_stem_of(p) for p in hits]
    latencies.sort()
    return {
        "median_query_ms": round(statistics.median(latencies), 3),
        "p95_query_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 3),
        f"ndcg@{k}": round(mean_ndcg(run, qrels, k), 4),
        "queries": len(queries),
    }


def _median_build(build_once: Any, repeats: int) -> tuple[float, list[float]]:
    """Median and all samples of ``repeats`` calls of ``build_once() -> seconds``."""
    samples = [build_once() for _ in range(repeats)]
    return statistics.median(samples), samples


def run_baselines(tmp_dir: Path, *, repeats: int = 3) -> dict[str, Any]:
    """Build both baselines on SciFact (quality + latency on dev) and bare FTS5 on PowerShell docs."""
    scifact = DATA_DIR / "scifact"
    queries = load_queries(scifact / "dev_queries.jsonl")
    qrels = load_qrels(scifact / "dev_qrels.tsv")
    fts, bm = BareFts5(), Bm25sBaseline()
    out: dict[str, Any] = {"machine": machine_info(), "bm25s_stemmer": bm.stemmer_name, "repeats": repeats}
    fts_sec, fts_samples = _median_build(lambda: fts.build(scifact / "vault", tmp_dir / "scifact.db"), repeats)
    bm_sec, bm_samples = _median_build(lambda: bm.build(scifact / "vault"), repeats)
    out["scifact"] = {
        "bare_fts5": {
            "build_seconds": round(fts_sec, 3),
            "build_samples": fts_samples,
            **evaluate_engine(fts, queries, qrels),
        },
        "bm25s": {
            "build_seconds": round(bm_sec, 3),
            "build_samples": bm_samples,
            **evaluate_engine(bm, queries, qrels),
        },
    }
    fts.close()
    ps = DATA_DIR / "powershell-docs" / "reference"
    ps_sec, ps_samples = _median_build(lambda: fts.build(ps, tmp_dir / "powershell.db"), repeats)
    bm_ps_sec, bm_ps_samples = _median_build(lambda: bm.build(ps), repeats)
    fts.close()
    out["powershell"] = {
        "bare_fts5": {"build_seconds": round(ps_sec, 3), "build_samples": ps_samples},
        "bm25s": {"build_seconds": round(bm_ps_sec, 3), "build_samples": bm_ps_samples},
    }
    return out


def render_markdown(results: dict[str, Any]) -> str:
    """Markdown table of a :func:`run_baselines` result (docs are generated from the JSON)."""
    rows = [
        "| corpus | engine | build s | median query ms | p95 query ms | nDCG@10 (dev) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for corpus in ("scifact", "powershell"):
        for engine, res in results[corpus].items():
            rows.append(
                f"| {corpus} | {engine} | {res['build_seconds']:.3f} | "
                f"{_fmt(res.get('median_query_ms'))} | {_fmt(res.get('p95_query_ms'))} | "
                f"{_fmt(res.get('ndcg@10'), 4)} |"
            )
    machine = results["machine"]
    rows.append("")
    rows.append(
        f"bm25s stemmer: {results['bm25s_stemmer'] or 'none (PyStemmer not installed)'}; "
        f"build = median of {results['repeats']}; {machine['cpu_model']}, {machine['cores']} cores, "
        f"Python {machine['python']}, SQLite {machine['sqlite_version']}, load {machine['load_avg_1m']}, "
        f"{machine['date']}"
    )
    return "\n".join(rows)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: run the baselines, write JSON, print the Markdown table."""
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "baselines.json")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vs-baselines-") as tmp:
        results = run_baselines(Path(tmp), repeats=args.repeats)
    write_json(args.out, results)
    print(render_markdown(results))


if __name__ == "__main__":
    main()
