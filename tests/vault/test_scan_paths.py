"""``rescan_paths``: a scan brought up to date at a few paths equals a walk of the vault, by the walk's rules,
or gives up (None) where only a walk can say."""

from __future__ import annotations

import os
from dataclasses import astuple
from pathlib import Path

import pytest

from core.vault.problems import Problem
from core.vault.scan import ScanResult, scan_vault
from core.vault.scan_paths import rescan_paths
from tests.conftest import write_files


def _walk(root: Path, index_dir: Path | None = None, **kw: object) -> ScanResult:
    return scan_vault(root, index_dir=index_dir, **kw)  # type: ignore[arg-type]


def _same(got: ScanResult | None, walked: ScanResult) -> None:
    assert got is not None
    assert got.files == walked.files
    assert sorted(map(astuple, got.problems)) == sorted(map(astuple, walked.problems))


@pytest.mark.parametrize("dots", [False, True])
def test_changed_paths_are_seen_as_the_walk_sees_them(tmp_path: Path, dots: bool) -> None:
    root = tmp_path / "v"
    write_files(
        root,
        {
            "a.md": "a",
            "keep/b.md": "b",
            "big.md": "x" * 50,
            ".vaultsearchignore": "drafts/\n*.tmp.md\n",
            ".idx/marker": "",
        },
    )
    index_dir = root / ".idx"
    before = _walk(root, index_dir, max_bytes=40, include_dot_paths=dots)
    write_files(
        root,
        {
            "keep/b.md": "b changed, longer",
            "new/deep/c.md": "c",
            "drafts/d.md": "ignored folder",
            "e.tmp.md": "ignored file",
            ".hidden/f.md": "a dot folder",
            ".obsidian/g.md": "never indexed",
            ".idx/h.md": "the index dir's own",
            "big.md": "small now",
            "huge.md": "y" * 99,
            "Upper.MD": "suffix in capitals",
            "notes.txt": "not a note",
        },
    )
    (root / "a.md").unlink()
    os.mkfifo(root / "pipe.md")
    paths = {
        "a.md", "keep/b.md", "new/deep/c.md", "drafts/d.md", "e.tmp.md", ".hidden/f.md", ".obsidian/g.md",
        ".idx/h.md", "big.md", "huge.md", "Upper.MD", "notes.txt", "pipe.md", "never/there.md",
    }  # fmt: skip
    got = rescan_paths(root, before, paths, index_dir=index_dir, max_bytes=40, include_dot_paths=dots)
    _same(got, _walk(root, index_dir, max_bytes=40, include_dot_paths=dots))


def test_paths_not_named_keep_what_the_previous_scan_listed(tmp_path: Path) -> None:
    root = write_files(tmp_path / "v", {"a.md": "a", "b.md": "b"})
    before = _walk(root)
    (root / "b.md").write_text("b, changed")
    got = rescan_paths(root, before, {"a.md"}, index_dir=None, max_bytes=1 << 20)
    assert got is not None and got.files == before.files, "only the paths named are looked at"


@pytest.mark.parametrize(
    "case",
    ["previous_met_a_link", "path_is_a_link", "folder_is_a_link", "folder_named_like_a_note", "unlisted_folder"],
)
def test_what_only_a_walk_can_say_gives_up(tmp_path: Path, case: str) -> None:
    root = write_files(tmp_path / "v", {"a.md": "a", "real/b.md": "b"})
    if case == "previous_met_a_link":
        (root / "l.md").symlink_to(root / "a.md")
        before, paths = _walk(root), {"a.md"}
    else:
        before = _walk(root)
        if case == "path_is_a_link":
            (root / "l.md").symlink_to(root / "a.md")
            paths = {"l.md"}
        elif case == "folder_is_a_link":
            (root / "linked").symlink_to(root / "real")
            paths = {"linked/b.md"}
        elif case == "folder_named_like_a_note":
            (root / "dir.md").mkdir()
            paths = {"dir.md"}
        else:  # a folder the walk could not list: what is under it is the next walk's to say
            before = ScanResult(before.files, [Problem("locked", "unreadable", "PermissionError")], False)
            paths = {"a.md"}
    assert rescan_paths(root, before, paths, index_dir=None, max_bytes=1 << 20) is None
