"""Obsidian filters: hierarchical tags, dates compared as instants (UTC), file mtime as a date
field, and the default date field (first of updated, date, created, mtime) named per hit."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.errors import FilterError
from core.ranking.filters import Filters, utc_microseconds
from core.searcher import search_vault
from tests.conftest import write_vault
from tests.index.test_builder import copy_corpus, dendron_subset
from tests.paths import DENDRON, POWERSHELL

TAGS = {
    "author.md": "Quasar note by an author. #placeholder/author\n",
    "deep.md": "---\ntags: [placeholder/author/guest]\n---\nQuasar guest note.\n",
    "plain.md": "---\ntags: placeholder\n---\nQuasar placeholder note.\n",
    "lookalike.md": "Quasar lookalike. #placeholderx #placeholder-old\n",
    "dotted.md": "---\ntags: [example.from-frontmatter]\n---\nQuasar Dendron style.\n",
}


@pytest.fixture(scope="module")
def tag_vault(make_vault) -> Path:
    return make_vault(TAGS, name="tags")


def paths(results) -> set[str]:
    return {r.rel_path for r in results}


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"tags_all": "placeholder"}, {"author.md", "deep.md", "plain.md"}),
        ({"tags_all": "#Placeholder"}, {"author.md", "deep.md", "plain.md"}),
        ({"tags_all": "placeholder/author"}, {"author.md", "deep.md"}),
        ({"tags_all": "placeholder/author/guest"}, {"deep.md"}),
        ({"tags_all": "placeholder/"}, {"author.md", "deep.md", "plain.md"}),
        ({"tags_all": ["placeholder", "placeholder/author/guest"]}, {"deep.md"}),
        ({"tags_any": ["placeholderx", "placeholder/author"]}, {"author.md", "deep.md", "lookalike.md"}),
        ({"tags_all": "example"}, {"dotted.md"}),  # Dendron's dotted tags nest too
        ({"tags_all": "place"}, set()),  # a prefix of a name is not a parent tag
    ],
)
@pytest.mark.parametrize("mode", ["fts", "vector", "hybrid", "auto"])
def test_a_tag_matches_itself_and_every_tag_below_it(tag_vault, kw, expected, mode):
    assert paths(search_vault(tag_vault, "quasar", mode=mode, limit=20, **kw)) == expected


@pytest.mark.parametrize("tag", ["", "#", "/", 5])
def test_an_empty_tag_is_an_invalid_filter(tag_vault, tag):
    with pytest.raises(FilterError) as info:
        search_vault(tag_vault, "quasar", mode="fts", tags_all=tag)
    assert info.value.reason == "invalid_filter"


SUBTREE = "(t.tag = q.value OR (t.tag >= q.value || '.' AND t.tag < q.value || '0'))"


def test_the_tag_condition_is_a_key_range_on_the_indexed_column_over_one_bound_array():
    assert Filters.make(tags_any=["A/b"], include_superseded=True).where() == (
        f"n.id IN (SELECT t.note_id FROM json_each(?) q JOIN note_tags t ON {SUBTREE})",
        ['["a/b"]'],
    )
    assert Filters.make(tags_all=["a", "b/c"], include_superseded=True).where() == (
        f"n.id IN (SELECT t.note_id FROM json_each(?) q JOIN note_tags t ON {SUBTREE} "
        "GROUP BY t.note_id HAVING count(DISTINCT q.value) = ?)",
        ['["a", "b/c"]', 2],
    )


def test_dendron_copy_nested_tag(tmp_path):
    vault = copy_corpus(DENDRON, tmp_path / "dendron", [*dendron_subset(), "dendron.topic.tags.md"])
    build_index(vault)
    found = paths(search_vault(vault, "tags", mode="fts", limit=50, tags_all="example"))
    assert "dendron.topic.tags.md" in found
    assert found == paths(search_vault(vault, "tags", mode="fts", limit=50, tags_all="example.from-frontmatter"))


# ---------------------------------------------------------------- dates

DATES = {
    # 2024-03-01T04:30Z written with a negative offset: as text it sorts before 2024-03-01
    "late.md": "---\nupdated: 2024-02-29T23:30:00-05:00\n---\nOrchid late.\n",
    # 2024-02-29T16:00Z written with a positive offset: as text it sorts after 2024-03-01
    "early.md": "---\nupdated: 2024-03-01T01:00:00+09:00\n---\nOrchid early.\n",
    "dated.md": "---\ndate: 2024-03-02\ncreated: 2020-01-01\n---\nOrchid dated.\n",
    "created.md": "---\ncreated: 2021-06-01\n---\nOrchid created.\n",
    "bare.md": "Orchid with no date in its frontmatter.\n",
}
BARE_MTIME = datetime(2023, 7, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def date_vault(tmp_path_factory) -> Path:
    root = write_vault(tmp_path_factory.mktemp("dates"), DATES)
    stamp = BARE_MTIME.timestamp()
    os.utime(root / "bare.md", (stamp, stamp))
    build_index(root)
    return root


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"since": "2024-03-01T00:00Z"}, {"late.md", "dated.md"}),  # the case: instants, not text
        ({"since": "2024-03-01"}, {"late.md", "dated.md"}),  # a date is its midnight UTC
        ({"until": "2024-02-29"}, {"early.md", "created.md", "bare.md"}),  # a date bound covers the whole day
        ({"until": "2024-02-29T16:00:00+00:00"}, {"early.md", "created.md", "bare.md"}),  # inclusive
        ({"until": "2024-02-29T15:59:59Z"}, {"created.md", "bare.md"}),
        ({"since": "2024-03-01T05:00:00+05:30", "until": "2024-03-01"}, {"late.md"}),  # 23:30Z on the 29th
        ({"date_field": "updated", "since": "2000-01-01"}, {"late.md", "early.md"}),
        ({"date_field": "created", "until": "2020-12-31"}, {"dated.md"}),
        ({"date_field": "mtime", "until": "2023-07-01T12:00Z"}, {"bare.md"}),
        ({"date_field": "mtime", "since": "2023-07-02"}, {"late.md", "early.md", "dated.md", "created.md"}),
        ({"since": "2023-07-01", "until": "2023-07-01"}, {"bare.md"}),  # no frontmatter date: its mtime
    ],
)
@pytest.mark.parametrize("mode", ["fts", "hybrid"])
def test_dates_are_compared_as_utc_instants(date_vault, kw, expected, mode):
    assert paths(search_vault(date_vault, "orchid", mode=mode, limit=20, **kw)) == expected


def test_each_hit_says_which_date_field_decided_it(date_vault):
    by_path = {r.rel_path: r for r in search_vault(date_vault, "orchid", mode="fts", limit=20)}
    decided = {p: (r.date_field, (r.date or "")[:10]) for p, r in by_path.items()}
    assert decided == {
        "late.md": ("updated", "2024-02-29"),
        "early.md": ("updated", "2024-03-01"),
        "dated.md": ("date", "2024-03-02"),  # date before created
        "created.md": ("created", "2021-06-01"),
        "bare.md": ("mtime", "2023-07-01"),
    }
    named = search_vault(date_vault, "orchid", mode="fts", limit=20, date_field="created")
    assert {r.rel_path: r.date_field for r in named} == {
        p: ("created" if p in {"dated.md", "created.md"} else None) for p in by_path
    }
    assert by_path["dated.md"].to_dict()["date_field"] == "date"


@pytest.mark.parametrize(
    "kw", [{"date_field": "published", "since": "2024-01-01"}, {"since": "yesterday"}, {"since": 5}, {"until": ""}]
)
def test_an_unknown_date_field_or_bound_stays_an_invalid_filter(date_vault, kw):
    with pytest.raises(FilterError) as info:
        search_vault(date_vault, "orchid", mode="fts", **kw)
    assert info.value.reason == "invalid_filter"


def test_utc_keys_order_instants_not_text():
    assert utc_microseconds("2024-02-29T23:30:00-05:00") > utc_microseconds("2024-03-01T01:00:00+09:00")
    assert utc_microseconds("2024-03-01") == utc_microseconds("2024-03-01T00:00:00Z") == 1709251200 * 10**6
    assert utc_microseconds("not a date") is None
    assert Filters(date_field=None).date_label_order() == ("updated", "date", "created", "mtime")


def test_powershell_copy_mtime_is_the_default_date_and_dendron_uses_updated(tmp_path):
    ps = copy_corpus(
        POWERSHELL, tmp_path / "ps", ["7.4/CimCmdlets/Get-CimClass.md", "7.4/CimCmdlets/Get-CimInstance.md"]
    )
    stamp = datetime(2022, 1, 15, tzinfo=UTC).timestamp()
    os.utime(ps / "7.4/CimCmdlets/Get-CimClass.md", (stamp, stamp))
    build_index(ps)
    hits = search_vault(ps, "cim", mode="fts", until="2022-01-15")  # ms.date is not a date field: mtime decides
    assert [(r.rel_path, r.date_field) for r in hits] == [("7.4/CimCmdlets/Get-CimClass.md", "mtime")]
    dendron = copy_corpus(DENDRON, tmp_path / "dendron", ["dendron.topic.schema.md"])
    build_index(dendron)
    (hit,) = search_vault(dendron, "schema", mode="fts")
    assert hit.date_field == "updated" and hit.date is not None  # epoch milliseconds, read as UTC


def test_dendron_copy_an_offset_bound_is_the_same_instant(tmp_path):
    """Dendron's ``updated`` is epoch milliseconds (UTC): a bound naming that instant in +09:00 includes
    the note, one millisecond later excludes it, across the UTC midnight the offset moves it over."""
    vault = copy_corpus(DENDRON, tmp_path / "dendron", ["dendron.topic.schema.md"])
    build_index(vault)
    (hit,) = search_vault(vault, "schema", mode="fts")
    instant = datetime.fromisoformat(hit.date).astimezone(UTC)
    tokyo = instant.astimezone(timezone(timedelta(hours=9)))
    assert search_vault(vault, "schema", mode="fts", since=tokyo.isoformat())
    assert not search_vault(vault, "schema", mode="fts", since=(tokyo + timedelta(milliseconds=1)).isoformat())
    assert search_vault(vault, "schema", mode="fts", until=tokyo.isoformat())
    assert not search_vault(vault, "schema", mode="fts", until=(tokyo - timedelta(milliseconds=1)).isoformat())
