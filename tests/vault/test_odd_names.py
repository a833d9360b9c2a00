"""File names that are not valid UTF-8 (``caf\\xe9.md`` from an old archive): decoded losslessly,
reported as ``undecodable_name`` with the bytes escaped, and skipped, on every surface: the build
(working tree and git), status, freshness, the watcher, the MCP server (stdio, the SDK's client)
and the HTTP server with ``--watch``. None of them crashes, hangs or stops answering."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from core.build.builder import build_index
from core.build.watch import Watcher
from core.errors import InvalidArgumentError
from core.index.status import index_status
from core.searcher import search_vault
from core.vault.scan import escaped_path, scan_vault, undecodable
from tests.gitrepo import T0, have_git, init
from tests.gitrepo import git as run
from tests.serve.serve_helpers import VAULTSEARCH, HttpServer, StdioSession, wait_until

BAD_NOTE = b"caf\xe9.md"
BAD_DIR = b"archiv\xe9"
ESCAPED = {"caf\\xe9.md", "archiv\\xe9"}  # the paths problems show: each undecodable byte as \xNN
TOKEN = "odd-names-token"
OK_TEXT = "# Ok\n\nharbour, see [[cafe]]\n"


def _write(vault: Path, rel: bytes, text: str) -> None:
    path = os.path.join(os.fsencode(vault), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _odd_vault(vault: Path) -> Path:
    vault.mkdir(parents=True, exist_ok=True)
    (vault / "ok.md").write_text(OK_TEXT, encoding="utf-8")
    _write(vault, BAD_NOTE, "# Cafe\n\nharbour coffee\n")
    _write(vault, BAD_DIR + b"/inner.md", "# Inner\n\nharbour inner\n")
    return vault


def _odd_problems(problems: list[dict[str, str]]) -> set[str]:
    return {p["path"] for p in problems if p["reason"] == "undecodable_name"}


def test_names_are_decoded_losslessly_and_escaped_for_display() -> None:
    name = os.fsdecode(BAD_NOTE)
    assert undecodable(name) and not undecodable("café.md") and not undecodable("plain.md")
    assert os.fsencode(name) == BAD_NOTE and escaped_path(name) == "caf\\xe9.md"


def test_the_scan_reports_and_skips_an_undecodable_note_and_folder(tmp_path: Path) -> None:
    scan = scan_vault(_odd_vault(tmp_path / "v"))
    assert [f.rel_path for f in scan.files] == ["ok.md"]
    assert {(p.path, p.reason) for p in scan.problems} == {(e, "undecodable_name") for e in ESCAPED}


def test_a_working_tree_build_with_an_undecodable_name_succeeds_and_reports_it(tmp_path: Path) -> None:
    vault = _odd_vault(tmp_path / "v")
    report = build_index(vault)
    assert report.notes == 1 and _odd_problems(report.problems) == ESCAPED
    results = search_vault(vault, "harbour", mode="fts")
    assert [r.rel_path for r in results] == ["ok.md"] and results.freshness["stale"] is False
    status = index_status(vault)
    json.dumps(status, ensure_ascii=False).encode("utf-8")  # representable: no lone surrogate anywhere
    assert status["staleness"]["stale"] is False
    done = subprocess.run([VAULTSEARCH, "index", str(vault), "--json"], capture_output=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert _odd_problems(json.loads(done.stdout)["problems"]) == ESCAPED


@pytest.mark.skipif(not have_git(), reason="needs the git executable")
def test_a_git_build_with_an_undecodable_name_succeeds_and_reports_it(tmp_path: Path) -> None:
    repo = _odd_vault(init(tmp_path / "repo"))
    run(repo, "add", "-A")
    run(repo, "commit", "-q", "-m", "old archive", when=T0)
    report = build_index(repo, source="git")
    assert report.notes == 1 and _odd_problems(report.problems) == {"caf\\xe9.md", "archiv\\xe9/inner.md"}
    _write(repo, b"new\xff.md", "# New\n\nuncommitted harbour\n")  # untracked and undecodable
    status = index_status(repo)
    json.dumps(status, ensure_ascii=False).encode("utf-8")
    assert status["staleness"]["stale"] is False and status["staleness"]["git"]["uncommitted"] == 0
    done = subprocess.run([VAULTSEARCH, "index", str(repo), "--source", "git", "--json"], capture_output=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]


def test_the_watcher_survives_an_undecodable_name_and_keeps_building(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "ok.md").write_text(OK_TEXT, encoding="utf-8")
    watcher = Watcher(vault, debounce_ms=50, lock_wait=0.0)
    watcher.start()
    try:
        assert watcher.ready.wait(60)
        _write(vault, BAD_NOTE, "# Cafe\n\nharbour coffee\n")  # watchfiles loses the batch holding this name
        (vault / "later.md").write_text("# Later\n\nharbour quokka\n", encoding="utf-8")
        wait_until(lambda: [r.rel_path for r in search_vault(vault, "quokka", mode="fts")], what="the next build")
        assert watcher._thread is not None and watcher._thread.is_alive()
        wait_until(lambda: "caf\\xe9.md" in _odd_problems(index_status(vault)["problems"]), what="the problem")
        (vault / "later.md").write_text("# Later\n\nharbour wombat\n", encoding="utf-8")  # still watching
        wait_until(lambda: [r.rel_path for r in search_vault(vault, "wombat", mode="fts")], what="a later edit")
    finally:
        watcher.stop()


def test_the_mcp_server_answers_every_tool_with_an_undecodable_name_in_the_vault(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "ok.md").write_text(OK_TEXT, encoding="utf-8")
    build_index(vault)
    _odd_vault(vault)  # after the build: freshness walks past the undecodable names
    session = StdioSession([str(vault), "--freshness-window", "0"])
    try:
        env = session.call("search", {"q": "harbour", "mode": "fts"})
        assert [h["path"] for h in env["hits"]] == ["ok.md"] and env["freshness"]["stale"] is False
        assert session.call("status")["coverage"]["indexed_notes"] == 1
        assert "harbour" in session.call("read_note", {"path": "ok.md"})["text"]
        assert session.call("related", {"path": "ok.md"})["path"] == "ok.md"
        assert (
            session.call("modes")["modes"] and session.list_tools().tools
        )  # still answering (ping is gone from the SDK)
    finally:
        session.close()


def test_serve_watch_answers_200_with_an_undecodable_name_in_the_vault(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "ok.md").write_text(OK_TEXT, encoding="utf-8")
    server = HttpServer([str(vault), "--watch", "--debounce-ms", "50"], env={"VAULTSEARCH_TOKEN": TOKEN})
    try:
        with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as c:
            wait_until(lambda: c.get("/status").status_code == 200, what="the first watch build")
            _write(vault, BAD_NOTE, "# Cafe\n\nharbour coffee\n")
            (vault / "later.md").write_text("# Later\n\nharbour quokka\n", encoding="utf-8")
            found = lambda: [h["path"] for h in c.post("/search", json={"q": "quokka", "mode": "fts"}).json()["hits"]]  # noqa: E731
            wait_until(found, what="the watch build after the undecodable name")
            response = c.post("/search", json={"q": "harbour", "mode": "fts"})
            assert response.status_code == 200
            assert {h["path"] for h in response.json()["hits"]} == {"ok.md", "later.md"}
            status = c.get("/status")
            assert status.status_code == 200 and status.json()["coverage"]["indexed_notes"] == 2
    finally:
        server.close()


def test_a_vault_folder_whose_name_is_not_utf8_is_searched_directly_and_through_a_symlink(tmp_path: Path) -> None:
    """``/notes/caf\\xe9`` (an old archive's folder): the build and status worked, but search refused
    the path (``invalid_argument``), and through a symlink with a UTF-8 name it crashed building the
    hit's ``obsidian://`` link. The folder's own bytes are kept: percent-encoded in the link, and the
    JSON holds no lone surrogate."""
    from core import cli

    vault = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9")))
    vault.mkdir()
    (vault / "a.md").write_text("# A\nhello world\n")
    (tmp_path / "cafe").symlink_to(vault)
    build_index(vault)
    for path in (vault, tmp_path / "cafe"):
        hits = search_vault(path, "hello", 5, "fts")
        assert [h.rel_path for h in hits] == ["a.md"]
        assert hits[0].obsidian_uri == "obsidian://open?vault=caf%E9&file=a"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["search", str(path), "hello", "--json", "--mode", "fts"]) == 0
        json.loads(out.getvalue()).get("results")[0]["obsidian_uri"].encode("utf-8")  # no lone surrogate
    with pytest.raises(InvalidArgumentError):  # not a file system path at all
        search_vault(str(tmp_path / "bad\ud800"), "hello", 5)
