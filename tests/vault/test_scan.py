"""core.vault.scan: which files a vault holds, ignore rules, symlinks, limits, problems."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from core.errors import UsageError
from core.vault.scan import MAX_NOTE_BYTES, ScanResult, read_file, scan_vault


def write(root: Path, rel: str, text: str = "# note\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def rels(result: ScanResult) -> list[str]:
    return [f.rel_path for f in result.files]


def problems(result: ScanResult) -> list[tuple[str, str]]:
    return sorted((p.path, p.reason) for p in result.problems)


def test_collects_markdown_sorted_with_stat(tmp_path):
    write(tmp_path, "b.md", "hello")
    write(tmp_path, "a/Z.MD")
    write(tmp_path, "a/deep/c.Md")
    write(tmp_path, "notes.txt")
    write(tmp_path, "a/image.png")
    (tmp_path / "folder.md").mkdir()  # a folder named like a note is walked, not listed
    write(tmp_path, "folder.md/inner.md")
    result = scan_vault(tmp_path)
    assert rels(result) == ["a/Z.MD", "a/deep/c.Md", "b.md", "folder.md/inner.md"]
    b = result.files[2]
    assert b.path == tmp_path / "b.md" and b.path.is_absolute()
    assert (b.size, b.mtime_ns) == (5, os.stat(tmp_path / "b.md").st_mtime_ns)
    assert result.problems == []


def test_skips_tool_folders_anywhere(tmp_path):
    for folder in (".git", ".obsidian", ".vaultsearch", ".trash", "sub/.git"):
        write(tmp_path, f"{folder}/x.md")
    write(tmp_path, ".github/kept.md")
    assert rels(scan_vault(tmp_path)) == []  # every dot-folder is skipped by default, as Obsidian does
    assert rels(scan_vault(tmp_path, include_dot_paths=True)) == [".github/kept.md"]


def test_skips_an_index_dir_inside_the_vault(tmp_path):
    write(tmp_path, "idx/generations/x.md")
    write(tmp_path, "note.md")
    assert rels(scan_vault(tmp_path, index_dir=tmp_path / "idx")) == ["note.md"]
    assert rels(scan_vault(tmp_path, index_dir=tmp_path.parent / "elsewhere")) == ["idx/generations/x.md", "note.md"]


def test_vaultsearchignore_gitignore_semantics(tmp_path):
    write(tmp_path, ".vaultsearchignore", "# comment\ndrafts/\n*.tmp.md\n/root-only.md\narchive/**\n!archive/keep.md\n")
    for rel in (
        "drafts/a.md",
        "sub/drafts/b.md",
        "x.tmp.md",
        "root-only.md",
        "sub/root-only.md",
        "archive/old.md",
        "note.md",
    ):
        write(tmp_path, rel)
    assert rels(scan_vault(tmp_path)) == ["note.md", "sub/root-only.md"]


def test_a_bad_ignore_line_is_reported_and_the_rest_still_applies(tmp_path):
    write(tmp_path, ".vaultsearchignore", "drafts/\n!\nsecret.md\n")
    write(tmp_path, "drafts/a.md")
    write(tmp_path, "secret.md")
    write(tmp_path, "note.md")
    result = scan_vault(tmp_path)
    assert rels(result) == ["note.md"]
    assert problems(result) == [(".vaultsearchignore", "ignore_file_invalid")]
    assert "line 2" in result.problems[0].detail


def test_an_undecodable_ignore_file_is_reported(tmp_path):
    (tmp_path / ".vaultsearchignore").write_bytes(b"drafts/\n\xff\xfe\n")
    write(tmp_path, "drafts/a.md")
    write(tmp_path, "note.md")
    result = scan_vault(tmp_path)
    assert rels(result) == ["note.md"]
    assert problems(result) == [(".vaultsearchignore", "ignore_file_invalid")]


def test_too_large_files_are_excluded_with_a_problem(tmp_path):
    write(tmp_path, "big.md", "x" * 101)
    write(tmp_path, "ok.md", "x" * 100)
    result = scan_vault(tmp_path, max_bytes=100)
    assert rels(result) == ["ok.md"]
    assert problems(result) == [("big.md", "too_large")]
    assert MAX_NOTE_BYTES == 16 * 1024 * 1024


def test_symlinks_inside_the_vault_are_followed(tmp_path):
    write(tmp_path, "real/a.md")
    (tmp_path / "linked-dir").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "linked.md").symlink_to(tmp_path / "real/a.md")
    result = scan_vault(tmp_path)
    # the folder is walked once: through whichever path reaches it first, never twice
    assert "linked.md" in rels(result)
    assert sum(r.endswith("/a.md") for r in rels(result)) == 1
    assert result.problems == []


def test_symlink_cycles_terminate(tmp_path):
    write(tmp_path, "a/note.md")
    (tmp_path / "a/loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "a/self").symlink_to(tmp_path / "a", target_is_directory=True)
    result = scan_vault(tmp_path)
    assert rels(result) == ["a/note.md"]
    assert result.problems == []


def test_symlinks_leaving_the_vault_are_not_followed(tmp_path):
    vault = tmp_path / "vault"
    outside = tmp_path / "outside"
    write(outside, "secret.md")
    write(vault, "note.md")
    (vault / "out-dir").symlink_to(outside, target_is_directory=True)
    (vault / "out.md").symlink_to(outside / "secret.md")
    (vault / "out.png").symlink_to(outside / "secret.md")  # not a note: not even reported
    result = scan_vault(vault)
    assert rels(result) == ["note.md"]
    assert problems(result) == [("out-dir", "symlink_outside_vault"), ("out.md", "symlink_outside_vault")]


def test_broken_symlink_is_unreadable(tmp_path):
    write(tmp_path, "note.md")
    (tmp_path / "gone.md").symlink_to(tmp_path / "missing.md")
    result = scan_vault(tmp_path)
    assert rels(result) == ["note.md"]
    assert problems(result) == [("gone.md", "unreadable")]


def test_missing_vault_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        scan_vault(tmp_path / "nope")
    write(tmp_path, "file.md")
    with pytest.raises(UsageError):
        scan_vault(tmp_path / "file.md")


def test_read_file_returns_bytes_and_sha256(tmp_path):
    path = write(tmp_path, "a.md", "héllo")
    data, digest = read_file(path)
    assert data == "héllo".encode()
    assert digest == hashlib.sha256(data).hexdigest()
    with pytest.raises(OSError):
        read_file(tmp_path / "missing.md")


def test_listing_errors_become_unreadable_problems(tmp_path, monkeypatch):
    """Same as above for any user (root ignores chmod): the OS refuses to list one folder."""
    write(tmp_path, "locked/a.md")
    write(tmp_path, "note.md")
    real_scandir = os.scandir

    def refusing_scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refusing_scandir)
    result = scan_vault(tmp_path)
    assert rels(result) == ["note.md"]
    assert problems(result) == [("locked", "unreadable")]
    assert "Permission denied" in result.problems[0].detail


def test_a_file_that_grew_after_its_fstat_is_read_whole(tmp_path, monkeypatch):
    """The read goes on to the file's end, not to the size fstat gave (a note being written)."""
    import core.vault.scan as scan

    text = "x" * 5000 + "end"
    path = write(tmp_path, "a.md", text)
    real_fstat = os.fstat

    def smaller(fd):
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 10, *st[7:]))  # st_size = 10

    monkeypatch.setattr(scan.os, "fstat", smaller)
    monkeypatch.setattr(scan, "_READ_BLOCK", 7)
    data, digest = read_file(path, root=str(tmp_path.resolve()))
    assert data == text.encode()
    assert digest == hashlib.sha256(data).hexdigest()
    assert read_file(write(tmp_path, "empty.md", ""))[0] == b""
