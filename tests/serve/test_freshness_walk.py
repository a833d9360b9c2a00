"""The freshness walk lists exactly what the scanner lists: the same rules (dot paths, the ignore
file, the index dir, symlinks in and out, cycles, special files, the size limit), inlined for speed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.index.freshness_walk import _fast_walk, _Known
from core.vault.scan import scan_vault
from tests.conftest import note, write_vault


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    root = write_vault(
        tmp_path / "v",
        {
            "a.md": note("A", "a"),
            "UPPER.MD": note("Upper", "u"),
            "deep/x/y/z.md": note("Z", "z"),
            "deep/notes.txt": "not a note",
            ".hidden/h.md": note("H", "h"),
            ".dot.md": note("Dot", "d"),
            ".obsidian/o.md": note("O", "o"),
            ".git/g.md": note("G", "g"),
            ".trash/t.md": note("T", "t"),
            "ignored/i.md": note("I", "i"),
            "keep/scratch.md": note("S", "s"),
            "keep/real.md": note("R", "r"),
            "big.md": "x" * 5000,
            ".vaultsearchignore": "ignored/\nscratch.md\n",
            ".vaultsearch/inside.md": note("Index dir", "never a note"),
        },
    )
    outside = write_vault(tmp_path / "outside", {"out.md": note("Out", "o"), "dir/o2.md": note("O2", "o")})
    (root / "link-in.md").symlink_to(root / "a.md")
    (root / "link-out.md").symlink_to(outside / "out.md")
    (root / "dir-out").symlink_to(outside / "dir")
    (root / "deep/x/loop").symlink_to(root / "deep")  # a cycle: walked once
    (root / "alias").symlink_to(root / "keep")  # a second way into one folder: walked once
    (root / "broken.md").symlink_to(root / "nowhere.md")
    (root / "linked-ignored.md").symlink_to(root / "ignored/i.md")
    os.mkfifo(root / "fifo.md")
    return root


@pytest.mark.parametrize("dots", [False, True])
@pytest.mark.parametrize("max_bytes", [1 << 20, 1000])
def test_the_fast_walk_lists_what_scan_vault_lists(hostile: Path, dots: bool, max_bytes: int):
    index_dir = hostile / ".vaultsearch"
    scan = scan_vault(hostile, index_dir=index_dir, max_bytes=max_bytes, include_dot_paths=dots)
    added, changed, seen, _ = _fast_walk(hostile, index_dir, _Known({}, max_bytes, dots), max_bytes, None)
    assert sorted(seen) == [f.rel_path for f in scan.files]
    assert sorted(added) == sorted(seen) and changed == []  # nothing was indexed: all of it is new


def test_the_fast_walk_compares_stat_with_the_rows(hostile: Path):
    index_dir = hostile / ".vaultsearch"
    files = {f.rel_path: f for f in scan_vault(hostile, index_dir=index_dir).files}
    rows = {rel: (f.mtime_ns, f.size) for rel, f in files.items()}
    rows["a.md"] = (files["a.md"].mtime_ns + 1, files["a.md"].size)
    rows["gone.md"] = (1, 1)
    added, changed, seen, _ = _fast_walk(hostile, index_dir, _Known(rows, None, False), 1 << 20, None)
    assert added == [] and [rel for rel, _ in changed] == ["a.md"]
    assert "gone.md" not in seen and len(seen) == len(files)
