"""Snippets show link syntax as the text a reader sees, in the terminal and in the notebook views;
``--json`` keeps the snippet as the note writes it (the search page converts it the same way)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import note

from core import cli
from core.render import snippet_text
from core.searcher import search_vault

BODY = (
    "The harbour keeps a lantern lit, see [[guides/lantern-care|the lantern guide]] and "
    "[[Harbour log#Winter]] and ![[lantern.png|300]] and [the chart](https://example.org/chart(1)) "
    "and ![a sketch](sketch.png), but `[[literal]]` is code."
)


LINK_CASES = [
    ("see [[target|alias]] here", "see alias here"),
    ("see [[target]] here", "see target here"),
    ("see [[target#heading]] and [[note#H1#H2]]", "see target › heading and note › H1 › H2"),
    ("see [[#Local heading]] and [[note#^block1]]", "see Local heading and note"),
    ("an embed ![[x]] and ![[pic.png|300x200]] and ![[pic.png|a caption]]", "an embed x and pic.png and a caption"),
    ("a [text](https://e.org/a_(b)) and ![alt](i.png) link", "a text and alt link"),
    ("code `[[kept]]` and ``[x](y)`` stays", "code `[[kept]]` and ``[x](y)`` stays"),
    ("… cut|the label]] then", "… the label then"),  # the window starts inside a link
    ("then [[cut|the lab …", "then the lab …"),  # ... or ends inside one
    ("then [text](https://exa …", "then text …"),  # ... or inside a Markdown link's target
    ("not cut]] and [[ not closed", "not cut]] and [[ not closed"),  # no cut: literal text
]  # the search page's plainLinks (core/serve/page/dom.js) is held to the same cases


@pytest.mark.parametrize(("raw", "shown"), LINK_CASES)
def test_snippet_text(raw: str, shown: str) -> None:
    assert snippet_text(raw) == shown


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault({"harbour.md": note("Harbour", BODY), "other.md": note("Other", "Nothing here.")}, name="links")


def test_terminal_snippets_show_links_as_text(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["search", str(vault), "lantern", "--mode", "fts", "--no-freshness"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the snippet is wrapped
    assert "see the lantern guide and Harbour log › Winter and lantern.png and the chart and a sketch" in out
    assert "`[[literal]]` is code" in out
    assert "[[guides" not in out and "](https" not in out


def test_json_keeps_the_snippet_as_the_note_writes_it(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["search", str(vault), "lantern", "--mode", "fts", "--no-freshness", "--json"]) == 0
    snippet = json.loads(capsys.readouterr().out)["results"][0]["snippet"]
    assert "[[guides/lantern-care|the lantern guide]]" in snippet and "![[lantern.png|300]]" in snippet


def test_notebook_highlights_the_words_of_the_text_shown(vault: Path) -> None:
    results = search_vault(vault, "lantern", mode="fts")
    page = results._repr_html_()
    snip = re.search(r'<div class="vs-snip">(.*?)</div>', page).group(1)
    assert "see the <mark>lantern</mark> guide and Harbour log › Winter and <mark>lantern</mark>.png" in snip
    assert "[[guides" not in snip and "guides/lantern-care" not in snip and "[[literal]] is code" in snip
    assert "the lantern guide" in results._repr_markdown_()
