"""bench/bench_link_edit.py: the notes it picks (most backlinks from other notes, at most MAX_BACKLINKS) and
its four steps, which end with the vault's files as they began."""

from __future__ import annotations

from pathlib import Path

from conftest import write_files

from bench import bench_link_edit
from core.build.builder import build_index


def _vault(root: Path) -> Path:
    vault = root / "vault"
    write_files(
        vault,
        {
            "hub.md": "# Hub\n\n" + " ".join(f"[[n{i}]]" for i in range(5)) + " [[b]]\n",
            "b.md": "# B\n\n[[a]] [[a]]\n",
            "c.md": "# C\n\n[[a]] [[b]]\n",
            "a.md": "# A\n\nself [[a]]\n",
            **{f"n{i}.md": f"# N{i}\n\n[[a]]\n" for i in range(5)},
        },
    )
    return vault


def test_the_linked_notes_are_those_most_linked_from_other_notes_below_the_cap(tmp_path: Path, monkeypatch) -> None:
    vault = _vault(tmp_path)
    build_index(vault, index_dir=tmp_path / "index")
    # a: linked from b, c and n0..n4 (7 notes; its own link does not count); b: from hub and c
    assert bench_link_edit.linked_notes(tmp_path / "index", 2) == [("a.md", 7), ("b.md", 2)]
    monkeypatch.setattr(bench_link_edit, "MAX_BACKLINKS", 6)
    assert bench_link_edit.linked_notes(tmp_path / "index", 2)[0] == ("b.md", 2)


def test_the_four_steps_end_with_the_vault_as_it_began(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    before = {p.name: p.read_bytes() for p in vault.iterdir()}
    steps = bench_link_edit._steps(vault, "a.md", "b.md")
    assert [name for name, _ in steps] == ["delete_linked", "add_resolving", "rename_linked", "rename_back"]
    seen = []
    for _, change in steps:
        change()
        seen.append(sorted(p.name for p in vault.iterdir()))
    assert "a.md" not in seen[0] and "a.md" in seen[1]
    assert "b-moved.md" in seen[2] and "b.md" not in seen[2]
    assert {p.name: p.read_bytes() for p in vault.iterdir()} == before
