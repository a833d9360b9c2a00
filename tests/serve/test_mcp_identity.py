"""The MCP server says who it is and what state its index is in: ``serverInfo.version`` is the
installed package's version, and ``instructions`` are built from the index's state at start (note
count, freshness, dense coverage, what is missing, which tool next), counting only what the server
shows (a restricted server never gives away its hidden notes' count)."""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from core.build.builder import build_index
from core.index.freshness import FreshnessOptions
from core.serve.mcp_server import build_server
from core.serve.tools import ServeConfig, Tools
from tests.conftest import note
from tests.serve.serve_helpers import StdioSession, make_serve_vault

NOW = FreshnessOptions(window_seconds=0.0)
EVERYTHING = ("public", "lan", "restricted")  # FILES: 3 public / unclassified, 1 lan, 1 restricted


def _initialize(tools: Tools) -> tuple[Any, str]:
    """(serverInfo, instructions) as the SDK's client receives them from ``initialize``."""
    from mcp import Client

    async def go() -> tuple[Any, str]:
        async with Client(build_server(tools)) as client:
            return client.server_info, client.instructions or ""

    return asyncio.run(go())


def _tools(vault: Path, classifications: tuple[str, ...] = ("public",)) -> Tools:
    return Tools(ServeConfig(vault, classifications=classifications, freshness=NOW))


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return make_serve_vault(tmp_path / "vault", tmp_path / "outside")


def test_server_info_version_is_the_installed_package_version(vault):
    build_index(vault)
    info, _ = _initialize(_tools(vault))
    assert info.name == "vaultsearch" and info.version == version("vaultsearch") and info.version


def test_without_an_index_the_instructions_say_how_to_build_one(vault):
    _, text = _initialize(_tools(vault))
    assert "No index yet" in text and f"vaultsearch index {vault.resolve()}" in text
    assert "index_missing" in text


def test_instructions_give_the_visible_note_count_dense_state_and_the_next_tool(vault):
    build_index(vault)
    _, text = _initialize(_tools(vault))
    assert "3 note(s) searchable" in text  # alpha, beta, old: the lan and restricted notes are not counted
    assert "5 note" not in text and "moonbeam" not in text.lower()
    assert "up to date" in text
    assert "Semantic search: not available" in text and "--embed" in text and "dense_index_unavailable" in text
    assert "`search`" in text and "`read_note`" in text and "`status`" in text


def test_instructions_say_how_far_behind_the_index_is_counting_only_visible_changes(vault):
    build_index(vault)
    (vault / "notes" / "new.md").write_text(note("New", "A new public harbour note."), encoding="utf-8")
    (vault / "private" / "hidden.md").write_text(
        note("Hidden", "A hidden one.", classification="restricted"), encoding="utf-8"
    )
    _, restricted = _initialize(_tools(vault))
    _, everything = _initialize(_tools(vault, EVERYTHING))
    assert "BEHIND" in restricted and "(1 added note(s)" in restricted
    assert "BEHIND" in everything and "(2 added note(s)" in everything and "5 note(s) searchable" in everything


def test_a_hidden_change_alone_leaves_a_restricted_server_up_to_date(vault):
    build_index(vault)
    (vault / "private" / "secret.md").write_text(
        note("Secret plans", "Rewritten.", classification="restricted"), encoding="utf-8"
    )
    _, restricted = _initialize(_tools(vault))
    assert "up to date" in restricted and "BEHIND" not in restricted


def test_the_stdio_server_reports_its_version_and_state(vault):
    build_index(vault)
    session = StdioSession([str(vault)])
    try:
        assert session.server_info.version == version("vaultsearch")
        assert "3 note(s) searchable" in (session.instructions or "")
    finally:
        session.close()


def test_the_freshness_line_says_how_far_behind_and_how_sure() -> None:
    from core.serve.instructions import _freshness_line

    git = {"checked": True, "stale": True, "commits_since": 3, "added": 1, "modified": 2, "removed": 0}
    assert "(3 commit(s) and 1 added, 2 modified note(s) since it was built)" in _freshness_line(git, "V")
    by_stat = {"checked": True, "stale": True, "modified": 4, "modified_unverified": 4}
    assert "4 of the modified seen by file stat only" in _freshness_line(by_stat, "V")
    unchecked = {"checked": False, "reason": "vault_too_large", "stale": None}
    assert "not checked (vault_too_large)" in _freshness_line(unchecked, "V")
    failed = {"checked": True, "stale": False, "last_build_failure": {"reason": "build_io_failed"}}
    assert "up to date" in _freshness_line(failed, "V") and "build_io_failed" in _freshness_line(failed, "V")
