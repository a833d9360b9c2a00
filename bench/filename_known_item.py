"""Known-item queries made from file names: how Obsidian users look a note up by its name.

For each corpus, every note's file name (stem) gives a query made of its words, lower-cased
(``dendron.topic.schema.md`` -> ``dendron topic schema``; ``about_Aliases.md`` -> ``about
aliases``). The relevant answers are every note whose file name has exactly those words: one
note, or several where a corpus keeps copies of a note (PowerShell's version folders
``5.1/``, ``7.4/``, ...), each relevant with grade 1. A seeded sample of ``--n`` queries per
corpus is written in the BEIR formats the eval code reads:

    bench/data/filename_<corpus>_queries.jsonl   {"_id": ..., "text": ...} per line
    bench/data/filename_<corpus>_qrels.tsv       query-id, corpus-id (the note's rel_path), score

The file list is what the index sees (``core.vault.scan.scan_vault``: dot paths ignored).

    python -m bench.filename_known_item [--seed 16] [--n 200]
    vaultsearch index DENDRON --index-dir /tmp/x
    vaultsearch eval DENDRON --index-dir /tmp/x --queries bench/data/filename_dendron_queries.jsonl \\
        --qrels bench/data/filename_dendron_qrels.tsv --mode fts --mode hybrid
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

from core.vault.scan import scan_vault
from tests.paths import DENDRON, POWERSHELL

DATA_OUT = Path(__file__).resolve().parent / "data"
CORPORA = {"dendron": DENDRON, "powershell": POWERSHELL}
_WORD_SPLIT = re.compile(r"[\W_]+")


def name_words(rel_path: str) -> str:
    """The words of a note's file name, lower-cased, joined by spaces."""
    name = rel_path.rsplit("/", 1)[-1]
    stem = name[:-3] if name.lower().endswith(".md") else name
    return " ".join(w for w in _WORD_SPLIT.split(stem.lower()) if w)


def make_queries(vault: Path, *, n: int, seed: int) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(query id -> text, query id -> relevant rel_paths): a seeded sample of ``n`` file-name queries."""
    by_words: dict[str, list[str]] = {}
    for f in scan_vault(vault).files:
        words = name_words(f.rel_path)
        if words:
            by_words.setdefault(words, []).append(f.rel_path)
    texts = sorted(by_words)
    chosen = sorted(random.Random(seed).sample(texts, min(n, len(texts))))
    queries = {f"fn{i:04d}": text for i, text in enumerate(chosen)}
    return queries, {qid: sorted(by_words[text]) for qid, text in queries.items()}


def write_set(name: str, queries: dict[str, str], qrels: dict[str, list[str]], out: Path = DATA_OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    qpath, rpath = out / f"filename_{name}_queries.jsonl", out / f"filename_{name}_qrels.tsv"
    qpath.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()), encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{p}\t1" for q, paths in qrels.items() for p in paths]
    rpath.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return [qpath, rpath]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--n", type=int, default=200, help="queries per corpus")
    args = parser.parse_args(argv)
    for name, vault in CORPORA.items():
        queries, qrels = make_queries(vault, n=args.n, seed=args.seed)
        paths = write_set(name, queries, qrels)
        multi = sum(len(v) > 1 for v in qrels.values())
        print(f"{name}: {len(queries)} queries ({multi} with several answers) -> {', '.join(map(str, paths))}")


if __name__ == "__main__":
    main()
