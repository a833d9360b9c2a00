"""Notebook views: highlighted matches, snippets as plain readable text, one obsidian:// link per hit,
the provenance line; note text never becomes markup (HTML, images, javascript: links)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from core.render import EMBED_HINT, highlighted_html, readable_text, results_html, results_markdown, terminal_safe
from core.searcher import obsidian_uri, search_vault
from tests.conftest import note

HOSTILE = note(
    "Tricky <img src=x onerror=alert(1)>",
    "The lighthouse keeper [[Harbour Master|the master]] wrote **bold** words. "
    "![track](http://evil.example/pixel.png) [click](javascript:alert(1)) <b>raw html</b> "
    "<script>alert(2)</script> ![[diagram.png]] `code` lighthouse again",
)


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault({"notes/Tricky.md": HOSTILE, "plain.md": note("Plain", "A lighthouse on the hill.")}, name="nb")


def test_readable_text_shows_wikilinks_as_labels_and_drops_markup():
    text = readable_text("See [[a/b#Sec|label]], [[target#Head]], ![img](u.png) [x](javascript:y) <i>it</i> **b**")
    assert text == "See label, target › Head, img x it b"


def test_highlighting_marks_words_that_start_with_a_query_term_and_escapes_the_rest():
    assert highlighted_html("Lighthouses & <lights>", ["lighthous"]) == "<mark>Lighthouses</mark> &amp; &lt;lights&gt;"


def test_terminal_safe_escapes_controls_but_keeps_newlines_and_tabs():
    assert terminal_safe("a\x1b[31mb\tc\nd\x9b\u202e") == "a\\x1b[31mb\tc\nd\\x9b\\u202e"


def test_html_view_has_provenance_highlights_and_one_obsidian_link_per_hit(vault):
    results = search_vault(vault, "lighthouse", mode="auto")
    page = results_html(results)
    assert "mode fts (requested auto" in page and str(results.index.generation_id) in page and EMBED_HINT in page
    links = [html.unescape(u) for u in re.findall(r'<a href="([^"]*)"', page)]
    assert links == [r.obsidian_uri for r in results] and len(links) == len(results) == 2
    assert "obsidian://open?vault=" in links[0]
    assert "<mark>lighthouse</mark>" in page and "the master" in page and "[[" not in page
    for bad in ("<script", "<img", "<b>raw", "javascript:", "evil.example", "**bold**"):
        assert bad not in page


def test_markdown_view_escapes_note_text_and_links_only_to_obsidian(vault):
    results = search_vault(vault, "lighthouse", mode="fts")
    md = results_markdown(results)
    assert md == results._repr_markdown_()
    targets = re.findall(r"\]\(<?([^)>]*)>?\)", md)
    assert targets == [r.obsidian_uri for r in results]  # no image, no javascript:, no other link
    unescaped = re.compile(r"(?<!\\)[<!]")  # a '<' or '!' the renderer would read as markup
    assert not unescaped.search(re.sub(r"\]\(<obsidian://[^>]*>\)", "]", md).replace("**", ""))
    assert "javascript:" not in md.replace("\\", "") and "evil.example" not in md


def test_every_hit_carries_its_obsidian_uri_in_json(vault):
    results = search_vault(vault, "lighthouse", mode="fts")
    by_path = {r.rel_path: r.to_dict()["obsidian_uri"] for r in results}
    assert by_path["notes/Tricky.md"] == f"obsidian://open?vault={vault.name}&file=notes%2FTricky"
    assert obsidian_uri("My Vault", "a b/c&d.md") == "obsidian://open?vault=My%20Vault&file=a%20b%2Fc%26d"
