"""A restricted caller's links from the stored resolution (core.ranking.visible_links): through edits that
delete, rename and add targets on a generation of segments, with hidden namesakes and hidden targets, the links
kept from the edges (those to a hidden or deleted note resolved again) equal every visible link resolved again
among the visible notes; when hiding notes flips how ``[[a|b]]`` reads (Dendron names), every link is resolved
again."""

from __future__ import annotations

from pathlib import Path

from core.build.builder import build_index
from core.index.layout import layout_for
from core.index.verify import connect_readonly, resolve
from core.ranking import visibility
from core.ranking.filters import Filters
from core.ranking.visible_links import kept_link_rows
from tests.conftest import note, write_vault

FILES = {
    "pub/a.md": note(
        "A", "See [[plans]], [[b]], [[gone]], [[Secret Alias]] and [x](../sec/x.md).", classification="public"
    ),
    "pub/b.md": note("B", "Back to [[a]] and [[plans#Goals]] and [[nowhere]].", classification="public"),
    "pub/deep/plans.md": note("Plans", "the visible plans, see [[a|the a note]]", classification="public"),
    "plans.md": note("Secret plans", "hidden plans [[b]]", classification="secret"),
    "sec/x.md": note("X", "hidden x, links [[a]]", classification="secret", aliases="[Secret Alias]"),
    "pub/gone.md": note("Gone", "a note deleted later [[plans]]", classification="public"),
    "top.md": note("Top", "[[plans]]: the hidden plans.md is the shortest path, so every note's resolution takes it"),
}
EDITS = (
    ("delete a visible target", lambda root: (root / "pub/gone.md").unlink()),
    ("a namesake appears", lambda root: (root / "pub/nowhere.md").write_text(note("Nowhere", "now here"))),
    ("a hidden namesake goes", lambda root: (root / "plans.md").unlink()),
    ("rename", lambda root: (root / "pub/b.md").rename(root / "pub/bee.md")),
    ("edit a source", lambda root: (root / "pub/a.md").open("a").write("\nAnd [[x]] too.\n")),
)


def _both(root: Path, classes: tuple[str, ...], asked: list[bool] | None = None) -> tuple[list | None, list]:
    conn = connect_readonly(resolve(layout_for(root)))
    try:
        visible = Filters(classifications=classes).visible_classification_clause()

        def resolver(label_first: bool):
            (asked if asked is not None else []).append(True)
            return visibility._visible_resolver(conn, visible, label_first)

        return kept_link_rows(conn, visible, resolver), visibility.resolved_link_rows(conn, visible)
    finally:
        conn.close()


def test_kept_links_equal_every_link_resolved_again_through_edits(tmp_path: Path) -> None:
    root = write_vault(tmp_path / "v", FILES)
    build_index(root)
    for name, edit in (("cold", lambda root: None), *EDITS):
        edit(root)
        build_index(root)
        for classes in (("public",), ("public", "secret")):
            asked: list[bool] = []
            kept, again = _both(root, classes, asked)
            assert kept is not None and kept == again, (name, classes)
            # the public caller's links to hidden notes are resolved again (top.md's [[plans]] to pub/deep/plans.md)
            assert bool(asked) == (classes == ("public",)), (name, classes)


def test_when_hiding_notes_flips_the_reading_of_links_every_link_is_resolved_again(tmp_path: Path) -> None:
    files = {f"pub/note{i}.md": note(f"N{i}", "plain [[a.b]]") for i in range(3)}
    files.update({f"a.b{i}.md": note(f"D{i}", "[[x|pub/note0]]", classification="secret") for i in range(5)})
    files["a.b.md"] = note("AB", "dendron", classification="secret")
    root = write_vault(tmp_path / "d", files)
    build_index(root)
    kept, again = _both(root, ("public",))
    assert kept is None and again  # most notes are Dendron-named, most visible ones are not
