"""Dense vectors per segment (issue 29): ``--embed-only`` after a one-note edit, and the first semantic
query after an edit, on a copy of the first ``--notes`` notes of a corpus (Dendron by default).

    PYTHONPATH=$PWD python -m bench.bench_dense_segments [--corpus dendron] [--notes 300]

Steps (MiniLM fp32, the tests' fixture model): build, embed everything, one semantic query (warm);
then A) append a line to one note, ``build_index`` (text only), ``embed_index``: its wall time and the
bytes of the files it added to the index directory (new parts + manifest) and the process's written bytes
(``/proc/self/io`` write_bytes), then one semantic query (warm again); B) append to another note, ``build_index`` with the in-build embed hook
(text and vectors in one generation), then the first semantic query: its wall time and how many matrices
it loaded (generation matrices; segment matrices where the code has a per-part cache). Run it once per
code tree (PYTHONPATH) to compare before / after. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR
from core.build.build_embed import EmbedInStaging
from core.build.builder import build_index
from core.build.embed import embed_index
from core.modes import dense_pipeline
from core.searcher import search_vault
from tests.minilm_fixture import FP32, cached_model_dirs


def _written() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def _files(index_dir: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in index_dir.rglob("*") if p.is_file()}


def _copy_subset(src: Path, dest: Path, notes: int) -> list[Path]:
    files = sorted(p for p in src.rglob("*.md") if ".vaultsearch" not in p.parts)[:notes]
    for path in files:
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return [dest / p.relative_to(src) for p in files]


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n\n{text}\n", encoding="utf-8")


def _loads() -> dict[str, int]:
    out = {"generation_loads": dense_pipeline.DENSE_CACHE.stats.loads}
    parts = getattr(dense_pipeline, "PART_CACHE", None)
    if parts is not None:
        out["segment_loads"] = parts.stats.loads
    return out


def run(corpus: str, notes: int, work: Path) -> dict[str, Any]:
    model = cached_model_dirs(work / "models")[FP32]
    vault = work / "vault"
    files = _copy_subset(DATA_DIR / corpus / "vault", vault, notes)
    build_index(vault)
    t = time.perf_counter()
    full = embed_index(vault, model=model)
    first_embed = time.perf_counter() - t
    search_vault(vault, "how to configure the tool", mode="semantic", model=str(model))
    index_dir = vault / ".vaultsearch"
    # A) one edit, text only, then --embed-only
    _append(files[len(files) // 2], "An added line about configuration and caching.")
    build_index(vault)
    before, written = _files(index_dir), _written()
    t = time.perf_counter()
    report = embed_index(vault, model=model)
    embed_s = time.perf_counter() - t
    added = sum(size for path, size in _files(index_dir).items() if path not in before)
    embed_written = _written() - written
    search_vault(vault, "how to configure the tool", mode="semantic", model=str(model))  # warm again
    # B) one edit with the in-build embed, then the first semantic query
    _append(files[len(files) // 3], "Another added line about search.")
    build_index(vault, before_publish=EmbedInStaging(model))
    loads = _loads()
    t = time.perf_counter()
    search_vault(vault, "search settings", mode="semantic", model=str(model))
    first_query_s = time.perf_counter() - t
    after = _loads()
    return {
        "corpus": corpus,
        "notes": len(files),
        "chunks": full.chunks,
        "first_embed_s": round(first_embed, 2),
        "embed_only_after_edit_s": round(embed_s, 3),
        "embed_only_embedded": report.embedded,
        "embed_only_generations": len(report.generations_published),
        "embed_only_new_file_bytes": added,
        "embed_only_write_bytes": embed_written,
        "first_query_after_edit_ms": round(first_query_s * 1000, 1),
        "loads_by_first_query": {k: after[k] - loads[k] for k in after},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="dendron")
    parser.add_argument("--notes", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vs-dense-seg-") as tmp:
        print(json.dumps(run(args.corpus, args.notes, Path(tmp))))


if __name__ == "__main__":
    main()
