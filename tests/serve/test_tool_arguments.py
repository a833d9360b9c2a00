"""Tool argument parsing and the byte budget (the shared layer under both servers)."""

from __future__ import annotations

import json

import pytest

from core.errors import InvalidArgumentError
from core.serve import schema as s


def parse(raw: dict) -> dict:
    return s.parse_arguments("search", raw, s.SEARCH_PARAMS, s.SEARCH_ALIASES)


def test_aliases_comma_strings_and_string_scalars_are_accepted():
    a = parse({"q": "x", "limit": "3", "tags": "a, b", "after": "2024-01-01", "include_superseded": "true"})
    assert (a["query"], a["max_results"], a["tags_all"], a["since"], a["include_superseded"]) == (
        "x",
        3,
        ("a", "b"),
        "2024-01-01",
        True,
    )
    assert (a["mode"], a["budget_bytes"]) == ("auto", s.DEFAULT_BUDGET_BYTES)


@pytest.mark.parametrize(
    "raw",
    [
        {"q": "x", "query": "y"},  # the same argument twice through an alias
        {"q": "x", "max_results": True},
        {"q": "x", "tags_all": [1, 2]},
        {"q": "x", "budget_bytes": 10},
        {"q": ["x"]},
    ],
)
def test_bad_values_are_invalid_arguments(raw):
    with pytest.raises(InvalidArgumentError) as info:
        parse(raw)
    assert info.value.reason == "invalid_argument"


def test_fit_budget_cuts_snippets_before_dropping_hits():
    hits = [{"path": f"n{i}.md", "snippet": "word " * 80} for i in range(5)]
    env = s.fit_budget({"hits": [dict(h) for h in hits]}, 1400)
    assert env["budget"]["snippets_cut"] == len(env["hits"]) and env["budget"]["truncated"] is True
    assert len(s.dumps(env).encode()) <= 1400 and env["returned"] == len(env["hits"]) >= 3
    roomy = s.fit_budget({"hits": [dict(h) for h in hits]}, 100_000)
    assert roomy["budget"]["truncated"] is False and roomy["hits"] == hits


def test_a_budget_that_cannot_hold_an_empty_result_is_an_error():
    with pytest.raises(InvalidArgumentError):
        s.fit_budget({"hits": [], "freshness": {"sample_paths": ["x" * 2000]}}, 1024)


def test_read_note_pages_forward_even_past_a_line_longer_than_max_bytes(tmp_path):
    from core.build.builder import build_index
    from core.serve.tools import ServeConfig, Tools

    (tmp_path / "long.md").write_text("# Long\n\n" + "word " * 200 + "\nlast line\n", encoding="utf-8")
    build_index(tmp_path)
    tools = Tools(ServeConfig(tmp_path))
    page = tools.call("read_note", {"path": "long.md", "from_line": 3, "max_bytes": 256})
    assert page["line_start"] == page["line_end"] == 3 and page["truncated"] is True
    assert page["text"].startswith("3: word") and len(page["text"].encode()) <= 256
    rest = tools.call("read_note", {"path": "long.md", "from_line": page["next_from_line"], "max_bytes": 256})
    assert rest["text"] == "4: last line" and rest["truncated"] is False and rest["next_from_line"] is None


def test_the_search_tool_says_which_words_were_expanded_and_which_matched_nothing(tmp_path):
    """An agent sees a typo correction or a prefix widening (issue #13: never silently)."""
    from core.build.builder import build_index
    from core.serve.tools import ServeConfig, Tools

    (tmp_path / "a.md").write_text("# Attachments\n\nWhere attachments are stored.\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# Templates\n\nTemplates for daily notes.\n", encoding="utf-8")
    build_index(tmp_path)
    tools = Tools(ServeConfig(tmp_path))
    typo = tools.call("search", {"query": "atachments", "mode": "fts"})
    assert [h["path"] for h in typo["hits"]][:1] == ["a.md"]
    assert typo["query_expansions"] and typo["query_expansions"][0]["word"] == "atachments"
    assert "attachments" in json.dumps(typo["query_expansions"])
    exact = tools.call("search", {"query": "templates zzqqxx", "mode": "fts"})
    assert exact["query_expansions"] == [] and exact["unmatched_words"] == ["zzqqxx"]
