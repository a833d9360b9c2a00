"""Issue 26: per query set nDCG@10 and zero-hit rate of vaultsearch fts, today and now, beside FTS5
trigram and bm25s measured in the same run (the ``sets`` stage of ``bench.bench_lang``).

Sets (all dev halves; ``../shared/data``):

* MDN (each ``multilingual/vault/<lang>/`` its own vault): every query set of the language (title,
  heading, substring, wordform), and ``word_start``, made here (``word_start_queries``).
* Dendron and PowerShell known-item: ``heading`` (the queries as given), ``typo``
  (``bench_lang.typo_queries``), ``prefix`` (``bench_lang.prefix_queries``: the rarest word of
  >= 6 letters cut to 3-5 letters); Dendron also ``word_start``.
* SciFact ``dev`` and ``train``.

``word_start``: per note, a word of >= 8 letters of its title cut after 5 or 6 letters (seeded
choice), kept when the cut starts a word of no other note's title (casefolded), one query per note,
at most ``WORD_START_MAX`` per vault (seeded sample). The title is the frontmatter ``title``, else the
first ``# `` heading, else the file stem (the data sets' rule).

Engines: vaultsearch fts (``search_vault``, limit 10) of each code tree (``now`` = this tree, others
by ``--code name=DIR``), each in a subprocess whose working directory is the tree, on an index it
builds; ``fts5-trigram`` (FTS5 ``tokenize='trigram'`` over title + body, the OR of the query's
distinct lower-cased words of >= 3 characters, each quoted, by ``bm25()``; no such word: no hit) and
``bm25s`` (k1 1.5, b 0.75; Snowball stems for a language that has one, overlapping bigrams of CJK
runs), the multilingual data set's own baseline definitions.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.baselines import iter_vault_notes
from bench.bench_lang import ENGLISH, LANGS, ML, _ml_qrels, _qrels_path, prefix_queries, typo_queries
from bench.common import DATA_DIR, load_qrels, load_queries
from core.eval.metrics import ndcg_at_k

WORD_START_SEED = 26
WORD_START_MAX = 100
WORD_START_MIN_LETTERS = 8
_LONG_WORD = re.compile(rf"[^\W\d_]{{{WORD_START_MIN_LETTERS},}}")
_H1 = re.compile(r"^# +(.+?)\s*#*\s*$", re.MULTILINE)
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3]+")
SNOWBALL = {"en": "english", "de": "german", "fr": "french", "ru": "russian"}


def _title(rel: str, frontmatter_title: str | None, body: str) -> str:
    if frontmatter_title:
        return frontmatter_title
    h1 = _H1.search(body)
    return h1.group(1) if h1 else Path(rel).stem


def vault_titles(vault: Path) -> dict[str, str]:
    """rel path -> title (frontmatter ``title``, else the first ``# `` heading, else the file stem)."""
    out = {}
    for rel, title, body in iter_vault_notes(vault):
        stem_title = title == Path(rel).stem
        out[rel] = _title(rel, None if stem_title else title, body)
    return out


def word_start_queries(titles: dict[str, str], seed: int = WORD_START_SEED) -> dict[str, tuple[str, str]]:
    """qid -> (typed word start, its note): a title word of >= 8 letters cut after 5 or 6 letters
    that starts a word of no other title (casefolded)."""
    words = {rel: [w.casefold() for w in _WORD.findall(t)] for rel, t in titles.items()}
    rng = random.Random(seed)
    found: list[tuple[str, str]] = []
    for rel in sorted(titles):
        options = []
        for m in _LONG_WORD.finditer(titles[rel]):
            cut = m.group()[: rng.choice((5, 6))].casefold()
            owners = {r for r, ws in words.items() if any(w.startswith(cut) for w in ws)}
            if owners == {rel}:
                options.append(cut)
        if options:
            found.append((rng.choice(options), rel))
    if len(found) > WORD_START_MAX:
        found = sorted(rng.sample(found, WORD_START_MAX), key=lambda x: x[1])
    return {f"ws{i}": item for i, item in enumerate(found)}


# ---------------------------------------------------------------- baselines


class Trigram:
    """FTS5 trigram over (title, body), the multilingual data set's ``fts5-trigram``."""

    def __init__(self, vault: Path) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE t USING fts5(rel UNINDEXED, title, body, tokenize='trigram')")
        self.conn.executemany("INSERT INTO t VALUES (?, ?, ?)", iter_vault_notes(vault))

    def search(self, text: str, k: int = 10) -> list[str]:
        terms = [w for w in dict.fromkeys(w.lower() for w in _WORD.findall(text)) if len(w) >= 3]
        if not terms:
            return []
        expr = " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)
        return [
            r[0] for r in self.conn.execute("SELECT rel FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (expr, k))
        ]


class Bm25s:
    """bm25s (k1 1.5, b 0.75) with Snowball stems or CJK bigrams, the data set's ``bm25s``."""

    def __init__(self, vault: Path, lang: str) -> None:
        import bm25s
        import Stemmer

        self._stem = Stemmer.Stemmer(SNOWBALL[lang]).stemWords if lang in SNOWBALL else None
        notes = list(iter_vault_notes(vault))
        self.paths = [rel for rel, _, _ in notes]
        self.bm25 = bm25s.BM25(k1=1.5, b=0.75)
        self.bm25.index([self.tokens(f"{t}\n{b}") for _, t, b in notes], show_progress=False)

    def tokens(self, text: str) -> list[str]:
        out: list[str] = []
        for w in _WORD.findall(text.lower()):
            if _CJK.fullmatch(w):
                out += [w[i : i + 2] for i in range(len(w) - 1)] or [w]
            else:
                out.append(w)
        if self._stem:
            return [w if _CJK.fullmatch(w) else s for w, s in zip(out, self._stem(out))]
        return out

    def search(self, text: str, k: int = 10) -> list[str]:
        toks = [t for t in self.tokens(text) if t in self.bm25.vocab_dict]
        if not toks:
            return []
        docs, scores = self.bm25.retrieve([toks], k=min(k, len(self.paths)), show_progress=False)
        return [self.paths[int(d)] for d, s in zip(docs[0], scores[0]) if s > 0]


# ---------------------------------------------------------------- vaultsearch in a code tree

# Runs in a subprocess whose working directory is the code tree: its ``core`` comes first.
_RUN_SCRIPT = """
import json, sys
from pathlib import Path
from core.build.builder import build_index
from core.searcher import search_vault
job = json.loads(Path(sys.argv[1]).read_text())
vault, index_dir = Path(job["vault"]), Path(job["index_dir"])
build_index(vault, index_dir=index_dir)
out = {name: {qid: [r.rel_path for r in search_vault(vault, text, mode="fts", limit=10, index_dir=index_dir)]
              for qid, text in qs.items()} for name, qs in job["sets"].items()}
Path(sys.argv[2]).write_text(json.dumps(out))
"""


def _run_tree(tree: Path, vault: Path, sets: dict[str, dict[str, str]], work: Path, tag: str) -> dict[str, Any]:
    job, out = work / f"{tag}.job.json", work / f"{tag}.out.json"
    job.write_text(json.dumps({"vault": str(vault), "index_dir": str(work / f"{tag}.index"), "sets": sets}))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    subprocess.run([sys.executable, "-c", _RUN_SCRIPT, str(job), str(out)], cwd=tree, env=env, check=True)
    return json.loads(out.read_text())


# ---------------------------------------------------------------- corpora and sets


def _corpora() -> list[tuple[str, Path, str, Any, Any]]:
    """(name, vault, language, id of a rel path, sets -> {set: (queries, qrels)}) per corpus."""
    out: list[tuple[str, Path, str, Any, Any]] = []
    for lang in LANGS:

        def ml_sets(vault: Path, lang: str = lang) -> dict[str, tuple[dict[str, str], dict[str, dict[str, int]]]]:
            sets = {}
            for qfile in sorted((ML / "queries").glob(f"{lang}_*_dev_queries.jsonl")):
                sets[qfile.name.split("_")[1]] = (
                    load_queries(qfile),
                    _ml_qrels(lang, load_qrels(_qrels_path(qfile))),
                )
            sets["word_start"] = _word_start_set(vault)
            return sets

        out.append((f"mdn-{lang}", ML / "vault" / lang, lang, lambda rel: rel, ml_sets))
    for name in ("dendron", "powershell"):
        vault, qfile, _ = ENGLISH[name]

        def ki_sets(vault: Path, qfile: Path = qfile, name: str = name) -> dict[str, Any]:
            queries, qrels = load_queries(qfile), load_qrels(_qrels_path(qfile))
            edited = typo_queries(queries)
            sets: dict[str, Any] = {"heading": (queries, qrels), "typo": (edited, qrels)}
            sets["prefix"] = (
                {q: cut for q, (cut, _) in _prefix_set(vault, queries, qrels).items()},
                qrels,
            )
            if name == "dendron":
                sets["word_start"] = _word_start_set(vault)
            return sets

        out.append((name, vault, "en", lambda rel: rel, ki_sets))
    sf = DATA_DIR / "scifact"

    def sf_sets(vault: Path) -> dict[str, Any]:
        return {
            split: (load_queries(sf / f"{split}_queries.jsonl"), load_qrels(sf / f"{split}_qrels.tsv"))
            for split in ("dev", "train")
        }

    out.append(("scifact", sf / "vault", "en", lambda rel: Path(rel).stem, sf_sets))
    return out


def _word_start_set(vault: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    pairs = word_start_queries(vault_titles(vault))
    return {q: cut for q, (cut, _) in pairs.items()}, {q: {rel: 1} for q, (_, rel) in pairs.items()}


def _prefix_set(vault: Path, queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> dict[str, tuple[str, str]]:
    """bench_lang's prefix set: its word statistics from a plain read of the notes (title + body)."""
    words: dict[str, set[str]] = {}
    rels = []
    for rel, title, body in iter_vault_notes(vault):
        rels.append(rel)
        for w in set(re.findall(r"[^\W\d_]{3,}", f"{title} {body}".lower())):
            words.setdefault(w, set()).add(rel)
    return prefix_queries(queries, qrels, words, {rel: rel for rel in rels})


def _score(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]], ident: Any) -> dict[str, Any]:
    scores, nohit = [], 0
    for qid, ranked in runs.items():
        ids = [ident(r) for r in ranked]
        scores.append(ndcg_at_k(ids, qrels[qid], 10) if ids else 0.0)
        nohit += not ids
    n = max(len(scores), 1)
    return {"n": len(scores), "ndcg10": sum(scores) / n, "nohit": nohit / n}


def run_sets(work: Path, codes: dict[str, Path], only: set[str] | None = None) -> dict[str, Any]:
    """Every corpus and set: {corpus: {set: {engine: {n, ndcg10, nohit}}}}, with the word-start examples."""
    trees = {**codes, "now": Path(__file__).resolve().parents[1]}
    out: dict[str, Any] = {}
    for name, vault, lang, ident, make_sets in _corpora():
        if only and name not in only:
            continue
        sets = make_sets(vault)
        sets = {k: ({q: t for q, t in qs.items() if q in rel}, rel) for k, (qs, rel) in sets.items()}
        engines: dict[str, dict[str, dict[str, list[str]]]] = {}
        for tree_name, tree in trees.items():
            engines[tree_name] = _run_tree(
                tree, vault, {k: qs for k, (qs, _) in sets.items()}, work, f"{name}_{tree_name}"
            )
        tri, bm = Trigram(vault), Bm25s(vault, lang)
        engines["fts5-trigram"] = {k: {q: tri.search(t) for q, t in qs.items()} for k, (qs, _) in sets.items()}
        engines["bm25s"] = {k: {q: bm.search(t) for q, t in qs.items()} for k, (qs, _) in sets.items()}
        out[name] = {
            k: {
                **{e: _score(engines[e][k], rel, ident) for e in engines},
                **({"examples": list(qs.values())[:8]} if k in ("word_start", "prefix", "typo") else {}),
            }
            for k, (qs, rel) in sets.items()
        }
        print(
            name,
            {k: {e: round(v["ndcg10"], 3) for e, v in r.items() if e != "examples"} for k, r in out[name].items()},
            flush=True,
        )
    return out
