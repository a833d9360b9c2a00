"""Record (or check) the golden top-10 rankings: ``python -m tests.golden.record [--write]``.

For 50 queries of each corpus (SciFact dev, the Dendron and PowerShell known-item dev sets)
and each lexical mode, the top-10 ``(rel_path, score)`` is written to ``rankings.json``. The
golden test (tests/test_golden.py) rebuilds the same indexes and compares byte for byte:
a change to ranking must be deliberate, and is recorded again with ``--write``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from core import build_index, search_vault
from tests import paths

DATA = paths.DATA
GOLDEN = Path(__file__).resolve().parent / "rankings.json"
MODES = ("fts", "vector", "hybrid", "graph_assisted")
N_QUERIES = 50
CORPORA = {
    "scifact": ("scifact/vault", "scifact/dev_queries.jsonl"),
    "dendron": ("dendron/vault", "known-item/dendron_dev_queries.jsonl"),
    "powershell": ("powershell-docs/reference", "known-item/powershell_dev_queries.jsonl"),
}


def queries(rel: str) -> list[str]:
    with open(DATA / rel, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()][:N_QUERIES]


def rankings(vault: Path, qs: list[str]) -> dict[str, list[list[list[object]]]]:
    out: dict[str, list[list[list[object]]]] = {}
    for mode in MODES:
        out[mode] = [
            [[r.rel_path, repr(float(r.score))] for r in search_vault(vault, q, 10, mode, freshness=False)] for q in qs
        ]
    return out


def record_corpus(name: str, workdir: Path) -> dict[str, list[list[list[object]]]]:
    vault_rel, queries_rel = CORPORA[name]
    vault = workdir / name
    shutil.copytree(DATA / vault_rel, vault)
    build_index(vault)
    return rankings(vault, queries(queries_rel))


def record_all() -> dict[str, dict[str, list[list[list[object]]]]]:
    with tempfile.TemporaryDirectory() as tmp:
        return {name: record_corpus(name, Path(tmp)) for name in CORPORA}


def main(argv: list[str]) -> int:
    got = record_all()
    text = json.dumps(got, indent=0, sort_keys=True) + "\n"
    if "--write" in argv:
        GOLDEN.write_text(text, encoding="utf-8")
        print(f"wrote {GOLDEN}")
        return 0
    same = GOLDEN.read_text(encoding="utf-8") == text
    print("identical" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
