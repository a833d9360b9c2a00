"""Leak probe of the tools (issue 28, cases 3, 4 and 9): ``related`` and ``status`` for several visible
sets, and an empty classification list at every entry point.

The rule is exact: a caller's answer equals the answer from the same vault built without the notes
it may not see (only the index identity and timings differ). A link to a hidden note then looks
exactly like a link to a missing note (unresolved), and a link that a hidden note captured (it
shares a name or an alias with a visible note) resolves as it would without that note.

``classifications=()`` (Python), ``--classification ''`` (CLI) and ``ServeConfig(classifications=())``
(the tools behind MCP and HTTP) name no classification: nothing is visible, and every answer equals
the answer from an empty vault.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from core.build.builder import build_index
from core.errors import VaultSearchError
from core.index.status import index_status
from core.ranking.filters import Filters
from core.searcher import search_vault
from core.serve.schema import DEFAULT_BUDGET_BYTES, dumps
from core.serve.tools import ServeConfig, Tools
from tests.conftest import note, write_files
from tests.test_leak_probe import _cli, _status_seen

# path -> (the classification the build gives it, text). Links chosen so that hiding a note changes
# how another link resolves: [[log]] from lan/r.md and bad/dup.md picks arc/log.md (sort order)
# over pub/log.md; [[kitchen]] picks sec/kitchen.md (a file name) over pub/c.md's alias.
NOTES: dict[str, tuple[str, str]] = {
    "pub/a.md": (
        "public",
        note(
            "Field log",
            "moth survey. See [[plans]], [[b]], [[log]], [[kitchen]] and [[nowhere]].",
            classification="public",
        ),
    ),
    "pub/b.md": ("public", note("Garden", "moth traps. Back to [[a]] and on to [[r]].")),
    "pub/c.md": ("public", note("Soup", "a plain note. See [[a]].", aliases=["kitchen"], classification="public")),
    "pub/log.md": ("public", note("Log", "the visible log, see [[c]] and [[arc/log]].")),
    "lan/r.md": ("lan", note("Relay", "relay wiring, see [[log]], [[a]] and [[plans]].", classification="lan")),
    "arc/log.md": ("secret", note("Hidden log", "see [[b]] and [[r]].", classification="secret")),
    "sec/plans.md": (
        "secret",
        note("Plans", "budget. See [[a]] and [[c]].", classification="secret", supersedes="[[b]]"),
    ),
    "sec/kitchen.md": ("secret", note("Kitchen secret", "see [[b]] and [[kitchen]].", classification="secret")),
    "bad/dup.md": ("unreadable", "---\nclassification: secret\nclassification: public\n---\nsee [[a]] and [[log]]\n"),
}
VISIBLE_SETS = [(), ("public",), ("public", "lan"), ("lan",), ("public", "secret"), ("secret", "unreadable")]
TIMING = ("checked_at", "scan_age_seconds", "reused_scan")


def _ids(visible: tuple[str, ...]) -> str:
    return "+".join(visible) or "nothing"


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    root = write_files(tmp_path_factory.mktemp("full"), {p: text for p, (_, text) in NOTES.items()})
    build_index(root)
    return root


@pytest.fixture(scope="module")
def bare_vaults(tmp_path_factory) -> dict[tuple[str, ...], Path]:
    """Per visible set: the same vault built with only the notes of that set."""
    out = {}
    for visible in VISIBLE_SETS:
        root = tmp_path_factory.mktemp(f"bare-{_ids(visible)}")
        write_files(root, {p: text for p, (level, text) in NOTES.items() if level in visible})
        build_index(root)
        out[visible] = root
    return out


def _without_identity(answer: dict[str, Any]) -> dict[str, Any]:
    """A tool's answer without which index served it, where the vault lies, and when (timings)."""
    out = {k: v for k, v in answer.items() if k not in ("index", "generation_id", "source_snapshot_hash", "vault")}
    out.pop("age_seconds", None)
    if isinstance(out.get("budget"), dict):  # the size of the whole answer counts the identity and timings
        out["budget"] = {k: v for k, v in out["budget"].items() if k != "bytes"}
    if isinstance(out.get("freshness"), dict):
        out["freshness"] = {k: v for k, v in out["freshness"].items() if k not in TIMING}
    return out


def _call(tools: Tools, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The answer, or the error's reason (a hidden note must fail exactly like a missing one)."""
    try:
        return _without_identity(tools.call(name, arguments))
    except VaultSearchError as exc:
        return {"error": exc.reason}


def _tools(vault: Path, visible: tuple[str, ...]) -> Tools:
    return Tools(ServeConfig(vault, classifications=visible))


def _hidden_paths(visible: tuple[str, ...]) -> list[str]:
    return [p for p, (level, _) in NOTES.items() if level not in visible]


def _no_hidden_path(answer: object, visible: tuple[str, ...]) -> None:
    dump = json.dumps(answer)
    assert not [p for p in _hidden_paths(visible) if p in dump]


# ---------------------------------------------------------------- related (case 4)


def test_control_a_link_to_a_hidden_note_is_resolved_for_a_caller_who_sees_it(full):
    got = _tools(full, ("public", "secret")).call("related", {"path": "pub/a.md"})
    assert {x["path"] for x in got["links"]} >= {"sec/plans.md", "sec/kitchen.md"}
    assert [u["target"] for u in got["unresolved"]] == ["nowhere"]


def test_a_link_to_a_hidden_note_is_unresolved_like_a_link_to_a_missing_one(full):
    got = _tools(full, ("public",)).call("related", {"path": "pub/a.md"})
    assert [u["target"] for u in got["unresolved"]] == ["plans", "nowhere"]
    # [[kitchen]] resolves as it would without sec/kitchen.md: to pub/c.md, by its alias
    assert [x["path"] for x in got["links"]] == ["pub/b.md", "pub/log.md", "pub/c.md"]


@pytest.mark.parametrize("visible", VISIBLE_SETS, ids=_ids)
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_related_equals_the_vault_without_hidden_notes(full, bare_vaults, visible, depth):
    mine, theirs = _tools(full, visible), _tools(bare_vaults[visible], visible)
    for path in NOTES:
        got = _call(mine, "related", {"path": path, "depth": depth})
        assert got == _call(theirs, "related", {"path": path, "depth": depth}), path
        _no_hidden_path(got, visible)


# ---------------------------------------------------------------- status (case 4)


@pytest.mark.parametrize("visible", VISIBLE_SETS, ids=_ids)
def test_status_equals_the_vault_without_hidden_notes(full, bare_vaults, visible):
    bare = bare_vaults[visible]
    got = index_status(full, classifications=visible)
    assert _status_seen(got) == _status_seen(index_status(bare, classifications=visible))
    _no_hidden_path(got, visible)
    assert _call(_tools(full, visible), "status", {}) == _call(_tools(bare, visible), "status", {})
    flags = [a for c in visible for a in ("--classification", c)] or ["--classification", ""]
    cli = [_cli("status", str(vault), *flags, "--json") for vault in (full, bare)]
    assert [code for code, _, _ in cli] == [0, 0]
    mine, theirs = (_status_seen(json.loads(out)) for _, out, _ in cli)
    assert mine == theirs
    _no_hidden_path(mine, visible)


# ---------------------------------------------------------------- the same over MCP and HTTP


def _mcp(tools: Tools, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One call through the MCP protocol (the SDK's client, in process)."""
    from mcp import Client

    from core.serve.mcp_server import build_server

    async def go() -> Any:
        async with Client(build_server(tools)) as client:
            return await client.call_tool(name, arguments)

    result = asyncio.run(go())
    if result.is_error:
        return {"error": json.loads(result.content[0].text)["error"]["reason"]}
    return _without_identity(dict(result.structured_content))


def _http(tools: Tools, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from core.serve.http_api import build_app

    with TestClient(build_app(tools, port=8765), base_url="http://127.0.0.1:8765") as client:
        body = client.post(f"/{name}", json=arguments).json()
    return {"error": body["error"]["reason"]} if "error" in body else _without_identity(body)


@pytest.mark.parametrize("visible", VISIBLE_SETS, ids=_ids)
@pytest.mark.parametrize("transport", [_mcp, _http], ids=["mcp", "http"])
def test_mcp_and_http_related_and_status_equal_the_vault_without_hidden_notes(full, bare_vaults, visible, transport):
    mine, theirs = _tools(full, visible), _tools(bare_vaults[visible], visible)
    calls = [("status", {})] + [("related", {"path": p, "depth": 2}) for p in ("pub/a.md", "lan/r.md", "arc/log.md")]
    for name, arguments in calls:
        got = transport(mine, name, arguments)
        assert got == transport(theirs, name, arguments), (name, arguments)
        _no_hidden_path(got, visible)


# ---------------------------------------------------------------- an empty classification list (case 3)


def _empty_vault(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("empty")
    build_index(root)
    return root


def test_an_empty_classification_list_hides_every_note_at_every_entry_point(full, tmp_path_factory):
    empty = _empty_vault(tmp_path_factory)
    assert Filters.make(classifications=[]) == Filters.make(classifications=[""]) == Filters(classifications=())
    for query in ("", "moth", "survey budget", "Relay"):
        for mode in ("fts", "vector", "hybrid", "graph_assisted", "auto"):
            for kw in ({"classifications": ()}, {"classifications": []}, {"filters": Filters(classifications=())}):
                got = search_vault(full, query, mode=mode, limit=50, **kw)
                assert list(got) == [] and got.freshness["added"] == got.freshness["modified"] == 0, (query, mode)
        raw = search_vault(full, query or "moth OR budget", mode="fts", raw=True, classifications=())
        assert list(raw) == []
    for vault in (full, empty):  # the CLI's empty list: --classification ''
        code, out, _ = _cli("search", str(vault), "moth", "--mode", "fts", "--classification", "", "--json")
        assert code == 0 and json.loads(out)["results"] == []
        code, out, _ = _cli("search", str(vault), "", "--classification", "", "--json")
        assert code == 0 and json.loads(out)["results"] == []
    status = index_status(full, classifications=())
    assert status["notes"] == status["chunks"] == status["links"] == 0 and status["problems"] == []
    assert _status_seen(status) == _status_seen(index_status(empty, classifications=()))
    mine, theirs = _tools(full, ()), _tools(empty, ())
    for transport in (_call, _mcp, _http):
        for name, arguments in [
            ("search", {"query": "", "mode": "fts"}),
            ("search", {"query": "moth survey", "mode": "graph_assisted"}),
            ("status", {}),
            *[("related", {"path": p}) for p in NOTES],
        ]:
            got = transport(mine, name, arguments)
            assert got == transport(theirs, name, arguments), (transport.__name__, name, arguments)
            assert got.get("hits", []) == [] and got.get("error") in (None, "note_not_found")


def test_an_empty_classification_list_sees_no_change_in_freshness(full, tmp_path_factory):
    """Added, modified and removed notes of every classification: nothing of it is visible."""
    root = write_files(tmp_path_factory.mktemp("fresh"), {p: text for p, (_, text) in NOTES.items()})
    build_index(root)
    (root / "sec" / "plans.md").unlink()
    (root / "pub" / "a.md").write_text(note("Field log", "changed", classification="public"), encoding="utf-8")
    write_files(root, {"pub/new.md": note("New", "new moth"), "sec/new.md": note("N", "x", classification="secret")})
    control = search_vault(root, "", classifications=("public", "secret"))
    assert control.freshness["stale"] is True  # the control: the changes are seen by a caller who may see them
    got = search_vault(root, "", classifications=())
    assert (got.freshness["stale"], got.freshness["added"], got.freshness["modified"], got.freshness["removed"]) == (
        False,
        0,
        0,
        0,
    )
    assert got.freshness["sample_paths"] == []
    status = _tools(root, ()).call("status", {})
    assert status["freshness"]["stale"] is False and status["coverage"]["indexed_notes"] == 0


# ---------------------------------------------------------------- the byte budget of related (case 9)


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    """A hub note 300 notes link to, each linking on to a note of its own (depth 2), with long titles."""
    files = {"hub.md": note("Hub", "the hub")}
    for i in range(300):
        files[f"spokes/s{i:03}.md"] = note(f"Spoke {i:03} " + "long title " * 12, f"to [[hub]] and [[leaf{i:03}]]")
        files[f"leaves/leaf{i:03}.md"] = note(f"Leaf {i:03}", "a leaf")
    root = write_files(tmp_path_factory.mktemp("hub"), files)
    build_index(root)
    return root


def test_related_on_a_hub_note_fits_the_byte_budget_and_says_what_it_cut(hub):
    tools = _tools(hub, ("public",))
    got = tools.call("related", {"path": "hub.md", "depth": 2})
    size = len(dumps(got).encode("utf-8"))
    assert size <= DEFAULT_BUDGET_BYTES and got["budget"]["bytes"] >= size and got["budget"]["truncated"] is True
    assert got["total"] == {"links": 300, "backlinks": 300, "unresolved": 0}  # links: the spokes' leaves (depth 2)
    assert got["budget"]["dropped"] == {"links": 300, "backlinks": 300 - len(got["backlinks"]), "unresolved": 0}
    assert got["links"] == [] and got["backlinks"]  # the nearest are kept: every depth-1 entry before depth 2
    bigger = tools.call("related", {"path": "hub.md", "depth": 2, "budget_bytes": 256 * 1024})
    assert len(dumps(bigger).encode("utf-8")) <= 256 * 1024
    assert bigger["backlinks"][: len(got["backlinks"])] == got["backlinks"]  # a cut answer is a prefix
    assert len(bigger["backlinks"]) > len(got["backlinks"])


def test_a_small_related_answer_is_whole_and_says_so(full):
    got = _tools(full, ("public",)).call("related", {"path": "pub/b.md"})
    assert got["budget"]["truncated"] is False and got["budget"]["dropped"] == {
        "links": 0,
        "backlinks": 0,
        "unresolved": 0,
    }
    assert got["total"] == {k: len(got[k]) for k in ("links", "backlinks", "unresolved")}
