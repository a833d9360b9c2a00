"""Issue 11, "the vault is destroyed or confused": the index directory is ours alone.

Every case builds a real vault in tmp_path and runs the real builder / CLI on it: a refused
index dir raises a typed usage error (exit 2) before anything is created, written or deleted,
and the user's files are byte-for-byte what they were. Only names from ``core.errors`` that
predate the fix are imported, so that each test fails (rather than errors) on the old code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import write_files

from core import generations as gen
from core.build.builder import build_index
from core.cli import main
from core.errors import UsageError
from core.index import parts
from core.searcher import search_vault

NOTE = "---\ntitle: {title}\n---\n# {title}\n\nquasar body of {title}\n"
MARKER = "vaultsearch-index.json"


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (rel path -> bytes), to prove nothing changed."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A vault whose note folders are named like the index's own folders."""
    return write_files(
        tmp_path / "vault",
        {
            "top.md": NOTE.format(title="top"),
            "staging/draft.md": NOTE.format(title="draft"),
            "generations/family.md": NOTE.format(title="family"),
            "projects/plan.md": NOTE.format(title="plan"),
        },
    )


def refused(vault: Path, index_dir: Path, reason: str) -> None:
    before = snapshot(vault)
    with pytest.raises(UsageError) as info:
        build_index(vault, index_dir=index_dir)
    assert info.value.reason == reason and info.value.exit_code == 2
    assert snapshot(vault) == before  # nothing deleted, nothing written (no .gitignore, no state)


def test_index_dir_vault_deletes_no_notes_and_writes_no_gitignore(vault: Path) -> None:
    refused(vault, vault, "index_dir_is_vault")
    assert not (vault / ".gitignore").exists()


def test_index_dir_vault_through_the_cli_exits_2(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(vault)
    assert main(["index", str(vault), "--index-dir", str(vault), "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["reason"] == "index_dir_is_vault"
    assert snapshot(vault) == before


def test_index_dir_that_contains_the_vault_is_refused(vault: Path) -> None:
    before = snapshot(vault.parent)
    with pytest.raises(UsageError) as info:
        build_index(vault, index_dir=vault.parent)
    assert info.value.reason == "index_dir_is_vault"
    assert snapshot(vault.parent) == before


def test_root_as_index_dir_is_refused_before_anything_is_written(vault: Path) -> None:
    before = sorted(os.listdir("/"))
    with pytest.raises(UsageError) as info:
        build_index(vault, index_dir=Path("/"))
    assert info.value.reason == "index_dir_is_vault"  # "/" contains every vault
    assert sorted(os.listdir("/")) == before


def test_a_foreign_folder_with_staging_and_generations_files_is_not_reaped(vault: Path, tmp_path: Path) -> None:
    foreign = write_files(
        tmp_path / "photos",
        {"staging/holiday.jpg": "jpeg", "generations/tree.pdf": "pdf", "readme.txt": "mine"},
    )
    before = snapshot(foreign)
    with pytest.raises(UsageError) as info:
        build_index(vault, index_dir=foreign)
    assert info.value.reason == "index_dir_not_ours"
    assert snapshot(foreign) == before and not (foreign / ".gitignore").exists()


def test_index_dir_on_a_note_folder_is_refused_not_silently_dropped(vault: Path) -> None:
    refused(vault, vault / "projects", "index_dir_holds_notes")


def test_index_dir_inside_a_note_folder_is_refused(vault: Path) -> None:
    refused(vault, vault / "projects" / "index", "index_dir_holds_notes")
    assert not (vault / "projects" / "index").exists()


def test_notes_put_into_our_index_dir_later_are_refused_not_dropped(vault: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "idx"
    build_index(vault, index_dir=index_dir)
    (index_dir / "lost.md").write_text(NOTE.format(title="lost"))
    with pytest.raises(UsageError) as info:
        build_index(vault, index_dir=index_dir)
    assert info.value.reason == "index_dir_holds_notes"
    assert (index_dir / "lost.md").exists()


@pytest.mark.parametrize("kind", ["file", "dev_null", "proc_self", "under_a_file"])
def test_index_dir_that_is_no_folder_of_ours_is_a_usage_error(vault: Path, tmp_path: Path, kind: str) -> None:
    target = {
        "file": tmp_path / "plain.txt",
        "dev_null": Path("/dev/null"),
        "proc_self": Path("/proc/self"),
        "under_a_file": tmp_path / "plain.txt" / "sub",
    }[kind]
    (tmp_path / "plain.txt").write_text("user data\n")
    with pytest.raises(UsageError) as info:
        build_index(vault, index_dir=target)
    assert info.value.reason in {"index_dir_not_directory", "index_dir_not_ours"}
    assert (tmp_path / "plain.txt").read_text() == "user data\n"


@pytest.mark.parametrize("command", ["index", "search", "status", "verify"])
@pytest.mark.parametrize("target", ["/dev/null", "/proc/self", "file"])
def test_every_command_gives_exit_2_for_an_index_dir_that_is_no_folder(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, target: str
) -> None:
    if target == "file":
        target = str(write_files(tmp_path, {"plain.txt": "x"}) / "plain.txt")
    argv = [command, str(vault), *(["quasar"] if command == "search" else []), "--index-dir", target, "--json"]
    code = main(argv)
    reason = json.loads(capsys.readouterr().err)["reason"]
    if target == "/proc/self" and command != "index":  # a folder, only not ours: reading it finds no index
        assert (code, reason) == (3, "index_missing")
    else:
        assert code == 2 and reason in {"index_dir_not_directory", "index_dir_not_ours"}


def test_a_new_index_dir_is_created_and_marked(vault: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "new" / "idx"
    report = build_index(vault, index_dir=index_dir)
    marker = json.loads((index_dir / MARKER).read_text())
    assert marker == {"format": "vaultsearch-index", "version": 1}
    assert (index_dir / ".gitignore").read_text() == "*\n"
    assert report.notes == 4
    assert len(search_vault(vault, "quasar", index_dir=index_dir)) == 4


def test_an_empty_folder_is_claimed(vault: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "empty"
    index_dir.mkdir()
    build_index(vault, index_dir=index_dir)
    assert (index_dir / MARKER).is_file()


def test_an_index_built_before_the_marker_is_adopted(vault: Path) -> None:
    build_index(vault)
    layout = gen.layout_for(vault)
    (layout.index_dir / MARKER).unlink()  # what an index of an older vaultsearch looks like
    (vault / "new.md").write_text(NOTE.format(title="new"))
    assert build_index(vault).added == 1
    assert (layout.index_dir / MARKER).is_file()


def test_an_index_with_a_verification_record_is_adopted(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader leaves ``verified.json`` (and, if it died mid-write, a ``.verified-*.tmp``) beside state.db:
    both are ours, so a pre-marker index holding them is adopted, not refused."""
    build_index(vault)
    layout = gen.layout_for(vault)
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 0)  # the record is written even right after the build
    gen.clear_verify_cache()
    gen.resolve(layout)
    assert (layout.index_dir / "verified.json").is_file()
    (layout.index_dir / f".verified-{os.getpid()}-{'0' * 32}.tmp").write_text("{")
    (layout.index_dir / MARKER).unlink()
    (vault / "new.md").write_text(NOTE.format(title="new"))
    assert build_index(vault).added == 1
    assert (layout.index_dir / MARKER).is_file()


def test_a_marker_of_another_format_version_is_refused(vault: Path) -> None:
    build_index(vault)
    marker = gen.layout_for(vault).index_dir / MARKER
    marker.write_text(json.dumps({"format": "vaultsearch-index", "version": 99}))
    with pytest.raises(UsageError) as info:
        build_index(vault)
    assert info.value.reason == "index_dir_not_ours"


def test_a_users_file_in_our_staging_folder_survives_reaping(vault: Path) -> None:
    build_index(vault)
    layout = gen.layout_for(vault)
    mine = layout.staging_dir / "my-notes-backup.txt"
    mine.write_text("keep me")
    (vault / "new.md").write_text(NOTE.format(title="new"))
    build_index(vault)
    assert mine.read_text() == "keep me"


def test_retention_never_deletes_a_file_a_tampered_state_row_names(vault: Path, tmp_path: Path) -> None:
    """A state row whose file_name points out of generations/ does not make retention delete that file."""
    import sqlite3

    build_index(vault)
    layout = gen.layout_for(vault)
    victim = vault / "top.md"
    conn = sqlite3.connect(layout.state_path)
    conn.execute(
        "INSERT INTO generations SELECT 'g00000000T000000-000000000000', '../../top.md', sha256, size,"
        " source_snapshot_hash, notes, chunks, dense_chunks, chunker, tokenizer, dense_model, timings, problems,"
        " 0.0, 'ready', NULL FROM generations LIMIT 1"
    )
    conn.commit()
    conn.close()
    for i in range(3):  # enough builds for retention to reach the doctored row
        (vault / f"more{i}.md").write_text(NOTE.format(title=f"more{i}"))
        build_index(vault, keep=1)
    assert victim.read_text() == NOTE.format(title="top")
