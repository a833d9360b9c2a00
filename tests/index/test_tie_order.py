"""Equal scores are ordered by the note's path in every mode, whatever ids the notes have (issue 29: "ties
broken on the note's path, never on segment order"): after incremental builds that give notes ids in an
order other than their paths' (a re-added or renamed note takes a new id), a generation of several
segments and one segment of them all (``index --optimize``: ids kept) rank exactly as a cold build of the
same notes, for an unrestricted and a restricted caller; ``related`` lists backlinks as a cold build does."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.build.builder import build_index
from core.build.optimize import MERGED, optimize_index
from core.index import verify
from core.index.layout import layout_for
from core.ranking.filters import Filters
from core.searcher import search_vault
from core.serve.tools import ServeConfig, Tools
from tests.conftest import note, write_files

MODES = ("fts", "vector", "hybrid", "graph_assisted")
# words every duplicate holds equally (equal scores); the hub's word (graph neighbours at equal scores)
QUERIES = ("lantern quokka", "orchard", "hubword", "lantern")
RAW_QUERIES = ("lantern AND quokka", "orch*", "hubword OR orchard")
CALLERS = (None, ("public",))
_DUP = "A lantern, a quokka and an orchard.\n\nThe lantern lights the orchard."
# the fields of a result that name the index or the vault folder (the cold copy is another), not the ranking
_IDENTITY = {"index_age_seconds", "index_generation_id", "index_source_snapshot_hash", "index_kind"}
_IDENTITY |= {"dates", "obsidian_uri"}


def _dup(classification: str) -> str:
    return note("Duplicate", _DUP, classification=classification)


def _vault(root: Path) -> Path:
    return write_files(
        root,
        {
            "m-dup.md": _dup("public"),
            "k-dup.md": _dup("public"),
            "x-dup.md": _dup("lan"),
            "b-dup.md": _dup("public"),
            "q-dup.md": _dup("public"),
            "hub.md": note("Hub", "hubword orchard\n\n[[leaf-b]] [[leaf-a]] [[leaf-c]]", classification="public"),
            "leaf-a.md": note("Leaf", "nothing here\n\n[[deep]]", classification="public"),
            "leaf-b.md": note("Leaf", "nothing here\n\n[[deep]]", classification="public"),
            "leaf-c.md": note("Leaf", "nothing here", classification="lan"),
            "deep.md": note("Deep", "far away", classification="public"),
        },
    )


def _results(vault: Path, query: str, mode: str, classes: tuple[str, ...] | None, raw: bool) -> list[dict[str, Any]]:
    filters = Filters(classifications=classes) if classes is not None else None
    found = search_vault(vault, query, 10, mode=mode, freshness=False, filters=filters, raw=raw)
    return [{k: v for k, v in h.to_dict().items() if k not in _IDENTITY} for h in found.hits]


def _same_as_cold(root: Path, tmp_path: Path, step: str) -> None:
    cold = tmp_path / f"cold-{step}"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    runs = [(m, q, False) for m in MODES for q in QUERIES] + [("fts", q, True) for q in RAW_QUERIES]
    for mode, query, raw in runs:
        for classes in CALLERS:
            got, expected = _results(root, query, mode, classes, raw), _results(cold, query, mode, classes, raw)
            assert got == expected, (step, mode, query, raw, classes)


def _segments(root: Path) -> int:
    return len([p for p in verify.resolve(layout_for(root)).parts if p.kind == "segment"])


def test_ties_follow_paths_after_edits_deletes_re_adds_and_renames(tmp_path: Path) -> None:
    root = _vault(tmp_path / "vault")
    build_index(root)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("edit", lambda: (root / "b-dup.md").write_text(_dup("public") + "\nextra words\n")),
        ("delete", lambda: (root / "k-dup.md").unlink()),
        ("re-add", lambda: write_files(root, {"k-dup.md": _dup("public"), "a-dup.md": _dup("public")})),
        ("edit-back", lambda: (root / "b-dup.md").write_text(_dup("public"))),
        ("rename", lambda: (root / "x-dup.md").rename(root / "c-dup.md")),
    ]
    for step, change in steps:
        change()
        report = build_index(root)
        assert report.full_rebuild_reason is None and report.one_segment_reason is None, (step, report)
        assert _segments(root) > 1, step
        _same_as_cold(root, tmp_path, step)
    # an edit of a linked note (its linkers' edges move), then every segment merged into ONE, whose notes
    # keep the ids the steps above gave them (not in path order)
    write_files(root, {"leaf-a.md": note("Leaf", "nothing here at all\n\n[[deep]]", classification="public")})
    build_index(root)
    _same_as_cold(root, tmp_path, "linked-edit")
    assert optimize_index(root, one_segment=True, grace_s=0.0).outcome == MERGED
    assert _segments(root) == 1
    _same_as_cold(root, tmp_path, "one-segment")


def _related(vault: Path, path: str, classes: tuple[str, ...]) -> dict[str, Any]:
    out = Tools(ServeConfig(vault, classifications=classes)).call("related", {"path": path, "depth": 2})
    return {k: out[k] for k in ("links", "backlinks", "unresolved")}


def test_backlinks_follow_their_sources_paths_after_an_incremental_build(tmp_path: Path) -> None:
    root = _vault(tmp_path / "vault")
    build_index(root)
    (root / "leaf-a.md").unlink()  # re-added: a new id, its edges stored after leaf-b's
    build_index(root)
    write_files(root, {"leaf-a.md": note("Leaf", "nothing here\n\n[[deep]]", classification="public")})
    build_index(root)
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    for classes in (("public", "lan"), ("public",)):
        for path in ("deep.md", "hub.md"):
            assert _related(root, path, classes) == _related(cold, path, classes), (path, classes)
    assert [b["path"] for b in _related(root, "deep.md", ("public",))["backlinks"]] == [
        "leaf-a.md",
        "leaf-b.md",
        "hub.md",
    ]
