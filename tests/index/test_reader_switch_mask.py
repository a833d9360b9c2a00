"""A running reader switching to an edited generation derives the default filters' mask from the previous
generation's (core.modes.segment_arrays): it asks SQL only about the rows that may differ (the added
notes, the notes the previous mask left out, the notes a ``supersedes`` edge names), never about every
note, and the mask is the one the default filters' SQL gives over every note of the new generation,
through edits that add, remove and move a ``supersedes`` edge; the rankings equal a cold build's."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
from core.modes import context
from core.modes import segment_arrays as sa
from core.ranking.sparse import default_filter_mask
from core.searcher import search_vault
from tests.conftest import EXAMPLE_VAULT

ADR6 = "decisions/adr-006-pgbouncer-transaction-pooling.md"
QUERIES = ("connection pool", "pgbouncer transaction pooling", "note")


def _ranking(vault: Path) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for q in QUERIES:
        found = search_vault(vault, q, 10, mode="fts", freshness=False, passages=False)
        out[q] = [(h.rel_path, h.score) for h in found.hits]
    return out


def _edit_adr6(root: Path, old: str, new: str) -> None:
    path = root / ADR6
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _first_note(root: Path, folder: str) -> Path:
    return sorted((root / folder).glob("*.md"))[0]


EDITS = (
    ("append", lambda root: _first_note(root, "people").open("a").write("\nAn appended line.\n")),
    ("supersedes removed", lambda root: _edit_adr6(root, "supersedes: adr-002", "formerly: adr-002")),
    ("supersedes back", lambda root: _edit_adr6(root, "formerly: adr-002", "supersedes: adr-002")),
    ("deleted", lambda root: _first_note(root, "meetings").unlink()),
    ("created", lambda root: (root / "decisions" / "zz-new.md").write_text("---\nsupersedes: adr-006\n---\n# New\n")),
)


def _sql_mask(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """(the reader's derived default mask, the default filters' SQL over every note) of the active generation."""
    resolved = verify.resolve(layout_for(root))
    generation = sa.COMBINED_CACHE.previous(str(resolved.layout.index_dir))
    assert generation is not None and generation.default_mask is not None
    conn = verify.connect_readonly(resolved)
    try:
        return generation.default_mask, default_filter_mask(conn, generation.combined.sparse.note_ids)
    finally:
        conn.close()


def test_a_switch_derives_the_default_mask_from_the_previous_generation(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    _first_note(root, "projects").open("a").write("\nA first edit: the generation is two segments.\n")
    build_index(root)
    _ranking(root)  # the reader's mask of this generation: asked of every note once
    derived, sql = _sql_mask(root)
    assert np.array_equal(derived, sql) and not sql.all()  # adr-002 is superseded
    asked: list[int] = []
    real = context.filtered_note_ids

    def every_note(*args, **kwargs):
        asked.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(context, "filtered_note_ids", every_note)
    for name, edit in EDITS:
        extended = sa.COMBINED_CACHE.extended
        edit(root)
        build_index(root)
        got = _ranking(root)
        assert sa.COMBINED_CACHE.extended == extended + 1, name
        assert asked == [], name  # no query over every note
        derived, sql = _sql_mask(root)
        assert np.array_equal(derived, sql), name
        live = tmp_path / f"live-{name.replace(' ', '-')}"
        shutil.copytree(root, live, ignore=shutil.ignore_patterns(".vaultsearch"))
        build_index(live)
        assert got == _ranking(live), name
