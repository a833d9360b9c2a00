"""Index bytes on disk, two generations retained, per table (issue 29: <= 2x the Markdown on every corpus).

Per corpus (a fresh copy in a temporary folder): a cold ``vaultsearch index`` as a new process, then one
line appended to a mid-sized note and ``vaultsearch index`` again (two generations retained, the default
``keep=2``: the first one's segment plus the edit's small segment and tombstone). It reports the index
directory's bytes against the Markdown bytes, and, summed over every segment file of the directory, the
bytes of each table and index (SQLite's ``dbstat``: whole pages, so a page's unused bytes count), the
unused bytes inside those pages, the page size and the freelist pages. Sizes only: ``bench_edit`` times
the edit and puts tantivy and bm25s beside it.

    python -m bench.bench_size [--corpus scifact,dendron,mdn,powershell] [--sizes 10000] [--out PATH]
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.bench_edit import (
    CORPORA,
    _md_files,
    append_line,
    mid_sized,
    parse_corpus_args,
    run_header,
    run_index,
    synthetic_vault,
)
from bench.common import RESULTS_DIR, copy_vault, dir_size_bytes, write_json


def segment_tables(path: Path) -> dict[str, Any]:
    """One SQLite file's page size, page and freelist counts, and (bytes, unused bytes) per table or index."""
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        tables = {
            name: (int(size), int(unused))
            for name, size, unused in conn.execute("SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name")
        }
        return {
            "bytes": path.stat().st_size,
            "page_size": conn.execute("PRAGMA page_size").fetchone()[0],
            "pages": conn.execute("PRAGMA page_count").fetchone()[0],
            "freelist_pages": conn.execute("PRAGMA freelist_count").fetchone()[0],
            "tables": tables,
        }
    finally:
        conn.close()


def index_tables(index_dir: Path) -> dict[str, Any]:
    """``segment_tables`` of every part under ``index_dir/segments``, and their per-table sums."""
    parts = {p.name: segment_tables(p) for p in sorted((index_dir / "segments").iterdir()) if p.is_file()}
    size: Counter[str] = Counter()
    unused: Counter[str] = Counter()
    for part in parts.values():
        for name, (b, u) in part["tables"].items():
            size[name] += b
            unused[name] += u
    return {
        "parts": {name: {k: v for k, v in part.items() if k != "tables"} for name, part in parts.items()},
        "tables": {name: {"bytes": b, "unused": unused[name]} for name, b in size.most_common()},
        "freelist_bytes": sum(p["freelist_pages"] * p["page_size"] for p in parts.values()),
    }


def measure(name: str, source: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-size-{name}-") as tmp_name:
        tmp = Path(tmp_name)
        vault = copy_vault(source, tmp / "vault")
        files = _md_files(vault)
        md_bytes = sum(size for _rel, size in files)
        index_dir = tmp / "index"
        cold = run_index(vault, index_dir, tmp / "io-cold.txt")
        one = dir_size_bytes(index_dir)
        append_line(vault, mid_sized(files, 1)[0], 0)
        run_index(vault, index_dir, tmp / "io-edit.txt")
        two = dir_size_bytes(index_dir)
        return {
            "notes": len(files),
            "markdown_bytes": md_bytes,
            "cold_wall_seconds": round(cold["wall_seconds"], 2),
            "one_generation_bytes": one,
            "index_bytes": two,
            "index_over_markdown": round(two / md_bytes, 3),
            **index_tables(index_dir),
        }


def print_row(name: str, row: dict[str, Any]) -> None:
    top = ", ".join(f"{t} {v['bytes'] / 1e6:.2f}" for t, v in list(row["tables"].items())[:8])
    print(
        f"{name}: {row['markdown_bytes'] / 1e6:.2f} MB md, index {row['index_bytes'] / 1e6:.2f} MB "
        f"({row['index_over_markdown']}x); cold {row['cold_wall_seconds']} s; {top}",
        file=sys.stderr,
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> None:
    args, names = parse_corpus_args(__doc__, RESULTS_DIR / "size.json", argv)
    load_before = os.getloadavg()
    corpora: dict[str, Any] = {}
    for name in names:
        corpora[name] = measure(name, CORPORA[name])
        print_row(name, corpora[name])
    for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
        with tempfile.TemporaryDirectory(prefix="bench-size-synth-") as root:
            corpora[f"synth_{size}"] = measure(f"synth_{size}", synthetic_vault(size, Path(root)))
        print_row(f"synth_{size}", corpora[f"synth_{size}"])
    print(write_json(args.out, {**run_header(load_before), "corpora": corpora}))


if __name__ == "__main__":
    main()
