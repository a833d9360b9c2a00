"""``vaultsearch mcp`` as a subprocess, driven by the MCP SDK's own stdio client.

One server process for the module (``--freshness-window 0`` so that a change shows on the
next call). Tests that change the vault restore a consistent state before they end.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.ranking.filters import Filters
from core.registry import MODE_NAMES
from core.serve.schema import filter_params
from tests.serve.serve_helpers import HIDDEN_WORD, VAULTSEARCH, StdioSession, make_serve_vault


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mcp")
    root = make_serve_vault(base / "vault", base / "outside")
    build_index(root)
    return root


@pytest.fixture(scope="module")
def mcp(vault: Path) -> Iterator[StdioSession]:
    session = StdioSession([str(vault), "--freshness-window", "0"])
    yield session
    session.close()


def test_lists_every_tool_read_only_with_schemas_from_the_registry_and_filters(mcp):
    tools = {t.name: t for t in mcp.list_tools().tools}
    assert set(tools) == {"search", "read_note", "related", "status", "modes"}
    for t in tools.values():
        assert t.annotations.read_only_hint is True and t.annotations.open_world_hint is False
        assert t.annotations.destructive_hint is False
        assert t.output_schema is not None and t.input_schema["type"] == "object"
    props = tools["search"].input_schema["properties"]
    assert props["mode"]["enum"] == list(MODE_NAMES)
    assert set(filter_params()) <= set(props) and "classifications" not in props
    assert tools["search"].input_schema["required"] == ["query"]
    assert tools["read_note"].input_schema["required"] == ["path"]


def test_search_returns_the_envelope_with_line_ranges_and_content_hashes(mcp, vault):
    env = mcp.call("search", {"q": "lighthouse lamp", "limit": 3, "mode": "fts"})
    assert env["version"] == "vaultsearch.search/1"
    assert (env["requested_mode"], env["actual_mode"], env["retrieval_contract"]) == ("fts", "fts", "fts")
    assert env["index"]["kind"] == "immutable_generation" and env["index"]["generation_id"]
    assert env["freshness"]["checked"] is True and env["freshness"]["stale"] is False
    assert env["visible_classifications"] == ["(unclassified)", "public"]
    top = env["hits"][0]
    assert top["path"] == "notes/alpha.md" and top["score_source"]
    data = (vault / "notes/alpha.md").read_bytes()
    assert top["content_sha256"] == hashlib.sha256(data).hexdigest()
    lines = data.decode().split("\n")
    covered = "\n".join(lines[top["line_start"] - 1 : top["line_end"]])
    assert "Install the lighthouse lamp carefully." in covered
    assert not lines[top["line_start"] - 1].startswith(("title:", "---"))  # body lines, not frontmatter
    assert env["budget"]["truncated"] is False and env["returned"] == len(env["hits"])


def test_search_accepts_aliases_and_comma_strings(mcp):
    env = mcp.call("search", {"query": "harbour", "n": "5", "type": "ref,howto", "mode": "fts"})
    assert {h["path"] for h in env["hits"]} == {"notes/alpha.md", "notes/beta.md", "notes/old.md"}
    only_ref = mcp.call("search", {"q": "harbour", "note_types": ["ref"], "mode": "fts"})
    assert {h["path"] for h in only_ref["hits"]} == {"notes/beta.md", "notes/old.md"}


def test_the_result_fits_the_byte_budget_and_says_what_it_cut(mcp):
    env = mcp.call("search", {"q": "harbour lighthouse", "mode": "fts", "budget_bytes": 1500})
    size = len(json.dumps(env, ensure_ascii=False, separators=(",", ":")).encode())
    assert size <= 1500 and env["budget"]["truncated"] is True
    assert env["budget"]["hits_dropped"] + env["budget"]["snippets_cut"] > 0
    assert env["returned"] == len(env["hits"])


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        ("search", {}, "invalid_argument"),
        ("search", {"q": "x", "colour": "red"}, "invalid_argument"),
        ("search", {"q": "x", "mode": "psychic"}, "invalid_argument"),
        ("search", {"q": "x", "max_results": 0}, "invalid_argument"),
        ("search", {"q": "x", "since": "not-a-date"}, "invalid_filter"),
        ("search", {"q": "x", "classification": "restricted"}, "invalid_argument"),
        ("search", {"q": "x", "classifications": ["restricted"]}, "invalid_argument"),
        ("search", {"q": "(unclosed", "raw": True}, "query_syntax"),
        ("read_note", {"path": "notes/alpha.md", "section": "No such heading"}, "section_not_found"),
        ("read_note", {"path": 7}, "invalid_argument"),
        ("related", {"path": "notes/alpha.md", "depth": 9}, "invalid_argument"),
    ],
)
def test_bad_arguments_are_tool_errors_with_a_stable_reason(mcp, tool, arguments, reason):
    assert mcp.error(tool, arguments)["reason"] == reason


def test_a_mode_that_fails_closed_is_a_tool_error_never_an_empty_list(mcp):
    err = mcp.error("search", {"q": "lighthouse", "mode": "semantic"})
    assert err["reason"] == "dense_index_unavailable" and err["hint"]
    fallback = mcp.call("search", {"q": "lighthouse", "mode": "semantic", "allow_fallback": True})
    assert (fallback["actual_mode"], fallback["fallback_reason"]) == ("fts", "dense_index_unavailable")


@pytest.mark.parametrize(
    "path", ["../outside/outside.md", "/etc/passwd", "notes/../../outside/outside.md", "notes/escape.md"]
)
def test_paths_that_leave_the_vault_are_refused(mcp, path):
    for tool in ("read_note", "related"):
        assert mcp.error(tool, {"path": path})["reason"] == "path_outside_vault"


def test_read_note_gives_numbered_lines_and_frontmatter_as_data(mcp, vault):
    out = mcp.call("read_note", {"path": "notes/alpha.md"})
    assert out["frontmatter"]["title"] == "Alpha lighthouse" and out["frontmatter"]["type"] == "howto"
    lines = (vault / "notes/alpha.md").read_text().split("\n")
    first = out["text"].split("\n")[0]
    n, text = first.split(": ", 1)
    assert int(n) == out["line_start"] and lines[int(n) - 1] == text and lines[int(n) - 2] == "---"  # body first
    numbered = dict(x.split(": ", 1) if ": " in x else (x.rstrip(":"), "") for x in out["text"].split("\n"))
    assert all(lines[int(k) - 1] == v for k, v in numbered.items()) and "# Alpha lighthouse" in numbered.values()
    section = mcp.call("read_note", {"path": "notes/alpha.md", "section": "Setup"})
    assert section["text"].split("\n")[0].endswith("## Setup") and "Usage" not in section["text"]
    window = mcp.call("read_note", {"path": "notes/alpha.md", "from_line": 2, "max_lines": 2})
    assert [int(x.split(":")[0]) for x in window["text"].split("\n")] == [2, 3] and window["next_from_line"] == 4
    assert out["changed_since_index"] is False


def test_related_lists_links_and_backlinks(mcp):
    out = mcp.call("related", {"path": "notes/alpha.md"})
    assert [x["path"] for x in out["links"]] == ["notes/beta.md"]
    assert [x["path"] for x in out["backlinks"]] == []  # beta is already a link; secret is hidden
    beta = mcp.call("related", {"note": "notes/beta.md", "depth": 2})
    assert {x["path"] for x in beta["links"]} == {"notes/alpha.md"}


def test_a_hidden_classification_leaves_no_trace_in_any_tool(mcp):
    env = mcp.call("search", {"q": f"{HIDDEN_WORD} lighthouse", "mode": "graph_assisted", "max_results": 50})
    env.pop("query")  # the caller's own words
    # its hidden word matched nothing the caller may see: said as unmatched, as for a word no note holds
    assert env.pop("unmatched_words") == [HIDDEN_WORD]
    assert HIDDEN_WORD not in json.dumps(env).lower() and "private/" not in json.dumps(env)
    assert {h["path"] for h in env["hits"]} == {"notes/alpha.md", "notes/beta.md"}
    for path in ("private/secret.md", "notes/lan-only.md"):
        missing = mcp.error("read_note", {"path": path})
        assert missing == mcp.error("read_note", {"path": path.replace(".md", "-never.md")}) | {
            "message": missing["message"],
            "evidence": missing["evidence"],
        }
        assert missing["reason"] == "note_not_found"
        assert mcp.error("related", {"path": path})["reason"] == "note_not_found"
    everything = json.dumps([mcp.call("related", {"path": "notes/alpha.md", "depth": 3}), mcp.call("status")])
    assert "private/" not in everything and "lan-only" not in everything and "Secret plans" not in everything
    assert mcp.call("status")["coverage"]["indexed_notes"] == 3  # alpha, beta, old (escape.md is not a note)


def test_status_and_modes(mcp):
    st = mcp.call("status")
    assert st["generation_id"] and st["legs"]["dense"] == "dense_index_unavailable" and st["degraded"] == ["dense"]
    assert st["visible_classifications"] == ["(unclassified)", "public"] and st["watch"] == {"enabled": False}
    assert [m["name"] for m in mcp.call("modes")["modes"]] == list(MODE_NAMES)


def test_a_stale_vault_is_labelled_then_a_generation_published_meanwhile_is_served(mcp, vault):
    before = mcp.call("search", {"q": "harbour", "mode": "fts"})
    (vault / "notes/old.md").unlink()
    (vault / "notes/new.md").write_text("---\ntitle: New\n---\n\nA new harbour note.\n", encoding="utf-8")
    (vault / "private/secret.md").write_text("---\nclassification: restricted\n---\n\nharbour moonbeam\n")
    try:
        every = (
            ("search", {"q": "harbour", "mode": "fts"}),
            ("status", {}),
            ("read_note", {"path": "notes/alpha.md"}),
            ("related", {"path": "notes/beta.md"}),
        )
        for call in every:
            fresh = mcp.call(*call)["freshness"]
            assert fresh["stale"] is True and (fresh["added"], fresh["removed"], fresh["modified"]) == (1, 1, 0)
            assert sorted(fresh["sample_paths"]) == ["notes/new.md", "notes/old.md"]  # the hidden edit: no trace
        stale = mcp.call("search", {"q": "harbour", "mode": "fts"})
        assert "notes/old.md" in {h["path"] for h in stale["hits"]}  # still served, and labelled stale
    finally:
        build_index(vault)
    after = mcp.call("search", {"q": "harbour", "mode": "fts"})
    assert after["index"]["generation_id"] != before["index"]["generation_id"]
    assert after["freshness"]["stale"] is False
    assert {h["path"] for h in after["hits"]} == {"notes/alpha.md", "notes/beta.md", "notes/new.md"}


def test_the_start_up_line_says_what_is_visible(vault):
    out = subprocess.run(
        [VAULTSEARCH, "mcp", str(vault), "--classification", "lan"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "visible classifications: (unclassified), public, lan" in out.stderr


def test_filters_field_list_is_what_the_schema_covers():
    from dataclasses import fields

    assert set(filter_params()) == {f.name for f in fields(Filters)} - {"classifications"}
