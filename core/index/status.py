"""What the index is, and whether the vault moved on since: ``vaultsearch status``.

The staleness scan compares a fast (mtime_ns, size) walk with the active index; only the
files whose stat differs are hashed, so a touched-but-identical file is not reported.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from core import generations as gen
from core.index.builder import all_problems
from core.index.schema import get_meta
from core.vault.scan import MAX_NOTE_BYTES, read_file, scan_vault


def _stale(vault: Path, conn: sqlite3.Connection, index_dir: Path) -> dict[str, Any]:
    limit = get_meta(conn).get("max_note_bytes", MAX_NOTE_BYTES)  # scan with the size limit the build used
    scan = scan_vault(vault, index_dir=index_dir, max_bytes=limit)
    known = {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT rel_path, content_sha256, mtime_ns, size FROM notes "
            "UNION ALL SELECT rel_path, content_sha256, mtime_ns, size FROM skipped_files"
        )
    }
    added, modified = [], []
    for f in scan.files:
        old = known.get(f.rel_path)
        if old is None:
            added.append(f.rel_path)
        elif (old[1], old[2]) != (f.mtime_ns, f.size) and read_file(f.path)[1] != old[0]:
            modified.append(f.rel_path)
    seen = {f.rel_path for f in scan.files}
    removed = sorted(k for k in known if k not in seen)
    return {
        "stale": bool(added or modified or removed),
        "added": added,
        "modified": modified,
        "removed": removed,
        "source_files": len(scan.files),
    }


# The timing key of a generation's record that holds its embed call's chunks per second (core.index.embed).
EMBED_RATE_KEY = "embed_chunks_per_s"


def _time_left(pending: int, generations: list[dict[str, Any]]) -> dict[str, Any]:
    """Expected seconds to embed the ``pending`` chunks, at the rate the newest embed run measured on this
    index (``chunks_per_s``); ``None`` with the reason when nothing was embedded here yet."""
    rate = next((g["timings"][EMBED_RATE_KEY] for g in generations if EMBED_RATE_KEY in g.get("timings", {})), None)
    if pending == 0:
        return {"seconds_left": 0.0, "chunks_per_s": rate, "estimate": "complete"}
    if not rate:
        return {"seconds_left": None, "chunks_per_s": None, "estimate": "no_embed_run_measured"}
    return {"seconds_left": round(pending / rate, 1), "chunks_per_s": rate, "estimate": "last_embed_rate"}


def staleness(vault: str | Path, index_dir: str | Path | None = None) -> dict[str, Any]:
    """Has the vault changed since the active index? (added / modified / removed paths)."""
    vault = Path(vault).resolve()
    resolved = gen.resolve(gen.layout_for(vault, Path(index_dir) if index_dir else None))
    conn = gen.connect_readonly(resolved)
    try:
        return _stale(vault, conn, resolved.layout.index_dir)
    finally:
        conn.close()


def index_status(vault: str | Path, index_dir: str | Path | None = None) -> dict[str, Any]:
    """Active generation, age, counts, coverage, dense coverage, problems and staleness."""
    vault = Path(vault).resolve()
    layout = gen.layout_for(vault, Path(index_dir) if index_dir else None)
    resolved = gen.resolve(layout)
    conn = gen.connect_readonly(resolved)
    try:
        count = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
        chunks = count("SELECT count(*) FROM chunks")
        vectors = count("SELECT count(*) FROM chunk_vectors")
        meta = get_meta(conn)
        stale = _stale(vault, conn, layout.index_dir)
        notes = count("SELECT count(*) FROM notes")
        out = {
            "vault": str(vault),
            "index_dir": str(layout.index_dir),
            "index_kind": resolved.kind,
            "generation_id": resolved.generation_id,
            "sha256": resolved.sha256,
            "size": resolved.size,
            "source_snapshot_hash": resolved.source_snapshot_hash,
            "age_seconds": round(max(0.0, time.time() - resolved.created_at), 3),
            "notes": notes,
            "chunks": chunks,
            "skipped_files": count("SELECT count(*) FROM skipped_files"),
            "coverage": {"indexed_notes": notes, "source_files": stale["source_files"]},
            "links": count("SELECT count(*) FROM edges"),
            "unresolved_links": count("SELECT count(*) FROM edges WHERE dst_id IS NULL"),
            "dense": {
                "chunks_with_vectors": vectors,
                "chunks": chunks,
                "coverage": round(vectors / chunks, 4) if chunks else 0.0,
                "model": meta.get("dense_model"),
                **_time_left(chunks - vectors, gen.list_generations(layout) if resolved.kind != "legacy_db" else []),
            },
            "chunker": meta.get("chunker"),
            "tokenizer": meta.get("tokenizer"),
            "problems": all_problems(conn),
            "staleness": stale,
            "generations": gen.list_generations(layout) if resolved.kind != "legacy_db" else [],
        }
    finally:
        conn.close()
    return out
