"""core.vault.links: resolving link targets to notes like Obsidian (and Dendron) do."""

from __future__ import annotations

import pytest

from core.vault.links import Link, LinkResolver, looks_like_dendron
from core.vault.notes import parse_note
from core.vault.scan import read_file, scan_vault
from tests import paths

DENDRON = paths.DENDRON
POWERSHELL = paths.POWERSHELL

NOTES = [
    ("index.md", ()),
    ("projects/Billing.md", ("billing service",)),
    ("archive/projects/Billing.md", ()),
    ("people/alice.md", ("Alice N",)),
    ("a/b/deep.md", ()),
    ("x/deep.md", ()),
    ("7.5/Microsoft.PowerShell.Core/About/about_Quoting_Rules.md", ()),
    ("7.5/Microsoft.PowerShell.Utility/Get-Host.md", ()),
    ("5.1/Microsoft.PowerShell.Utility/Get-Host.md", ()),
]


@pytest.fixture
def resolver() -> LinkResolver:
    return LinkResolver(NOTES)


def wiki(target: str, **kw) -> Link:
    return Link(target=target, kind=kw.pop("kind", "wikilink"), **kw)


@pytest.mark.parametrize(
    ("target", "from_path", "expected"),
    [
        ("projects/Billing", "index.md", "projects/Billing.md"),  # vault path without .md
        ("projects/Billing.md", "index.md", "projects/Billing.md"),  # with .md
        ("PROJECTS/billing", "index.md", "projects/Billing.md"),  # path, case-insensitive
        ("alice", "index.md", "people/alice.md"),  # file name anywhere
        ("ALICE.md", "index.md", "people/alice.md"),
        ("Billing", "index.md", "projects/Billing.md"),  # tie: shortest path
        ("Billing", "archive/other.md", "archive/projects/Billing.md"),  # tie: nearest folder first
        ("deep", "index.md", "x/deep.md"),
        ("b/deep", "index.md", "a/b/deep.md"),  # partial path matches the end
        ("billing service", "index.md", "projects/Billing.md"),  # alias, case-insensitive
        ("alice n", "index.md", "people/alice.md"),
        ("dendron://vault/people/alice", "index.md", "people/alice.md"),  # Dendron vault prefix
        ("nowhere", "index.md", None),
        ("c/deep", "index.md", None),  # wrong folder is not a match
    ],
)
def test_wikilink_resolution_order(resolver, target, from_path, expected):
    assert resolver.resolve(wiki(target), from_path) == expected


@pytest.mark.parametrize(
    ("target", "from_path", "expected"),
    [
        (
            "../Microsoft.PowerShell.Utility/Get-Host.md",
            "7.5/Microsoft.PowerShell.Core/Clear-Host.md",
            "7.5/Microsoft.PowerShell.Utility/Get-Host.md",
        ),
        (
            "../Microsoft.PowerShell.Utility/Get-Host.md",
            "5.1/Microsoft.PowerShell.Core/Clear-Host.md",
            "5.1/Microsoft.PowerShell.Utility/Get-Host.md",
        ),
        # PowerShell docs really write 'Microsoft.Powershell.Core' for 'Microsoft.PowerShell.Core'
        (
            "../Microsoft.Powershell.Core/About/about_Quoting_Rules.md",
            "7.5/Microsoft.PowerShell.Utility/Get-Host.md",
            "7.5/Microsoft.PowerShell.Core/About/about_Quoting_Rules.md",
        ),
        ("./Billing.md", "projects/index.md", "projects/Billing.md"),
        ("Billing.md", "archive/projects/x.md", "archive/projects/Billing.md"),  # relative before vault root
        ("projects/Billing.md", "index.md", "projects/Billing.md"),
    ],
)
def test_markdown_links_resolve_against_the_linking_folder(resolver, target, from_path, expected):
    assert resolver.resolve(wiki(target, kind="markdown"), from_path) == expected


def test_target_is_tried_before_alt_target_in_obsidian_vaults(resolver):
    assert not resolver.label_first
    link = wiki("alice", alias="Billing", alt_target="Billing")
    assert resolver.resolve(link, "index.md") == "people/alice.md"
    fallback = wiki("no-such-note", alias="alice", alt_target="alice", alt_heading="Bio")
    found = resolver.resolve_link(fallback, "index.md")
    assert found is not None
    assert (found.rel_path, found.via, found.heading, found.rule) == ("people/alice.md", "alt_target", "Bio", "name")


def test_dendron_vaults_read_label_first():
    notes = [("tags.md", ()), ("dendron.topic.tags.md", ()), ("dendron.topic.lookup.md", ()), ("root.md", ())]
    resolver = LinkResolver(notes)
    assert resolver.label_first
    link = wiki("Tags", alias="dendron.topic.tags", alt_target="dendron.topic.tags")
    assert resolver.resolve(link, "root.md") == "dendron.topic.tags.md"  # not the label's 'tags.md'
    assert LinkResolver(notes, label_first=False).resolve(link, "root.md") == "tags.md"


def test_dendron_prefix_marks_a_label_first_link_in_any_vault(resolver):
    link = wiki("Billing", alt_target="dendron://site/people/alice")
    assert resolver.resolve(link, "index.md") == "people/alice.md"


def test_looks_like_dendron():
    assert looks_like_dendron(["a.b.md", "a.b.c.md", "root.md"])
    assert not looks_like_dendron(["My Note.md", "2024.03 plan.md", "x/y.md"])
    assert not looks_like_dendron([])


def test_paths_escaping_the_vault_do_not_match_by_path(resolver):
    link = wiki("../../../etc/passwd.md", kind="markdown")
    assert resolver.resolve(link, "index.md") is None


@pytest.mark.skipif(not DENDRON.is_dir(), reason="Dendron corpus not present")
def test_real_dendron_vault_resolution_rate():
    """Data README: 2,512 wikilinks, 2,304 resolve. Body wikilinks + embeds must do at least as well."""
    notes = [parse_note(f.rel_path, read_file(f.path)[0]) for f in scan_vault(DENDRON).files]
    resolver = LinkResolver((n.rel_path, n.aliases) for n in notes)
    body = [(n.rel_path, link) for n in notes for link in n.links if link.kind in ("wikilink", "embed")]
    resolved = [resolver.resolve_link(link, src) for src, link in body]
    assert len(body) >= 3000
    assert sum(r is not None for r in resolved) >= 2304
    # the label of [[label|target]] never wins over a target that resolves
    label_wins = [
        link
        for (src, link), r in zip(body, resolved)
        if r
        and link.alt_target
        and r.via == "target"
        and resolver.resolve(Link(link.alt_target, link.kind), src) is not None
    ]
    assert label_wins == []


@pytest.mark.slow
@pytest.mark.skipif(not POWERSHELL.is_dir(), reason="PowerShell corpus not present")
def test_real_powershell_markdown_links_resolve():
    notes = [parse_note(f.rel_path, read_file(f.path)[0]) for f in scan_vault(POWERSHELL).files]
    resolver = LinkResolver((n.rel_path, n.aliases) for n in notes)
    links = [(n.rel_path, link) for n in notes for link in n.links]
    resolved = sum(resolver.resolve(link, src) is not None for src, link in links)
    assert resolved / len(links) > 0.97
