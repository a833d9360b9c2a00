"""A running reader's default filters' mask over a generation of segments (core.modes.segment_arrays) is the
one the default filters' SQL gives over every row of its view, a dead row's included (left out), through
edits that add, remove and move a ``supersedes`` edge; the rankings equal a cold build's."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
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


def _sql_mask(root: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the reader's default mask, the default filters' SQL over every row, the dead rows) of the active
    generation."""
    resolved = verify.resolve(layout_for(root))
    key, generation = sa.COMBINED_CACHE._entries[str(resolved.layout.index_dir)]
    assert key[1] == resolved.generation_id and generation.default_mask is not None
    conn = verify.connect_readonly(resolved)
    try:
        ids = generation.view.live.note_ids
        return generation.default_mask, default_filter_mask(conn, ids), ids < 0
    finally:
        conn.close()


def test_the_default_mask_of_each_generation_is_the_sql_over_every_row(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    _first_note(root, "projects").open("a").write("\nA first edit: the generation is two segments.\n")
    build_index(root)
    _ranking(root)
    mask, sql, dead = _sql_mask(root)
    assert np.array_equal(mask, sql) and dead.any() and not mask[dead].any()
    assert not mask[~dead].all()  # adr-002 is superseded
    for name, edit in EDITS:
        edit(root)
        build_index(root)
        got = _ranking(root)
        mask, sql, dead = _sql_mask(root)
        assert np.array_equal(mask, sql) and not mask[dead].any(), name
        live = tmp_path / f"live-{name.replace(' ', '-')}"
        shutil.copytree(root, live, ignore=shutil.ignore_patterns(".vaultsearch"))
        build_index(live)
        assert got == _ranking(live), name
