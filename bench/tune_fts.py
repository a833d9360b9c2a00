"""Tune the BM25F parameters of `fts` on SciFact *train* and the known-item sets.

Loads each corpus's sparse index once and re-weights it per parameter set (no snippets,
no SQL per query), so a grid runs in seconds. Usage:
    python -m bench.tune_fts --workdir /tmp/vs-tune [--split train|dev]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from core import generations as gen
from core.build.builder import build_index
from core.eval.inputs import load_qrels, load_queries
from core.eval.metrics import mean, ndcg_at_k
from core.ranking.analysis import analyzer_for
from core.ranking.sparse import RankParams, bm25_scores, load_sparse

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {
    "scifact": (
        DATA / "scifact" / "vault",
        DATA / "scifact" / "{split}_queries.jsonl",
        DATA / "scifact" / "{split}_qrels.tsv",
    ),
    "dendron": (
        DATA / "dendron" / "vault",
        DATA / "known-item" / "dendron_dev_queries.jsonl",
        DATA / "known-item" / "dendron_dev_qrels.tsv",
    ),
    "powershell": (
        DATA / "powershell-docs" / "reference",
        DATA / "known-item" / "powershell_dev_queries.jsonl",
        DATA / "known-item" / "powershell_dev_qrels.tsv",
    ),
}


def prepare(name: str, workdir: Path, split: str):
    vault_src, qpath, rpath = CORPORA[name]
    vault = workdir / name
    if not vault.exists():
        shutil.copytree(vault_src, vault)
    build_index(vault)
    resolved = gen.resolve(gen.layout_for(vault.resolve()))
    conn = gen.connect_readonly(resolved)
    paths = dict(conn.execute("SELECT id, rel_path FROM notes"))
    ids = dict(conn.execute("SELECT id, coalesce(frontmatter_id, '') FROM notes"))
    tokenizer = conn.execute("SELECT value FROM meta WHERE key='tokenizer'").fetchone()[0]
    queries = load_queries(str(qpath).format(split=split))
    qrels = load_qrels(str(rpath).format(split=split))
    an = analyzer_for(json.loads(tokenizer))
    key = (lambda nid: ids[nid] or paths[nid]) if name == "scifact" else (lambda nid: paths[nid])
    qs = [(an.terms(queries[q]), qrels[q]) for q in queries if q in qrels]
    return conn, key, qs


def ndcg(conn, key, qs, params: RankParams) -> float:
    sp = load_sparse(conn, params)
    out = []
    for terms, rel in qs:
        scores, matched = bm25_scores(sp, terms)
        scores = np.where(matched > 0, scores, -1)
        top = np.argsort(-scores, kind="stable")[:10]
        out.append(ndcg_at_k([key(int(sp.note_ids[r])) for r in top if scores[r] >= 0], rel, 10))
    return mean(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vs-tune"))
    ap.add_argument("--split", default="train")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    data = {n: prepare(n, args.workdir, args.split) for n in CORPORA}
    base = RankParams()
    grid = {
        "k1": [0.9, 1.2],
        "title_w": [1.0, 2.0, 3.0],
        "head_w": [1.0, 2.0, 4.0],
        "coverage_weight": [0.0, 0.3, 0.6],
        "heading_coverage_weight": [0.0, 0.3, 0.6, 1.0],
    }
    rows = []
    for k1, tw, hw, cw, hcw in itertools.product(*grid.values()):
        w = list(base.weights)
        w[0], w[3] = tw, hw
        p = replace(base, k1=k1, weights=tuple(w), coverage_weight=cw, heading_coverage_weight=hcw)
        r = {n: round(ndcg(*data[n], p), 4) for n in data}
        rows.append((p, r))
        print(json.dumps({"k1": k1, "title_w": tw, "head_w": hw, "cov": cw, "hcov": hcw, **r}), flush=True)
    best = max(rows, key=lambda pr: min(pr[1]["scifact"] - 0.69, pr[1]["dendron"] - 0.86, pr[1]["powershell"] - 0.82))
    print("BEST", best)


if __name__ == "__main__":
    main()
