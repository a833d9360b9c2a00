"""Merge benchmark (issue 29, "Merges"): what a merge costs after N one-note edits, in time and bytes.

On a fresh copy of a corpus (SciFact by default): a cold build, then ``--edits`` one-note edits (one line
appended to a different note each time), each an incremental ``build_index`` (a delta segment and a
tombstone; past ``MAX_SEGMENTS`` the smallest segments merged: ``segment_limit_merge``), then

1. a merge by the policy (``optimize_index``): seconds, segments and parts before/after, bytes of the
   index's parts before/after and bytes written (the new segments);
2. the same, everything into one segment (``one_segment=True``), on the generation step 1 left;

and, as a check, that a few queries in every mode answer the same before and after both merges (a merge
changes no result). Results go to ``bench/results/merge.json`` (small; ``--out`` to change).

    python -m bench.bench_merge [--corpus scifact|powershell|dendron] [--edits 10] [--out PATH]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, RESULTS_DIR, copy_vault, dir_size_bytes, machine_info, write_json

CORPORA: dict[str, Path] = {
    "scifact": DATA_DIR / "scifact" / "vault",
    "powershell": DATA_DIR / "powershell-docs" / "reference",
    "dendron": DATA_DIR / "dendron" / "vault",
}
MODES = ("fts", "vector", "hybrid", "graph_assisted")
QUERIES = ("cancer cells", "vitamin D deficiency", "protein folding stability", "randomized trial")


def _answers(vault: Path) -> dict[str, list[tuple[str, float]]]:
    from core.index import verify
    from core.searcher import search_vault

    verify.clear_verify_cache()
    out = {}
    for mode in MODES:
        for query in QUERIES:
            hits = search_vault(vault, query, 10, mode=mode, freshness=False, passages=False).hits
            out[f"{mode}:{query}"] = [(h.rel_path, h.score) for h in hits]
    return out


def _edit(vault: Path, notes: list[Path], n: int) -> list[dict[str, Any]]:
    from core.build.builder import build_index

    rows = []
    for i, path in enumerate(notes[:n]):
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"\n\nmerge benchmark edit {i}\n")
        t = time.perf_counter()
        report = build_index(vault)
        rows.append(
            {
                "seconds": round(time.perf_counter() - t, 4),
                "one_segment_reason": report.one_segment_reason,
                "segment_limit_merge": report.segment_limit_merge,
            }
        )
    return rows


def run_corpus(name: str, edits: int) -> dict[str, Any]:
    from core.build.builder import build_index
    from core.build.optimize import optimize_index

    with tempfile.TemporaryDirectory(prefix="bench_merge_") as tmp:
        vault = copy_vault(CORPORA[name], Path(tmp) / "vault")
        t = time.perf_counter()
        build_index(vault)
        cold = time.perf_counter() - t
        notes = sorted(vault.rglob("*.md"))[:: max(1, len(list(vault.rglob("*.md"))) // (edits + 1))]
        edit_rows = _edit(vault, notes, edits)
        expected = _answers(vault)
        policy = optimize_index(vault, grace_s=0.0).to_dict()
        same_policy = _answers(vault) == expected
        one = optimize_index(vault, one_segment=True, grace_s=0.0).to_dict()
        same_one = _answers(vault) == expected
        return {
            "corpus": name,
            "notes": sum(1 for _ in vault.rglob("*.md")),
            "markdown_bytes": sum(p.stat().st_size for p in vault.rglob("*.md")),
            "cold_build_seconds": round(cold, 3),
            "edits": edit_rows,
            "policy_merge": policy,
            "one_segment_merge": one,
            "results_identical": {"policy": same_policy, "one_segment": same_one},
            "index_dir_bytes_after": dir_size_bytes(vault / ".vaultsearch"),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="scifact")
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "merge.json")
    args = parser.parse_args(argv)
    result = {"machine": machine_info(), "runs": [run_corpus(args.corpus, args.edits)]}
    write_json(args.out, result)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
