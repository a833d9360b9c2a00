"""Write a plan's changed notes into a working database (``core.build.builder`` on a whole working
database, ``core.build.delta_stage`` on one that holds only the changes): read and parse them (in
forked workers when there are many), give them ids (an edited note keeps its id: issue 29), insert their
rows, and record the build's problems."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from core.build.ingest import NoteFile, NoteWriter, sample_bytes
from core.build.link_graph import ReplacedNote
from core.build.plan import BuildPlan, BuildRun
from core.build.prepare_pool import default_workers, prepared_notes
from core.build.source import Read
from core.build.staged import progress_bar
from core.build.text_dict import dictionary_for, spread
from core.index.tables.problems import replace_build_problems
from core.index.tables.text_blocks import stored_text_dict
from core.ranking.analysis import language_analyzer_for
from core.vault.problems import Problem


def write_changed(
    conn: sqlite3.Connection, plan: BuildPlan, run: BuildRun, replaced: Sequence[ReplacedNote]
) -> tuple[NoteWriter, int]:
    """Insert the rows of ``plan.changed`` inside the caller's transaction; (the writer, the first new note id).
    ``replaced``: the notes the build deletes, as they were (one re-inserted at its path keeps its id)."""
    items = [(f.rel_path, str(f.path), data, sha, f.mtime_ns, f.size) for f, data, sha in plan.changed]
    workers = default_workers(len(items)) if run.workers is None else run.workers
    writer = NoteWriter(conn, language_analyzer_for(run.config.language))
    writer.keep_ids = {n.rel_path: n.note_id for n in replaced}  # an edited note keeps its id (issue 29)
    writer.next_note_id = max([writer.next_note_id, *(n.note_id + 1 for n in replaced)])
    if run.first_ids is not None:  # ids unique across the generation's segments, dead rows included
        writer.next_note_id = max(writer.next_note_id, run.first_ids[0])
        writer.next_chunk_id = max(writer.next_chunk_id, run.first_ids[1])
    first_new_id = writer.next_note_id
    limit = run.config.max_note_bytes
    zdict = dictionary_for(conn, len(items), sample_bytes(spread(items), run.root, limit))
    _ingest(writer, items, run, workers, zdict)
    plan.unreadable = [Problem(u.rel_path, u.reason, u.detail) for u in writer.unreadable]
    replace_build_problems(
        conn, [(p.path, p.reason, p.detail) for p in (*plan.scan.problems, *plan.unreadable, *run.problems)]
    )
    return writer, first_new_id


def _ingest(writer: NoteWriter, items: list[NoteFile], run: BuildRun, workers: int, zdict: bytes | None) -> None:
    """Prepare ``items`` (in forked workers when ``workers`` > 1) and write their rows with ``writer``."""
    with (
        prepared_notes(
            items,
            chunk_size=run.config.chunk_size,
            chunk_overlap=run.config.chunk_overlap,
            workers=workers,
            root=run.root,
            language=run.config.language,
            max_bytes=run.config.max_note_bytes,
            zdict=zdict,
        ) as batches,
        progress_bar(len(items), run.progress) as bar,
    ):
        for batch in batches:
            writer.add_batch(batch)
            bar.update(len(batch.notes))
    writer.flush()


def write_relinked(
    conn: sqlite3.Connection, writer: NoteWriter, run: BuildRun, reads: Sequence[Read], keep: dict[str, int]
) -> list[int]:
    """Insert again, with ``writer`` (that of ``write_changed``, inside the same transaction), carried-over notes
    read again with the content the base holds (``reads``: file, bytes, sha256), each at its old id (``keep``:
    rel_path -> id): notes whose edges or mtime the build moves (``core.build.delta_stage``). Returns the ids
    of ``keep`` that did not come back as a note (none unless the file's reading changed)."""
    items = [(f.rel_path, str(f.path), data, sha, f.mtime_ns, f.size) for f, data, sha in reads]
    writer.keep_ids.update(keep)
    kept_before, unreadable_before = len(writer.kept), len(writer.unreadable)
    workers = default_workers(len(items)) if run.workers is None else run.workers
    _ingest(writer, items, run, workers, stored_text_dict(conn))  # the blocks the first batch wrote use it
    back = set(writer.kept[kept_before:])
    for rel in keep:
        writer.keep_ids.pop(rel, None)
    if len(writer.unreadable) != unreadable_before:
        return sorted(keep.values())
    return sorted(set(keep.values()) - back)
