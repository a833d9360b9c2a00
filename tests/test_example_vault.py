"""examples/vault: a realistic team vault that parses cleanly and whose links all resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.vault.chunking import chunk_body
from core.vault.links import Link, LinkResolver
from core.vault.notes import ParsedNote, parse_note
from core.vault.scan import read_file, scan_vault

VAULT = Path(__file__).resolve().parent.parent / "examples" / "vault"
TYPES = {"decision", "meeting", "howto", "project", "person", "reference"}


@pytest.fixture(scope="module")
def notes() -> dict[str, ParsedNote]:
    scan = scan_vault(VAULT)
    assert scan.problems == []
    parsed = {f.rel_path: parse_note(f.rel_path, read_file(f.path)[0]) for f in scan.files}
    assert all(n is not None for n in parsed.values())
    return parsed  # type: ignore[return-value]


@pytest.fixture(scope="module")
def resolver(notes) -> LinkResolver:
    return LinkResolver((n.rel_path, n.aliases) for n in notes.values())


def test_size_folders_and_ignored_drafts(notes):
    assert 20 <= len(notes) <= 40
    assert {p.split("/")[0] for p in notes if "/" in p} == {
        "decisions",
        "howtos",
        "meetings",
        "people",
        "projects",
        "reference",
    }
    assert (VAULT / "drafts").is_dir() and any((VAULT / "drafts").glob("*.md"))
    assert not any(p.startswith("drafts/") for p in notes)


def test_no_problems_anywhere(notes):
    assert [p for n in notes.values() for p in n.problems] == []


def test_every_link_and_relation_resolves_by_its_target(notes, resolver):
    assert not resolver.label_first
    unresolved = []
    for note in notes.values():
        for link in note.links:
            found = resolver.resolve_link(link, note.rel_path)
            if found is None or found.via != "target":
                unresolved.append((note.rel_path, link.target))
    assert unresolved == []


def test_link_constructs_are_all_present(notes):
    links = [link for n in notes.values() for link in n.links]
    kinds = {link.kind for link in links}
    assert {"wikilink", "embed", "markdown", "related", "parent"} <= kinds
    assert kinds - {"wikilink", "embed", "markdown", "related", "parent"}  # relations: map types
    assert any(link.alias and link.kind == "wikilink" for link in links)
    assert any(link.heading and link.kind == "wikilink" for link in links)
    assert any(link.heading and link.kind == "embed" for link in links)


def test_metadata_is_varied_and_typed(notes):
    values = list(notes.values())
    assert {n.note_type for n in values} == TYPES
    classes = [n.classification for n in values]
    assert classes.count("restricted") == 1
    assert classes.count("lan") >= 2
    assert classes.count("public") > len(values) / 2
    assert all(n.status or n.note_type == "person" for n in values)
    assert {n.volatility for n in values} >= {"stable", "evolving", "volatile"}
    assert any(n.aliases for n in values)
    assert any(len(d) == 10 for n in values for d in n.dates.values())  # date only
    assert any("T" in d and "+" in d for n in values for d in n.dates.values())  # datetime with offset


def test_tags_in_all_three_forms():
    texts = [p.read_text(encoding="utf-8") for p in VAULT.rglob("*.md") if "drafts" not in p.parts]
    assert any(re.search(r"^tags: \[", t, re.M) for t in texts)  # YAML list
    assert any(re.search(r"^tags: \w+, ", t, re.M) for t in texts)  # comma string
    assert any(re.search(r"^tags:\n  - ", t, re.M) for t in texts)  # block list
    assert any(re.search(r"(?<!\S)#[a-z]", t.split("\n---\n", 1)[1]) for t in texts)  # inline


def test_superseded_decision_points_at_its_replacement(notes, resolver):
    old = notes["decisions/adr-002-app-side-connection-pool.md"]
    new = notes["decisions/adr-006-pgbouncer-transaction-pooling.md"]
    assert old.status == "superseded"
    assert resolver.resolve(_wikilink(old.superseded_by[0]), old.rel_path) == new.rel_path
    assert resolver.resolve(_wikilink(new.supersedes[0]), new.rel_path) == old.rel_path


def _wikilink(target: str) -> Link:
    return Link(target=target, kind="wikilink")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("postgres connection pool", "decisions/adr-006-pgbouncer-transaction-pooling.md"),
        ("incident retro", "meetings/2024-03-14-incident-retro-db-outage.md"),
        ("onboarding", "howtos/onboarding-checklist.md"),
        ("rollback", "howtos/deploy-to-production.md"),
        ("lock waits", "howtos/debug-slow-queries.md"),
    ],
)
def test_vault_content_answers_typical_queries(notes, query, expected):
    """A crude term-count ranking puts the obvious note in the top 3: the content is varied enough."""
    words = query.lower().split()

    def score(note: ParsedNote) -> int:
        text = " ".join([note.title, *note.tags, note.description or ""] * 3 + [c.text for c in chunk_body(note.body)])
        return sum(text.lower().count(w) for w in words)

    ranked = sorted(notes.values(), key=score, reverse=True)
    assert expected in [n.rel_path for n in ranked[:3]]
