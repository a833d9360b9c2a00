"""core.vault.notes: frontmatter, fields, dates, tags, links, title, and bad input."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.vault.dates import normalise_date
from core.vault.frontmatter import split_frontmatter
from core.vault.links import Link
from core.vault.notes import (
    PROBLEM_REASONS,
    ParsedNote,
    is_binary,
    parse_note,
    skip_problem,
)
from tests import paths

DENDRON = paths.DENDRON
POWERSHELL = paths.POWERSHELL


def parse(text: str, rel_path: str = "notes/a.md") -> ParsedNote:
    note = parse_note(rel_path, text.encode("utf-8"))
    assert note is not None
    return note


def reasons(note: ParsedNote) -> list[str]:
    return [p.reason for p in note.problems]


def targets(note: ParsedNote, kind: str | None = None) -> list[str]:
    return [link.target for link in note.links if kind is None or link.kind == kind]


# ---------------------------------------------------------------- fields

FULL = """---
title: Connection pooling
desc: Dendron-style description
type: Decision
tags: [Postgres, '#pool']
created: 2024-03-18
updated: 2024-03-20T16:45:00+01:00
source_date: 1623193357000
date: 1623193357
volatility: Stable
status: Accepted
classification: LAN
project: platform
aliases: [pool decision, PgBouncer]
supersedes: "[[adr-002|the old one]]"
superseded_by: [adr-009, "[[adr-010]]"]
id: abc-123
ms.date: 02/14/2023
nested: {a: [1, 2.5, null, true]}
---
body text
"""


def test_known_fields_are_extracted_and_normalised():
    note = parse(FULL)
    assert note.title == "Connection pooling"
    assert note.description == "Dendron-style description"
    assert note.note_type == "decision"
    assert note.status == "accepted"
    assert note.volatility == "stable"
    assert note.classification == "lan"
    assert note.namespace == "platform"
    assert note.aliases == ("pool decision", "PgBouncer")
    assert note.supersedes == ("adr-002",)
    assert note.superseded_by == ("adr-009", "adr-010")
    assert [(link.kind, link.target, link.source) for link in note.links] == [
        ("supersedes", "adr-002", "frontmatter"),
        ("superseded_by", "adr-009", "frontmatter"),
        ("superseded_by", "adr-010", "frontmatter"),
    ]
    assert note.tags == ("pool", "postgres")
    assert note.body == "body text\n"
    assert note.problems == ()


def test_dates_are_iso_8601():
    note = parse(FULL)
    assert note.dates == {
        "created": "2024-03-18",
        "updated": "2024-03-20T16:45:00+01:00",
        "source_date": "2021-06-08T23:02:37+00:00",  # epoch milliseconds (Dendron)
        "date": "2021-06-08T23:02:37+00:00",  # epoch seconds
    }


def test_unknown_keys_stay_in_extra_as_json_and_id_is_kept_twice():
    note = parse(FULL)
    assert note.frontmatter_id == "abc-123"
    assert note.extra == {"id": "abc-123", "ms.date": "02/14/2023", "nested": {"a": [1, 2.5, None, True]}}
    json.dumps(note.extra)


def test_non_finite_numbers_in_extra_are_kept_as_text_so_the_row_stays_valid_json():
    note = parse("---\nratio: .nan\nlimits: [.inf, -.inf, 1.5]\n---\nbody\n")
    assert note.extra == {"ratio": "nan", "limits": ["inf", "-inf", 1.5]}
    assert json.loads(json.dumps(note.extra, allow_nan=False)) == note.extra


def test_synonym_priority_leaves_the_unused_synonym_in_extra():
    note = parse("---\ndescription: first\nsummary: second\nkind: howto\nnamespace: ns\nproject: p\n---\n")
    assert note.description == "first"
    assert note.note_type == "howto"
    assert note.namespace == "ns"
    assert note.extra == {"summary": "second", "project": "p"}
    blank_first = parse("---\ndescription: '  '\nsummary: used\ntitle:\n---\n", "n.md")
    assert (blank_first.description, blank_first.title, blank_first.extra) == ("used", "n", {})


def test_tags_as_comma_or_space_string():
    assert parse("---\ntags: 'a, B,  #c d'\n---\n").tags == ("a", "b", "c", "d")
    assert parse("---\ntags: a, B #c is a YAML comment\n---\n").tags == ("a", "b")
    assert parse("---\ntags: single\n---\n").tags == ("single",)


def test_non_string_scalars_become_text_and_lists_as_title_are_field_invalid():
    note = parse("---\ntitle: [a, b]\nstatus: 3\nid: 42\n---\n# Heading\n", "x.md")
    assert note.title == "x"  # the file name (the H1 is a heading)
    assert note.status == "3"
    assert note.frontmatter_id == "42"
    assert reasons(note) == ["field_invalid"]
    assert note.extra["title"] == ["a", "b"]


def test_relations_from_fields_and_map():
    note = parse(
        "---\n"
        "related: [[x]]\n"  # unquoted: YAML reads a nested list
        "links: ['[[y|Why]]', z]\n"
        "parent: '[[p]]'\n"
        "relations:\n  Depends_On: [a, '[[b]]']\n  owner: people/alice\n"
        "---\n"
    )
    got = [(link.kind, link.target, link.source) for link in note.links]
    assert got == [
        ("related", "x", "frontmatter"),
        ("links", "y", "frontmatter"),
        ("links", "z", "frontmatter"),
        ("parent", "p", "frontmatter"),
        ("depends_on", "a", "frontmatter"),
        ("depends_on", "b", "frontmatter"),
        ("owner", "people/alice", "frontmatter"),
    ]
    assert note.links[1].alias == "Why"
    assert "relations" not in note.extra and "related" not in note.extra


def test_relations_that_are_not_a_mapping_are_field_invalid():
    note = parse("---\nrelations: [a, b]\n---\n")
    assert reasons(note) == ["field_invalid"]
    assert note.extra == {"relations": ["a", "b"]}
    assert note.links == ()


# ---------------------------------------------------------------- dates


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (dt.date(2024, 1, 5), "2024-01-05"),
        (dt.datetime(2024, 1, 5, 10, 30), "2024-01-05T10:30:00"),
        (dt.datetime(2024, 1, 5, 10, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))), "2024-01-05T10:30:00+02:00"),
        (1623193357000, "2021-06-08T23:02:37+00:00"),
        (1623193357, "2021-06-08T23:02:37+00:00"),
        (20240105, "2024-01-05"),  # YAML reads an unquoted 20240105 as an int
        (1.5e12, "2017-07-14T02:40:00+00:00"),
        ("1623193357000", "2021-06-08T23:02:37+00:00"),
        ("2024-01-05", "2024-01-05"),
        ("2024-01-05 10:30", "2024-01-05T10:30:00"),
        ("2024-01-05T10:30:00Z", "2024-01-05T10:30:00+00:00"),
        ("02/14/2023", "2023-02-14"),
        ("2023/02/14", "2023-02-14"),
        ("14 Feb 2023", "2023-02-14"),
        ("February 14, 2023", "2023-02-14"),
    ],
)
def test_normalise_date_accepts(value, expected):
    assert normalise_date(value) == expected


@pytest.mark.parametrize("value", [True, None, "", "yesterday", "2021-13-45", 10**30, float("nan"), [2024], {}])
def test_normalise_date_rejects(value):
    assert normalise_date(value) is None


def test_invalid_date_keeps_raw_value_in_extra():
    note = parse("---\ncreated: 2021-13-45\nupdated: soon\ndate: 2024-02-01\n---\n")
    assert note.dates == {"date": "2024-02-01"}
    assert note.extra == {"created": "2021-13-45", "updated": "soon"}
    assert reasons(note) == ["date_invalid", "date_invalid"]
    assert "created" in note.problems[0].detail


# ---------------------------------------------------------------- inline tags


def test_inline_tags_follow_obsidian_rules():
    body = (
        "# Heading is not a tag\n"
        "#start and mid #Tag-1 and #nested/child, #dendron.hier.\n"
        "not a#tag, http://x.org/page#frag, #123 digits, ## h2?\n"
        "`#inline` code and\n"
        "```\n#fenced code\n```\n"
        "#ünïcode\n"
    )
    note = parse(body)
    assert note.tags == ("dendron.hier", "nested/child", "start", "tag-1", "ünïcode")


def test_inline_and_frontmatter_tags_merge_unique_sorted():
    note = parse("---\ntags: [b, a]\n---\ntext #A #c\n")
    assert note.tags == ("a", "b", "c")


# ---------------------------------------------------------------- body links


def test_wikilink_forms():
    note = parse(
        "[[plain]] [[t|Alias]] [[t2#Head]] [[t3#Head|Alias 3]] ![[emb]] ![[emb2#sec]]\n"
        "[[folder/Note Name]] [[#same-note heading]] ![[diagram.png]] [[a\\|table cell]]\n"
    )
    assert [(link.kind, link.target, link.heading, link.alias) for link in note.links] == [
        ("wikilink", "plain", None, None),
        ("wikilink", "t", None, "Alias"),
        ("wikilink", "t2", "Head", None),
        ("wikilink", "t3", "Head", "Alias 3"),
        ("embed", "emb", None, None),
        ("embed", "emb2", "sec", None),
        ("wikilink", "folder/Note Name", None, None),
        ("wikilink", "a", None, "table cell"),
    ]
    assert all(link.source == "body" for link in note.links)


def test_dendron_label_first_link_records_both_sides():
    (link,) = parse("see [[Details|dendron.topic.lookup#details]]\n").links
    assert (link.target, link.heading) == ("Details", None)
    assert (link.alt_target, link.alt_heading) == ("dendron.topic.lookup", "details")
    assert link.alias == "dendron.topic.lookup#details"


def test_markdown_links_relative_md_only():
    note = parse(
        "[a](other.md) [b](../Mod/Get-Item.md#notes) [c](my%20note.md) [d](<with space.md>)\n"
        "[e](https://x.org/a.md) [f](mailto:x@y.z) [g](/abs/path.md) [h](#anchor) [i](pic.png)\n"
        '[j](./x.MD "title") ![k](img.md)\n'
    )
    got = [(link.kind, link.target, link.heading, link.alias) for link in note.links]
    assert got == [
        ("markdown", "other.md", None, "a"),
        ("markdown", "../Mod/Get-Item.md", "notes", "b"),
        ("markdown", "my note.md", None, "c"),
        ("markdown", "with space.md", None, "d"),
        ("markdown", "./x.MD", None, "j"),
        ("markdown", "img.md", None, "k"),
    ]


def test_links_inside_code_are_ignored():
    note = parse("`[[inline]]` and\n```md\n[[fenced]] [x](f.md)\n```\n~~~\n[[tilde]]\n~~~\n[[real]]\n")
    assert targets(note) == ["real"]


def test_unclosed_code_fence_runs_to_the_end():
    assert targets(parse("[[before]]\n```\n[[inside]]\n")) == ["before"]


# ---------------------------------------------------------------- title


def test_title_fallbacks():
    assert parse("---\ntitle: FM\n---\n# H1\n").title == "FM"
    assert parse("## h2 first\n```\n# in code\n```\n# Real H1 #\n", "a.md").title == "a"  # H1: a heading
    assert parse("no heading\n", "dir/My Note.MD").title == "My Note"
    assert parse("---\ntitle: ''\n---\n", "dendron.topic.x.md").title == "dendron.topic.x"


# ---------------------------------------------------------------- bad input


def test_malformed_yaml_keeps_body_after_the_fence():
    note = parse("---\ntitle: [unclosed\n---\n# Body Title\ntext\n", "bad.md")
    assert reasons(note) == ["yaml_invalid"]
    assert note.body == "# Body Title\ntext\n"
    assert note.title == "bad"
    assert note.extra == {}
    assert "line" in note.problems[0].detail and "\n" not in note.problems[0].detail


def test_frontmatter_that_is_not_a_mapping():
    for yaml_text in ("- a\n- b", "just a string", "42"):
        note = parse(f"---\n{yaml_text}\n---\nbody\n")
        assert reasons(note) == ["frontmatter_not_mapping"]
        assert note.body == "body\n" and note.extra == {}


def test_unclosed_frontmatter_makes_everything_body():
    text = "---\ntitle: x\nno closing fence\n"
    note = parse(text)
    assert reasons(note) == ["frontmatter_unclosed"]
    assert note.body == text
    assert note.title == "a"


def test_frontmatter_fences_variants():
    assert split_frontmatter("---\na: 1\n...\nbody") == ("a: 1\n", "body", False)
    assert split_frontmatter("---\r\na: 1\r\n---\r\nbody\r\n") == ("a: 1\r\n", "body\r\n", False)
    assert split_frontmatter("---\n---\n") == ("", "", False)
    assert split_frontmatter("text\n---\na: 1\n---\n") == (None, "text\n---\na: 1\n---\n", False)
    assert parse("---\n---\nbody").problems == ()


def test_empty_and_whitespace_files():
    for data in (b"", b"  \n\t\n"):
        note = parse_note("dir/Empty Note.md", data)
        assert note is not None
        assert [p.reason for p in note.problems] == ["empty"]
        assert note.title == "Empty Note"
        assert note.links == () and note.tags == ()


def test_invalid_utf8_is_replaced_and_reported():
    note = parse_note("x.md", b"---\ntitle: caf\xe9\n---\nbody \xff #tag\n")
    assert note is not None
    assert [p.reason for p in note.problems] == ["utf8_invalid"]
    assert note.title == "caf\ufffd"
    assert note.tags == ("tag",)


def test_bom_is_stripped():
    note = parse_note("x.md", "\ufeff---\ntitle: T\n---\nb".encode())
    assert note is not None and note.title == "T" and note.problems == ()


def test_binary_file_is_skipped_with_a_problem():
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    assert is_binary(data)
    assert parse_note("image.md", data) is None
    problem = skip_problem("image.md", data)
    assert (problem.path, problem.reason) == ("image.md", "binary")
    assert not is_binary(b"x" * 9000 + b"\x00")  # NUL beyond the first 8 KiB


def test_yaml_bombs_and_unsafe_tags_are_yaml_invalid():
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh")
    )
    for yaml_text in (bomb, "a: &a [*a]\nb: *a", "x: !!python/object:os.system ls", "[" * 5000):
        note = parse(f"---\n{yaml_text}\n---\nbody\n")
        assert reasons(note) == ["yaml_invalid"], yaml_text[:30]
        assert note.body == "body\n"


def test_huge_note_parses():
    body = "A paragraph with a [[link]] and #tag.\n\n" * 50_000
    note = parse(body)
    assert len(note.links) == 50_000 and note.tags == ("tag",)


def test_every_reported_reason_is_documented():
    samples = [
        b"",
        b"\xff",
        b"---\n:\n---\n",
        b"---\n- a\n---\n",
        b"---\nx\n",
        b"---\ndate: x\n---\n",
        b"---\ntitle: {a: 1}\n---\n",
    ]
    seen = {p.reason for data in samples for p in parse_note("x.md", data).problems}
    assert seen == {
        "empty",
        "utf8_invalid",
        "yaml_invalid",
        "frontmatter_not_mapping",
        "frontmatter_unclosed",
        "date_invalid",
        "field_invalid",
    }
    assert seen | {"binary"} <= PROBLEM_REASONS


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_parse_note_never_raises_on_arbitrary_bytes(data):
    note = parse_note("fuzz.md", data)
    if note is not None:
        json.dumps(note.extra)
        assert all(p.reason in PROBLEM_REASONS for p in note.problems)
        assert list(note.tags) == sorted(set(note.tags))


_MARKDOWNISH = st.text(alphabet=st.sampled_from(list("---...:#[]|!`~()<>{}&*@%\n \t\"'abc1/\\.,_é")), max_size=400)


@settings(max_examples=300, deadline=None)
@given(_MARKDOWNISH)
def test_parse_note_never_raises_on_markdownish_text_with_frontmatter(text):
    note = parse_note("fuzz.md", ("---\n" + text).encode("utf-8"))
    assert note is not None
    json.dumps(note.extra)
    assert all(isinstance(link, Link) and link.target for link in note.links)


# ---------------------------------------------------------------- real notes

# Verbatim from the Dendron docs vault (MIT, dendronhq/dendron-site): changelog.release.2021-09-21.md
DENDRON_RELEASE = """---
id: N9X7MArddruHw3FXxZv8X
title: '0.60'
desc: ''
updated: 1640425250362
created: 1632174465899
---

Dendron 0.60 has sprouted  🌱

### Everything Else
- various GitHub pod improvements ([[docs|dendron.topic.pod.builtin.github-issue]])
  - renamed to GitHub issue pod #breaking

### Ongoing 

- [Preview v2 does not properly follow anchor links · Issue #1203 · dendronhq/dendron](https://github.com/dendronhq/dendron/issues/1203)

### Community

You can find notes from our latest office hours [[here|community.events.office-hours.2021.09.19]]

- `@doctorboy#9882`
    - #role.bugcatcher
    - [Tag autocomplete suggestion only appears if # symbol is first in line](https://github.com/dendronhq/dendron/issues/1352)

### Changelog
![[changelog#060,1:#059]]
"""


def test_real_dendron_note():
    note = parse(DENDRON_RELEASE, "changelog.release.2021-09-21.md")
    assert note.title == "0.60"
    assert note.description is None  # desc: '' is empty
    assert note.frontmatter_id == "N9X7MArddruHw3FXxZv8X"
    assert note.dates == {"created": "2021-09-20T21:47:45.899000+00:00", "updated": "2021-12-25T09:40:50.362000+00:00"}
    assert note.tags == ("breaking", "role.bugcatcher")
    links = [(link.kind, link.target, link.alt_target, link.heading) for link in note.links]
    assert links == [
        ("wikilink", "docs", "dendron.topic.pod.builtin.github-issue", None),
        ("wikilink", "here", "community.events.office-hours.2021.09.19", None),
        ("embed", "changelog", None, "060,1:#059"),
    ]
    assert note.problems == ()


# Verbatim from PowerShell-Docs (CC BY 4.0): reference/7.5/Microsoft.PowerShell.Core/Clear-Host.md (shortened body)
POWERSHELL_NOTE = """---
external help file: System.Management.Automation.dll-Help.xml
Locale: en-US
Module Name: Microsoft.PowerShell.Core
ms.date: 04/29/2025
online version: https://learn.microsoft.com/powershell/module/microsoft.powershell.core/clear-host?view=powershell-7.5&WT.mc_id=ps-gethelp
schema: 2.0.0
aliases:
  - clear
  - cls
title: Clear-Host
---

# Clear-Host

## SYNOPSIS

Clears the display in the host program.

## RELATED LINKS

[Get-Host](../Microsoft.PowerShell.Utility/Get-Host.md)

[Out-Host](Out-Host.md)
"""


def test_real_powershell_note():
    note = parse(POWERSHELL_NOTE, "7.5/Microsoft.PowerShell.Core/Clear-Host.md")
    assert note.title == "Clear-Host"
    assert note.aliases == ("clear", "cls")
    assert note.dates == {}
    assert note.extra["ms.date"] == "04/29/2025"
    assert note.extra["Module Name"] == "Microsoft.PowerShell.Core"
    assert note.extra["schema"] == "2.0.0"
    assert targets(note, "markdown") == ["../Microsoft.PowerShell.Utility/Get-Host.md", "Out-Host.md"]
    assert note.problems == ()


@pytest.mark.skipif(not POWERSHELL.is_dir(), reason="PowerShell corpus not present")
def test_real_powershell_invalid_yaml_falls_back_to_heading_title():
    path = POWERSHELL / "7.5/Microsoft.PowerShell.Core/ForEach-Object.md"
    note = parse_note("ForEach-Object.md", path.read_bytes())
    assert note is not None
    assert [p.reason for p in note.problems] == ["yaml_invalid"]  # '- %' is not valid YAML
    assert note.title == "ForEach-Object"


@pytest.mark.skipif(not DENDRON.is_dir(), reason="Dendron corpus not present")
def test_real_dendron_vault_parses_without_problems():
    notes = [parse_note(p.name, p.read_bytes()) for p in sorted(DENDRON.glob("*.md"))[:300]]
    assert all(n is not None and n.problems == () for n in notes)
    assert all("updated" in n.dates for n in notes)
