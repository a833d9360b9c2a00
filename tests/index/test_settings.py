"""Index settings are stored in the index and reused; dot paths are ignored by default; a vault
that does not exist is a usage error and is never created; the build report shows what changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core import cli
from core import generations as gen
from core.build.builder import IndexConfig, build_index
from core.errors import VaultPathError
from core.index.tables.meta import get_meta
from core.render import format_build
from core.searcher import search_vault
from tests.conftest import write_vault

FILES = {
    "a.md": "Alpha note about lanterns. [[b]]\n",
    "b.md": "---\ntitle: [broken\n---\nBeta lantern.\n",
    ".github/fixture.md": "A lantern test fixture.\n",
    "sub/.hidden.md": "A hidden lantern draft.\n",
    ".obsidian/workspace.md": "lantern\n",
}


def meta_of(vault: Path) -> dict:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault.resolve())))
    try:
        return get_meta(conn)
    finally:
        conn.close()


def test_settings_are_stored_and_reused_until_changed(tmp_path, capsys):
    vault = write_vault(tmp_path / "v", FILES)
    tok = "unicode61 remove_diacritics 2"
    assert cli.main(["index", str(vault), "--tokenizer", tok, "--chunk-size", "300"]) == 0
    capsys.readouterr()
    assert cli.main(["index", str(vault)]) == 0  # a plain index keeps them: nothing to rebuild
    assert capsys.readouterr().out.startswith("up to date")
    assert meta_of(vault)["tokenizer"] == tok and meta_of(vault)["settings"]["chunk_size"] == 300
    assert cli.main(["index", str(vault), "--tokenizer", "porter unicode61 remove_diacritics 2"]) == 0
    out = capsys.readouterr().out
    assert "full rebuild, every note re-read: the index identity changed (tokenizer: 'unicode61" in out
    assert meta_of(vault)["settings"] == {**IndexConfig(chunk_size=300).settings()}
    report = build_index(vault, changes={"chunk_overlap": 10})
    assert report.full_rebuild_reason == "index_identity_changed" and "chunker" in report.full_rebuild_detail
    assert report.settings["chunk_size"] == 300 and report.settings["chunk_overlap"] == 10


def test_dot_paths_are_ignored_by_default_and_can_be_indexed(tmp_path):
    vault = write_vault(tmp_path / "v", FILES)
    build_index(vault)
    assert {r.rel_path for r in search_vault(vault, "lantern", mode="fts", limit=20)} == {"a.md", "b.md"}
    report = build_index(vault, changes={"include_dot_paths": True})
    assert report.full_rebuild_reason is None and report.added == 2  # incremental: ignore rules are no identity
    found = {r.rel_path for r in search_vault(vault, "lantern", mode="fts", limit=20)}
    assert found == {"a.md", "b.md", ".github/fixture.md", "sub/.hidden.md"}  # .obsidian stays out
    assert build_index(vault).up_to_date  # the setting is reused


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_vault_that_is_not_a_folder_is_a_usage_error_and_never_created(tmp_path, capsys, kind):
    path = tmp_path / "typo"
    if kind == "file":
        path.write_text("not a folder\n", encoding="utf-8")
    reason = "vault_missing" if kind == "missing" else "vault_not_directory"
    for command in (["index"], ["search", "q"], ["status"], ["verify"], ["show", "x.md"]):
        argv = [command[0], str(path), *command[1:]]
        assert cli.main(argv) == 2
        assert f"[{reason}]" in capsys.readouterr().err
    assert cli.main(["index", str(path), "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["reason"] == reason
    with pytest.raises(VaultPathError):
        build_index(path)
    assert path.is_file() if kind == "file" else not path.exists()


def test_the_build_report_shows_what_changed_and_the_right_link_count(tmp_path, capsys):
    vault = write_vault(tmp_path / "v", FILES)
    assert cli.main(["index", str(vault)]) == 0
    first = capsys.readouterr().out
    assert "2 added" in first and "1 links" in first and "1 problem(s)" in first and "yaml_invalid" in first
    assert cli.main(["index", str(vault)]) == 0
    again = capsys.readouterr().out
    assert again.startswith("up to date") and "1 links (0 unresolved)" in again and "1 problem(s)" in again
    assert "yaml_invalid" not in again  # nothing changed: the problem is counted, not reprinted
    (vault / "a.md").write_text("Alpha lantern, edited. [[b]] [[c]]\n", encoding="utf-8")
    assert cli.main(["index", str(vault)]) == 0
    edited = capsys.readouterr().out
    assert "0 added, 1 modified, 0 removed, 1 unchanged" in edited and "2 links (1 unresolved)" in edited
    assert "yaml_invalid" not in edited and "vaultsearch status VAULT lists every problem" in edited


def test_format_build_neutralises_control_characters_in_problem_details():
    report = {
        "up_to_date": False,
        "generation_id": "g1",
        "index_kind": "immutable_generation",
        "notes": 1,
        "chunks": 1,
        "added": 1,
        "changed": 1,
        "removed": 0,
        "reused": 0,
        "links": 0,
        "unresolved_links": 0,
        "seconds": 0.1,
        "problems": [{"path": "x\x1b[2J.md", "reason": "yaml_invalid", "detail": "bad \x1b]0;title\x07"}],
        "new_problems": [{"path": "x\x1b[2J.md", "reason": "yaml_invalid", "detail": "bad \x1b]0;title\x07"}],
    }
    text = format_build(report)
    assert "\x1b" not in text and "\x07" not in text and "x\\x1b[2J.md" in text


def test_a_touched_note_keeps_a_true_mtime(tmp_path):
    """mtime is a date field: a note touched without a content change gets its new mtime."""
    vault = write_vault(tmp_path / "v", {"a.md": "Lantern.\n"})
    old = 1_600_000_000
    os.utime(vault / "a.md", (old, old))
    build_index(vault)
    assert [r.rel_path for r in search_vault(vault, "lantern", mode="fts", date_field="mtime", until="2021-01-01")]
    new = 1_700_000_000
    os.utime(vault / "a.md", (new, new))
    report = build_index(vault)
    assert not report.up_to_date and report.changed == 0
    assert not search_vault(vault, "lantern", mode="fts", date_field="mtime", until="2021-01-01")
    (hit,) = search_vault(vault, "lantern", mode="fts", date_field="mtime", since="2023-11-14")
    assert hit.date_field == "mtime" and hit.date.startswith("2023-11-14")
    assert build_index(vault).up_to_date


def test_dendron_copy_settings_reuse_and_dot_folders(tmp_path, capsys):
    from tests.index.test_builder import copy_corpus, dendron_subset
    from tests.paths import DENDRON

    vault = copy_corpus(DENDRON, tmp_path / "dendron", dendron_subset())
    write_vault(vault, {".github/fixture.md": "Schema fixture.\n", ".obsidian/x.md": "schema\n"})
    assert cli.main(["index", str(vault), "--tokenizer", "unicode61 remove_diacritics 2"]) == 0
    assert cli.main(["index", str(vault)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("up to date")
    found = {r.rel_path for r in search_vault(vault, "schema", mode="fts", limit=100)}
    assert found and not any(p.startswith(".") for p in found)
    assert cli.main(["index", str(tmp_path / "dendron-typo")]) == 2 and not (tmp_path / "dendron-typo").exists()
