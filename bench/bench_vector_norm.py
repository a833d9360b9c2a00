"""Issue 29 (segments step 1b): the `vector` mode's chunk norm without idf, evaluated beside today's.

``python -m bench.bench_vector_norm [--workdir /tmp/vs-vecnorm] [--variants a,b] [--modes vector,hybrid]
[--corpora scifact,dendron,...] [--out bench/results/vector_norm.json]``

Today's `vector` (before issue 29) stored per chunk ``(1 + ln tf) * idf`` divided by the chunk's pivoted
norm, the norm taken over the idf-weighted vector: one edit moves the df of hundreds of terms and with
them the stored weight of most chunks. Each variant here scores a query against a chunk as

    score(q, c) = sum_t q_t * w(t, c) / P(c),   q_t = (1 + ln qtf_t) * a_t * idf_t ** p  (then L2-normalised)

with ``a_t`` the query analysis' term weight, ``idf`` = ``scoring.tfidf_idf`` over notes, ``w`` the
stored per-posting weight and ``P(c) = (1 - s) * mean(N) + s * N(c)`` the pivoted chunk norm (slope
``s`` = VECTOR_PIVOT_SLOPE). Variants (``VARIANTS``):

* ``today``: w = (1 + ln tf) * idf, N = L2 norm of w (idf inside the norm), p = 1.
* ``sub_l2_idf2``: w = 1 + ln tf, N = L2 norm of w (idf-free), p = 2 (the idf^2 per term of today).
* ``sub_l2_idf1``: as above, p = 1.
* ``sub_len_idf2``: w = 1 + ln tf, N = the chunk's length (sum of its weighted tf), p = 2.
* ``bm25_idf2``: w = tf (k1 + 1) / (tf + k1 (1 - b + b len / avg len)), k1 1.2, b 0.75, P = 1, p = 2.
* ``bm25_idf1``: as above, p = 1.

Everything a variant stores depends on its chunk alone; ``idf``, ``mean(N)`` and the average length
are computed per query / per generation from sums (what segments need). Each variant replaces
``core.modes.lexical.vector_scores`` in this process, so `vector`, `hybrid` and `graph_assisted` run
through the real modes (name and identifier bonuses, RRF fusion) via ``search_vault``. ``--check``:
the variant ``CORE_VARIANT`` (what ``core.ranking.chunk_vectors`` implements) must give the scores
core gives, on the first queries of every corpus.

Sets: SciFact dev and train, the Dendron and PowerShell known-item dev sets, the MDN en/de/zh dev
sets (title, heading, wordform / substring); corpora are copied into ``--workdir`` before indexing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA_DIR, RESULTS_DIR, load_qrels, load_queries
from core import generations as gen
from core.build.builder import build_index
from core.eval.metrics import mean, ndcg_at_k
from core.modes import lexical
from core.ranking import chunk_vectors, scoring
from core.ranking.postings import TermMajor
from core.ranking.sparse import QueryPostings, SparseIndex, gather_postings, load_sparse, query_postings, query_term_ids
from core.searcher import search_vault

CORE_VARIANT = "bm25_idf1.5"  # what core.ranking.chunk_vectors implements (before issue 29: "today")
SLOPE = 0.3
BM25_K1, BM25_B = 1.2, 0.75  # core.ranking.chunk_vectors.VECTOR_K1 / VECTOR_B


@dataclass(frozen=True)
class Variant:
    tf: str  # "sublinear" (1 + ln tf) or "bm25" (saturated, length-normalised)
    norm: str  # "l2_idf" (today), "l2", "length" or "none"
    idf_power: float  # the power of idf on the query side


VARIANTS = {
    "today": Variant("sublinear", "l2_idf", 1),
    "sub_l2_idf2": Variant("sublinear", "l2", 2),
    "sub_l2_idf1": Variant("sublinear", "l2", 1),
    "sub_l2_idf1.5": Variant("sublinear", "l2", 1.5),
    "sub_len_idf2": Variant("sublinear", "length", 2),
    "bm25_idf2": Variant("bm25", "none", 2),
    "bm25_idf1": Variant("bm25", "none", 1),
    "bm25_idf1.5": Variant("bm25", "none", 1.5),
}

ML = DATA_DIR / "multilingual"
KNOWN = DATA_DIR / "known-item"
SF = DATA_DIR / "scifact"


def corpora() -> dict[str, tuple[Path, dict[str, tuple[Path, Path]], Callable[[str], str]]]:
    """name -> (vault, {set: (queries, qrels)}, corpus-id of a rel path)."""
    out: dict[str, Any] = {
        "scifact": (SF / "vault", {s: (SF / f"{s}_queries.jsonl", SF / f"{s}_qrels.tsv") for s in ("dev", "train")}),
        "dendron": (DATA_DIR / "dendron" / "vault", {"known_item": _pair(KNOWN, "dendron_dev")}),
        "powershell": (DATA_DIR / "powershell-docs" / "reference", {"known_item": _pair(KNOWN, "powershell_dev")}),
    }
    for lang in ("en", "de", "zh"):
        sets = {
            q.name.split("_")[1]: _pair(ML / "queries", q.name.removesuffix("_queries.jsonl"))
            for q in sorted((ML / "queries").glob(f"{lang}_*_dev_queries.jsonl"))
        }
        out[f"mdn-{lang}"] = (ML / "vault" / lang, sets)
    return {
        name: (vault, sets, (lambda rel: Path(rel).stem) if name == "scifact" else _ml_id(name))
        for name, (vault, sets) in out.items()
    }


def _pair(folder: Path, stem: str) -> tuple[Path, Path]:
    return folder / f"{stem}_queries.jsonl", folder / f"{stem}_qrels.tsv"


def _ml_id(name: str) -> Callable[[str], str]:
    prefix = name.removeprefix("mdn-") + "/" if name.startswith("mdn-") else ""
    return lambda rel: prefix + rel


# ---------------------------------------------------------------- the variants' arrays


@dataclass
class Raw:
    """A generation's chunk postings, term-major, with nothing derived: weighted tf and chunk lengths."""

    indptr: np.ndarray
    rows: np.ndarray  # int32 chunk row per posting
    tf: np.ndarray  # float32 weighted tf per posting (the stored count / CHUNK_UNIT)
    length: np.ndarray  # int64 per chunk: sum of its stored counts (CHUNK_UNIT units)
    n_chunks: int


def read_raw(conn: Any, sp: SparseIndex) -> Raw:
    from core.build.forward_rows import load_working  # a stored part holds postings term-major only

    load_working(conn)  # its chunk rows as the working tables the variants are computed from
    _, _, counts, terms, tf16 = chunk_vectors.read_chunk_rows(conn)
    n_terms = max(int(sp.df.shape[0]), int(terms.max(initial=-1)) + 1)
    chunk_of = np.repeat(np.arange(counts.shape[0], dtype=np.int32), counts)
    length = np.bincount(chunk_of, weights=tf16, minlength=counts.shape[0]).astype(np.int64)
    layout = TermMajor(terms, n_terms)
    order, dest = layout.slots(terms)
    rows, out_tf = np.empty_like(chunk_of), np.empty_like(tf16)
    rows[dest], out_tf[dest] = chunk_of[order], tf16[order]
    tf = out_tf.astype(np.float32) / np.float32(chunk_vectors.CHUNK_UNIT)
    return Raw(layout.indptr, rows, tf, length, int(counts.shape[0]))


@dataclass
class Prepared:
    weights: np.ndarray  # float32 per posting: the stored weight (bm25: the tf)
    per_chunk: np.ndarray  # per chunk: the pivoted norm (bm25: the length factor)
    idf: np.ndarray  # float32 per term
    variant: Variant


def prepare(raw: Raw, sp: SparseIndex, v: Variant) -> Prepared:
    df = np.zeros(raw.indptr.shape[0] - 1, dtype=np.int64)
    df[: sp.df.shape[0]] = sp.df
    idf = scoring.tfidf_idf(df, sp.n_docs)
    if v.tf == "bm25":
        return Prepared(raw.tf, scoring.chunk_length_factors(raw.length, BM25_K1, BM25_B), idf, v)
    w = scoring.tfidf_weights(raw.tf, np.ones(1, np.float32))
    if v.norm == "l2_idf":
        w = (w * idf[np.repeat(np.arange(df.shape[0]), np.diff(raw.indptr))]).astype(np.float32)
    if v.norm in ("l2", "l2_idf"):
        pivoted = scoring.pivoted_lengths(scoring.row_norms(raw.rows, w, raw.n_chunks), SLOPE)
    else:  # "length"
        pivoted = scoring.pivoted_lengths(raw.length / chunk_vectors.CHUNK_UNIT, SLOPE)
    return Prepared(w, pivoted, idf, v)


def variant_scores(raw: Raw, p: Prepared) -> Callable[..., chunk_vectors.VectorScores]:
    """A drop-in for ``vector_scores`` scoring with the variant's arrays (same structure otherwise)."""

    def scores_of(
        index: SparseIndex, vectors: Any, terms: list[str], postings: QueryPostings | None = None
    ) -> chunk_vectors.VectorScores:
        ids, qtf = query_term_ids(index, terms)
        n = index.n_docs
        scores = np.zeros(n, dtype=np.float32)
        if ids.size == 0:
            return chunk_vectors.VectorScores(scores, np.zeros(n, dtype=np.float32), np.zeros(raw.n_chunks))
        weight = postings.weight if postings is not None else None
        q = scoring.chunk_query_weights(qtf, p.idf[ids], p.variant.idf_power, weight)
        pos, owner = gather_postings(raw.indptr, ids)
        rows = raw.rows[pos]
        if p.variant.tf == "bm25":
            per_chunk = scoring.bm25_chunk_scores(
                rows, p.weights[pos], p.per_chunk[rows], q[owner], BM25_K1, raw.n_chunks
            )
        else:
            per_chunk = np.bincount(rows, weights=p.weights[pos] * q[owner], minlength=raw.n_chunks) / p.per_chunk
        if vectors.group_starts.size:
            best = np.maximum.reduceat(per_chunk, vectors.group_starts)
            known = vectors.group_rows >= 0
            scores[vectors.group_rows[known]] = best[known]
        docs = (postings if postings is not None else query_postings(index, terms)).docs
        return chunk_vectors.VectorScores(scores, np.bincount(docs, minlength=n).astype(np.float32), per_chunk)

    return scores_of


# ---------------------------------------------------------------- running


def copy_vault(name: str, vault_src: Path, work: Path) -> Path:
    vault = work / name / "vault"
    if not vault.exists():
        shutil.copytree(vault_src, vault)
    return vault


def index_corpus(name: str, vault_src: Path, work: Path) -> tuple[Path, Path]:
    vault, index_dir = copy_vault(name, vault_src, work), work / name / "index"
    build_index(vault, index_dir=index_dir)  # up to date: publishes nothing
    return vault, index_dir


def checked(core: Callable[..., Any], scorer: Callable[..., Any], worst: dict[str, float]) -> Callable[..., Any]:
    """``scorer``, also calling core's ``vector_scores`` with the same arguments (the real query analysis
    of each search) and keeping the largest difference of the two in ``worst["diff"]``."""

    def both(*args: Any) -> Any:
        mine, theirs = scorer(*args), core(*args)
        worst["diff"] = max(worst["diff"], float(np.abs(mine.scores - theirs.scores).max(initial=0.0)))
        worst["queries"] += 1
        return mine

    return both


def run_corpus(name: str, spec: tuple, work: Path, variants: list[str], modes: list[str], check: str | None) -> dict:
    vault_src, sets, ident = spec
    vault, index_dir = index_corpus(name, vault_src, work)
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault, index_dir)))
    sp = load_sparse(conn)
    raw = read_raw(conn, sp)
    loaded = {s: (load_queries(q), load_qrels(r)) for s, (q, r) in sets.items()}
    out: dict[str, Any] = {}
    original = lexical.vector_scores
    try:
        for vname in variants:
            scorer = variant_scores(raw, prepare(raw, sp, VARIANTS[vname]))
            if vname == check:
                worst = out.setdefault("check", {vname: {"diff": 0.0, "queries": 0}})[vname]
                scorer = checked(original, scorer, worst)
            lexical.vector_scores = scorer
            for set_name, (queries, qrels) in loaded.items():
                for mode in modes:
                    vals = []
                    for qid, text in queries.items():
                        if qid not in qrels:
                            continue
                        hits = search_vault(
                            vault, text, mode=mode, limit=10, index_dir=index_dir, passages=False, freshness=False
                        )
                        vals.append(ndcg_at_k([ident(h.rel_path) for h in hits], qrels[qid], 10))
                    out.setdefault(set_name, {}).setdefault(mode, {})[vname] = round(mean(vals), 4)
                    out[set_name]["n"] = len(vals)
            print(name, vname, {s: {m: r[m][vname] for m in modes} for s, r in out.items() if s in loaded}, flush=True)
    finally:
        lexical.vector_scores = original
        conn.close()
    return out


# Runs in a subprocess whose working directory is a code tree (its ``core`` comes first): the time of
# ``vector_scores`` per query (warm: vectors loaded, each query run REPEATS times, the best kept), and of
# loading the chunk vectors from the stored arrays (the best of REPEATS). Only the API both trees share.
_LATENCY_SCRIPT = """
import json, statistics, sys, time
from pathlib import Path
from core import generations as gen
from core.build.builder import build_index
from core.ranking.analysis import language_analyzer_for
from core.ranking.chunk_vectors import load_chunk_vectors, vector_scores
from core.ranking.sparse import load_sparse
vault, index_dir, queries = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(Path(sys.argv[3]).read_text())
build_index(vault, index_dir=index_dir)
conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault, index_dir)))
sp = load_sparse(conn)
an = language_analyzer_for("en")  # SciFact's terms, "en:"-tagged as the index holds them
loads = []
for _ in range(REPEATS):
    t = time.perf_counter(); vectors = load_chunk_vectors(conn, sp); loads.append(time.perf_counter() - t)
load_ms = min(loads) * 1000
best = []
for text in queries:
    terms, runs = an.terms(text), []
    for _ in range(REPEATS):
        t = time.perf_counter(); vector_scores(sp, vectors, terms); runs.append(time.perf_counter() - t)
    best.append(min(runs) * 1000)
best.sort()
print(json.dumps({"queries": len(best), "p50_ms": statistics.median(best), "p95_ms": best[int(0.95 * (len(best) - 1))],
                  "mean_ms": statistics.fmean(best), "load_ms": load_ms, "chunk_bytes": int(vectors.nbytes)}))
"""
LATENCY_REPEATS = 5


def latency(trees: dict[str, Path], work: Path) -> dict[str, Any]:
    """Per code tree: ``vector_scores`` per SciFact train query (ms) and the chunk vectors' load time."""
    vault_src, sets, _ = corpora()["scifact"]
    vault = copy_vault("scifact", vault_src, work)
    queries = work / "latency_queries.json"
    queries.write_text(json.dumps(list(load_queries(sets["train"][0]).values())))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    out = {}
    for name, tree in trees.items():
        script = _LATENCY_SCRIPT.replace("REPEATS", str(LATENCY_REPEATS))
        args = [sys.executable, "-c", script, str(vault), str(work / f"latency_{name}"), str(queries)]
        run = subprocess.run(args, cwd=tree, env=env, check=True, capture_output=True, text=True)
        out[name] = {
            k: round(v, 3) if isinstance(v, float) else v for k, v in json.loads(run.stdout.splitlines()[-1]).items()
        }
        print(name, out[name], flush=True)
    return out


def merged(paths: list[Path]) -> dict[str, Any]:
    """Reports of several runs (other variants over the same sets) as one."""
    out: dict[str, Any] = {"variants": {}, "ndcg10": {}}
    for path in paths:
        report = json.loads(path.read_text())
        out["variants"].update(report["variants"])
        out["modes"] = [m for m in out.get("modes", report["modes"]) if m in report["modes"]]
        for corpus, sets in report["ndcg10"].items():
            for set_name, modes in sets.items():
                if set_name == "check":
                    continue
                into = out["ndcg10"].setdefault(corpus, {}).setdefault(set_name, {"n": modes["n"]})
                for mode in out["modes"]:
                    into.setdefault(mode, {}).update(modes[mode])
    return out


def table(report: dict[str, Any]) -> str:
    """Markdown: nDCG@10 per set for each mode, today's and each variant's (its change in brackets),
    and the mean over the sets (each set counts once)."""
    variants, modes = list(report["variants"]), report["modes"]
    head = "| set | n | " + " | ".join(f"{m} {v}" for m in modes for v in variants) + " |"
    lines = [head, "|" + "---|" * (2 + len(modes) * len(variants))]
    sums: dict[tuple[str, str], list[float]] = {}
    for corpus, sets in report["ndcg10"].items():
        for set_name, r in sets.items():
            if set_name == "check":
                continue
            cells = []
            for m in modes:
                for v in variants:
                    x = r[m][v]
                    sums.setdefault((m, v), []).append(x)
                    base = r[m].get("today")
                    cells.append(f"{x:.4f}" if v == "today" or base is None else f"{x:.4f} ({x - base:+.4f})")
            lines.append(f"| {corpus} {set_name} | {r['n']} | " + " | ".join(cells) + " |")
    lines.append(
        "| mean of the sets | | " + " | ".join(f"{mean(sums[(m, v)]):.4f}" for m in modes for v in variants) + " |"
    )
    return "\n".join(lines)


def _tree(spec: str) -> tuple[str, Path]:
    name, _, path = spec.partition("=")
    return name, Path(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vs-vecnorm"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--modes", default="vector,hybrid")
    ap.add_argument("--corpora", default=",".join(corpora()))
    ap.add_argument(
        "--check",
        nargs="?",
        const=CORE_VARIANT,
        help=f"compare this variant's scores with core's on every search (default {CORE_VARIANT!r})",
    )
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "vector_norm.json")
    ap.add_argument("--table", type=Path, nargs="+", help="print the table of these result files (merged); run nothing")
    ap.add_argument(
        "--latency",
        nargs="*",
        metavar="NAME=DIR",
        help="time vector_scores in this tree and in code trees DIR; run nothing else",
    )
    args = ap.parse_args()
    if args.table:
        print(table(merged(args.table)))
        return
    if args.latency is not None:
        trees = {"now": Path(__file__).resolve().parents[1], **dict(_tree(x) for x in args.latency)}
        print(json.dumps(latency(trees, args.workdir)))
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    variants, modes = args.variants.split(","), args.modes.split(",")
    specs = corpora()
    t0 = time.perf_counter()
    results = {
        name: run_corpus(name, specs[name], args.workdir, variants, modes, args.check)
        for name in args.corpora.split(",")
    }
    report = {
        "variants": {k: VARIANTS[k].__dict__ for k in variants},
        "slope": SLOPE,
        "core_variant": CORE_VARIANT,
        "modes": modes,
        "ndcg10": results,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(table(report))
    print(json.dumps({"written": str(args.out), "seconds": report["seconds"]}))


if __name__ == "__main__":
    main()
