"""Provenance names the commit: the build report of ``--source git`` and every search's ``index``
(Python results and hits, CLI JSON, the MCP envelope) carry the watermark; a working-tree index
says None."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.searcher import search_vault
from tests.gitrepo import DAY, T0, commit, init
from tests.serve.serve_helpers import VAULTSEARCH, StdioSession

pytestmark = pytest.mark.skipif(not __import__("shutil").which("git"), reason="needs the git executable")


def test_every_surface_names_the_commit_a_git_index_was_built_from(tmp_path: Path) -> None:
    repo = init(tmp_path / "repo")
    first = commit(repo, {"a.md": "# A\n\nharbour\n"}, T0)
    assert build_index(repo, source="git").watermark == first
    head = commit(repo, {"b.md": "# B\n\nharbour too\n"}, T0 + DAY)
    done = subprocess.run([VAULTSEARCH, "index", str(repo), "--source", "git", "--json"], capture_output=True)
    assert done.returncode == 0 and json.loads(done.stdout)["watermark"] == head
    assert build_index(repo, source="git").watermark == head  # up to date: the same commit
    results = search_vault(repo, "harbour", mode="fts")
    assert results.index.watermark == head and {r.index_watermark for r in results} == {head}
    done = subprocess.run([VAULTSEARCH, "search", str(repo), "harbour", "--json"], capture_output=True)
    assert done.returncode == 0 and json.loads(done.stdout)["index"]["watermark"] == head
    session = StdioSession([str(repo)])
    try:
        assert session.call("search", {"q": "harbour", "mode": "fts"})["index"]["watermark"] == head
    finally:
        session.close()


def test_a_working_tree_index_has_no_watermark(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\nharbour\n", encoding="utf-8")
    assert build_index(vault).watermark is None
    results = search_vault(vault, "harbour", mode="fts")
    assert results.index.watermark is None and [r.index_watermark for r in results] == [None]
