"""What the index is, and whether the vault moved on since: ``vaultsearch status``.

The staleness scan compares a fast (mtime_ns, size) walk with the active index; only the
files whose stat differs are hashed, so a touched-but-identical file is not reported.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.index.freshness_visible import sees_in
from core.index.layout import IndexLayout, ResolvedIndex, layout_for
from core.index.ownership import check_index_dir_for_reading, check_vault
from core.index.state import EMBED_RATE_KEY, list_generations
from core.index.tables.chunk_vectors import count_vectors, count_vectors_in
from core.index.tables.chunks import count_chunks, count_chunks_in
from core.index.tables.links import count_edges, count_unresolved_edges
from core.index.tables.meta import get_meta
from core.index.tables.names import name_rule_counts
from core.index.tables.notes import count_notes, visible_paths
from core.index.tables.problems import all_problems
from core.index.tables.skipped_files import count_skipped, count_sources, source_stats
from core.index.verify import connect_readonly, resolve
from core.index.watch_state import last_build_failure
from core.ranking.filters import UNCLASSIFIED, Filters
from core.ranking.visibility import CallerStatistics
from core.vault.notes import UNREADABLE_CLASSIFICATION, parse_note
from core.vault.scan import MAX_NOTE_BYTES, read_file, scan_vault


def _stale(vault: Path, conn: sqlite3.Connection, index_dir: Path) -> dict[str, Any]:
    meta = get_meta(conn)
    limit = meta.get("max_note_bytes", MAX_NOTE_BYTES)  # scan with the size limit the build used
    dot = bool((meta.get("settings") or {}).get("include_dot_paths", False))  # and its ignore rules
    scan = scan_vault(vault, index_dir=index_dir, max_bytes=limit, include_dot_paths=dot)
    known = {r[0]: r[1:] for r in source_stats(conn)}
    added, modified = [], []
    root = os.path.realpath(vault)
    for f in scan.files:
        old = known.get(f.rel_path)
        if old is None:
            added.append(f.rel_path)
        elif (old[1], old[2]) != (f.mtime_ns, f.size) and _content_sha(f.path, root) != old[0]:
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


def _source_stale(vault: Path, conn: sqlite3.Connection, index_dir: Path) -> dict[str, Any]:
    """Staleness against what the index is a view of: the working tree, or for a git-sourced
    index the revision it follows (``core.index.gitstatus``; uncommitted edits are not staleness)."""
    meta = get_meta(conn)
    if meta.get("source") != "git":
        return _stale(vault, conn, index_dir)
    from core.index.gitstatus import git_staleness

    return {**git_staleness(vault, meta, index_dir), "source_files": count_sources(conn)}


def _layout(vault: str | Path, index_dir: str | Path | None) -> IndexLayout:
    """The layout of an existing vault folder and a readable index dir (typed usage errors otherwise)."""
    check_vault(Path(vault))
    layout = layout_for(Path(vault).resolve(), Path(index_dir) if index_dir else None)
    check_index_dir_for_reading(layout)
    return layout


def _content_sha(path: Path, root: str) -> str | None:
    """The file's SHA-256, or None when it cannot be read now (then it counts as modified)."""
    try:
        return read_file(path, root=root)[1]
    except OSError:
        return None


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
    layout = _layout(vault, index_dir)
    vault = layout.vault
    resolved = resolve(layout)
    conn = connect_readonly(resolved)
    try:
        return _source_stale(vault, conn, resolved.layout.index_dir)
    finally:
        conn.close()


DEFAULT_VISIBILITY = "no classification given: every note is visible, secret ones included"


def _visibility(classifications: Sequence[str] | None) -> dict[str, Any]:
    if classifications is None:
        return {"classifications": None, "restricted": False, "note": DEFAULT_VISIBILITY}
    return {
        "classifications": sorted({c.lower() for c in classifications}),
        "restricted": True,
        "note": "only notes of these classifications are counted or listed (unclassified counts as "
        f"{UNCLASSIFIED!r}; '{UNREADABLE_CLASSIFICATION}' names notes whose classification could not be read)",
    }


_GENERATION_KEYS = ("generation_id", "status", "active", "created_at")


def _parts(resolved: ResolvedIndex) -> list[dict[str, Any]]:
    """The generation's parts as its manifest names them (none for a legacy index)."""
    return [{"kind": p.kind, "sha256": p.sha256, "size": p.size, "path": str(p.path)} for p in resolved.parts]


def _link_counts(conn: sqlite3.Connection, resolved: ResolvedIndex, filters: Filters) -> tuple[int, int]:
    """(links, unresolved links) a restricted caller may know of: its visible notes' links resolved among
    its visible notes (core.ranking.visibility), so a link to a hidden note counts as unresolved and a
    link a hidden note captured resolves as it would without it - the counts of the vault without them."""
    generation = None if resolved.kind == "legacy_db" else (str(resolved.path), resolved.generation_id, resolved.sha256)
    stats = CallerStatistics(
        conn,
        filters.visible_classification_clause(),
        str(resolved.layout.index_dir),
        generation,
        filters.classifications,
    )
    if not stats.restricted:  # nothing hidden: the build's own counts
        return count_edges(conn), count_unresolved_edges(conn)
    rows = stats.link_rows()
    return len(rows), sum(1 for _, dst, _, _ in rows if dst is None)


def _restrict(
    out: dict[str, Any], conn: sqlite3.Connection, vault: Path, filters: Filters, resolved: ResolvedIndex
) -> None:
    """Narrow a status to what a restricted caller may see: counts over its visible notes, problems
    and staleness of those notes only; skipped files (no readable classification) are left out."""
    clause, vals = filters.visible_classification_clause()
    visible = visible_paths(conn, clause, vals)
    ids = json.dumps(sorted(visible))
    chunks = count_chunks_in(conn, ids)
    vectors = count_vectors_in(conn, ids)
    edges = _link_counts(conn, resolved, filters)
    paths = set(visible.values())
    stale = out["staleness"]
    added = [p for p in stale["added"] if _visible_file(vault, p, filters)]
    kept = {k: [p for p in stale[k] if p in paths] for k in ("modified", "removed")}
    present = len(paths) - len(kept["removed"]) + len(added)
    out.update(
        notes=len(visible),
        names=name_rule_counts(conn, list(visible)),
        chunks=chunks,
        skipped_files=None,
        coverage={"indexed_notes": len(visible), "source_files": present},
        links=int(edges[0]),
        unresolved_links=int(edges[1]),
        problems=[p for p in out["problems"] if p["path"] in paths],
        staleness={
            **stale,
            "stale": bool(added or kept["modified"] or kept["removed"]),
            "added": added,
            **kept,
            "source_files": present,
        },
    )
    out["generations"] = [{k: g[k] for k in _GENERATION_KEYS if k in g} for g in out["generations"]]  # no counts
    out["dense"].update(
        chunks_with_vectors=vectors, chunks=chunks, coverage=round(vectors / chunks, 4) if chunks else 0.0
    )


def _visible_file(vault: Path, rel_path: str, filters: Filters) -> bool:
    """Whether a not yet indexed file would be visible to the caller (its classification, failing closed)."""
    try:
        data = read_file(vault / rel_path, root=str(vault))[0]  # the scanner's confined reader
    except OSError:
        return False  # unreadable: no classification can be read, so not visible
    parsed = parse_note(rel_path, data)
    if parsed is None:
        return False
    allowed = filters.classifications or ()
    return (parsed.classification or UNCLASSIFIED) in allowed


def index_status(
    vault: str | Path, index_dir: str | Path | None = None, *, classifications: Sequence[str] | None = None
) -> dict[str, Any]:
    """Active generation, age, counts, coverage, dense coverage, problems and staleness.

    ``classifications`` (as for search_vault) restricts every count and list to the notes of
    those classifications; None (the default) shows every note, secret ones included."""
    filters = Filters.make(classifications=list(classifications) if classifications is not None else None)
    layout = _layout(vault, index_dir)
    vault = layout.vault
    resolved = resolve(layout)
    conn = connect_readonly(resolved)
    try:
        chunks = count_chunks(conn)
        vectors = count_vectors(conn)
        meta = get_meta(conn)
        stale = _source_stale(vault, conn, layout.index_dir)
        notes = count_notes(conn)
        out = {
            "vault": str(vault),
            "index_dir": str(layout.index_dir),
            "index_kind": resolved.kind,
            "generation_id": resolved.generation_id,
            "sha256": resolved.sha256,  # a generation: its manifest's SHA-256 (content identity)
            "size": resolved.size,
            "parts": _parts(resolved),
            "source_snapshot_hash": resolved.source_snapshot_hash,
            "age_seconds": round(max(0.0, time.time() - resolved.created_at), 3),
            "visibility": _visibility(filters.classifications),
            "notes": notes,
            "chunks": chunks,
            "skipped_files": count_skipped(conn),
            "coverage": {"indexed_notes": notes, "source_files": stale["source_files"]},
            "links": count_edges(conn),
            "unresolved_links": count_unresolved_edges(conn),
            # which rule named how many notes (core.vault.names): the shown title's, and every name's
            "names": name_rule_counts(conn),
            "dense": {
                "chunks_with_vectors": vectors,
                "chunks": chunks,
                "coverage": round(vectors / chunks, 4) if chunks else 0.0,
                "model": meta.get("dense_model"),
                **_time_left(chunks - vectors, list_generations(layout) if resolved.kind != "legacy_db" else []),
            },
            "chunker": meta.get("chunker"),
            "tokenizer": meta.get("tokenizer"),
            "problems": all_problems(conn),
            "staleness": stale,
            "source": meta.get("source") or "worktree",
            **({"uncommitted": stale["uncommitted"]} if "uncommitted" in stale else {}),
            "last_build_failure": last_build_failure(  # from `watch`, its paths as the caller may see them
                layout.index_dir, resolved.created_at, sees_in(conn, vault, filters.classifications)
            ),
            "generations": list_generations(layout) if resolved.kind != "legacy_db" else [],
        }
        if filters.classifications is not None:
            _restrict(out, conn, vault, filters, resolved)
    finally:
        conn.close()
    return out
