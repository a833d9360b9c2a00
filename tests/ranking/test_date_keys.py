"""Date keys (issue 26): ``modified``, ``lastmod``, ``last_modified``, ``updated_at`` and
``date_modified`` are ``updated`` written another way (the first present wins); the hit names the
key that gave its date, ``--date-field`` accepts each of them, and a refused date field lists
every name it accepts (invalid_filter, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import cli
from core.errors import FilterError
from core.index.tables.notes import DATE_FIELD_KEYS
from core.searcher import search_vault
from core.vault.notes import parse_note

UPDATED_KEYS = DATE_FIELD_KEYS["updated"]
DATES = {
    **{
        f"{key}.md": f"---\n{key}: 2024-05-0{i + 1}\ncreated: 2020-01-01\n---\nHeron {key}.\n"
        for i, key in enumerate(UPDATED_KEYS)
    },
    "both.md": "---\nlastmod: 2024-06-01\nmodified: 2024-07-01\ncreated: 2020-01-01\n---\nHeron both.\n",
    "unreadable.md": "---\nmodified: someday\nlastmod: 2024-08-01\n---\nHeron unreadable.\n",
    "created.md": "---\ncreated: 2021-01-01\n---\nHeron created.\n",
}


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(DATES, name="datekeys")


def test_the_updated_keys_are_the_five_synonyms_the_issue_names():
    assert UPDATED_KEYS == ("updated", "modified", "lastmod", "last_modified", "updated_at", "date_modified")


def test_the_first_readable_key_gives_updated_and_is_kept():
    note = parse_note("n.md", b"---\nlastmod: 2024-06-01\nmodified: 2024-07-01\n---\n")
    assert note is not None
    assert note.dates == {"updated": "2024-07-01"} and note.date_keys == {"updated": "modified"}
    assert note.extra == {"lastmod": "2024-06-01"}  # the keys after the winner stay as they were
    bad = parse_note("n.md", b"---\nmodified: someday\nlastmod: 2024-08-01\n---\n")
    assert bad is not None and bad.dates == {"updated": "2024-08-01"} and bad.date_keys == {"updated": "lastmod"}
    assert [p.reason for p in bad.problems] == ["date_invalid"]


def test_each_hit_names_the_key_that_gave_its_date(vault):
    decided = {r.rel_path: (r.date_field, r.date) for r in search_vault(vault, "heron", mode="fts", limit=20)}
    expected = {f"{key}.md": (key, f"2024-05-0{i + 1}") for i, key in enumerate(UPDATED_KEYS)}
    assert decided == {
        **expected,
        "both.md": ("modified", "2024-07-01"),
        "unreadable.md": ("lastmod", "2024-08-01"),
        "created.md": ("created", "2021-01-01"),
    }


@pytest.mark.parametrize("key", UPDATED_KEYS)
def test_since_reads_every_updated_key_and_date_field_accepts_it(vault, key):
    since = {r.rel_path for r in search_vault(vault, "heron", mode="fts", limit=20, since="2024-05-06")}
    assert since == {"date_modified.md", "both.md", "unreadable.md"}  # not their created 2020
    named = search_vault(vault, "heron", mode="fts", limit=20, date_field=key, since="2024-01-01")
    assert {r.rel_path for r in named} == set(DATES) - {"created.md"}
    assert {r.rel_path: r.date_field for r in named}["lastmod.md"] == "lastmod"


def test_a_refused_date_field_lists_every_accepted_name(vault, capsys):
    with pytest.raises(FilterError) as info:
        search_vault(vault, "heron", mode="fts", date_field="published", since="2024-01-01")
    assert info.value.reason == "invalid_filter"
    choices = info.value.evidence["choices"]
    assert {"modified", "lastmod", "updated", "created", "mtime", "git_date"} <= set(choices)
    code = cli.main(["search", str(vault), "heron", "--date-field", "published", "--since", "2024-01-01", "--json"])
    err = json.loads(capsys.readouterr().err)
    assert code == 2 and err["reason"] == "invalid_filter" and err["evidence"]["choices"] == choices
    assert cli.main(["search", str(vault), "heron", "--date-field", "modified", "--since", "2024-01-01"]) == 0
