"""A running reader switching to the generation a small edit publishes pays for the change, not for the
vault (issue 29): the new generation is a view of its segments (core.ranking.segment_view), so only the
added segment is loaded, no posting array is read or built whole, nor the query vocabulary built from every
term; and every mode ranks exactly as a cold build of the same live notes, for restricted and unrestricted
callers."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
from core.modes import segment_arrays as sa
from core.ranking import segment_runs, vocabulary
from core.ranking.filters import Filters
from core.searcher import search_vault
from tests.conftest import EXAMPLE_VAULT

MODES = ("fts", "vector", "hybrid", "graph_assisted")
QUERIES = ("note", "postgres database", "search index", "project decision", "vaul", "kumquat", "zymurgy", "databse")
CALLERS = (None, ("public",), ("lan", "public"), ("lan", "public", "restricted"))  # the last: nothing hidden


def _ranking(vault: Path, query: str, mode: str, classes: tuple[str, ...] | None, index_dir: Path | None = None):
    filters = Filters(classifications=classes) if classes is not None else None
    found = search_vault(
        vault, query, 10, mode=mode, index_dir=index_dir, freshness=False, filters=filters, passages=False
    )
    return [(h.rel_path, h.score, h.actual_mode) for h in found.hits]


def _all(vault: Path, index_dir: Path | None = None) -> dict:
    return {
        (m, q, c): _ranking(vault, q, m, c, index_dir) for m in MODES for q in QUERIES for c in CALLERS
    }  # fmt: skip


def _segments(vault: Path) -> int:
    return sum(1 for p in verify.resolve(layout_for(vault)).parts if p.kind == "segment")


EDITS = (
    ("append", "projects/search-revamp.md", "\nThe kumquat benchmark was added in this edit.\n"),
    ("append", "people/", "\nA zymurgy note, second edit.\n"),
    ("delete", "meetings/", ""),
    ("create", "reference/zz-new-note.md", "---\ntitle: New draft\n---\n# New draft\n\nkumquat zymurgy draft text\n"),
)


def _apply(vault: Path, how: str, where: str, text: str) -> None:
    target = vault / where
    if where.endswith("/"):
        target = sorted((vault / where).glob("*.md"))[0]
    if how == "append":
        with target.open("a", encoding="utf-8") as fh:
            fh.write(text)
    elif how == "delete":
        target.unlink()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def test_a_reader_switching_to_an_edited_generation_reads_no_posting_array_whole(
    tmp_path: Path, monkeypatch, whole_reads
) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    _apply(root, *EDITS[0])
    build_index(root)
    assert _segments(root) >= 2
    _all(root)  # the reader has the view (and chunk vectors) of this generation
    calls: list[str] = []

    def whole(name: str, real):
        def read(self, *args, **kwargs):
            calls.append(name)
            return real(self, *args, **kwargs)

        return read

    def lists(term_id, df):
        calls.append(f"vocabulary of {len(term_id)} terms")
        return real_lists(term_id, df)

    def every_word(name: str, real):
        def derive(words):
            if len(words) > 50:  # the generation's words, not an edit's few new ones
                calls.append(f"{name} of {len(words)} words")
            return real(words)

        return derive

    real_lists = vocabulary._vocabulary_lists
    monkeypatch.setattr(vocabulary, "_vocabulary_lists", lists)
    for name in ("_reversed_words", "_letters"):  # a typo's alphabet and the suffix list: the base's, spliced
        monkeypatch.setattr(vocabulary, name, every_word(name, getattr(vocabulary, name)))
    for name in ("_stored_lists", "_reverse"):  # the base segment's stored words and term names: decoded once
        monkeypatch.setattr(vocabulary, name, whole(f"vocabulary {name}", getattr(vocabulary, name)))
    monkeypatch.setattr(segment_runs.RunArray, "__array__", whole("a view's array", segment_runs.RunArray.__array__))
    for edit in EDITS[1:]:
        loads, before = sa.SEGMENT_CACHE.loads, _segments(root)
        _apply(root, *edit)
        build_index(root)  # (the build stores its segment's vocabulary: not the reader's)
        calls.clear()
        whole_reads.clear()
        got = _all(root)
        # no posting array was read whole, nor a vocabulary (or a restricted caller's) built from every term
        assert calls == [] and whole_reads == [], (edit, calls, whole_reads)
        added = _segments(root) - before
        assert 0 <= added <= 1 and sa.SEGMENT_CACHE.loads - loads == 2 * added, edit  # the added segment's only
        live = tmp_path / f"live-{edit[0]}"
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(root, live, ignore=shutil.ignore_patterns(".vaultsearch"))
        build_index(live)
        assert got == _all(live), edit
