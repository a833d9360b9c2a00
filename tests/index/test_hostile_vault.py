"""Issue 11: a generated hostile vault builds, with every problem reported (``@pytest.mark.slow``).

YAML bombs, ``!!python`` tags, huge and deep files, odd names, symlink loops, FIFOs,
binary and invalid UTF-8 notes, an out-of-vault symlink, and 30,000 tiny notes (enough for
the forked parse workers). The build must finish, publish one verified generation, list each
bad file with its path and reason, never construct a Python object from YAML, and never read
outside the vault.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write_files

from core import generations as gen
from core.build.builder import IndexConfig, build_index
from core.searcher import search_vault

pytestmark = pytest.mark.slow
TINY = 30_000


def hostile(root: Path, outside: Path, pwned: Path) -> dict[str, str]:
    """Write the hostile vault; return {rel_path: expected problem reason} for the files that must be reported."""
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    files: dict[str, str | bytes] = {
        "bomb.md": bomb + "---\n# Bomb\n\nhostileword bomb\n",
        "python.md": f"---\nx: !!python/object/apply:os.system ['touch {pwned}']\n---\n# Py\n\nhostileword py\n",
        "python2.md": "---\nx: !!python/name:os.system\n---\n# Py2\n\nhostileword\n",
        "deep.md": "---\nd: " + "[" * 5000 + "]" * 5000 + "\n---\n# Deep\n\nhostileword deep\n",
        "headings.md": "".join(f"{'#' * (1 + i % 6)} h{i}\n\nhostileword {i}\n" for i in range(3000)),
        "huge.md": "# Huge\n\n" + "hostileword " * 200_000,
        "binary.md": b"\x00\x01\x02\xff" * 1000,
        "latin1.md": "# Caf\xe9\n\nhostileword caf\xe9\n".encode("latin-1"),
        "empty.md": "",
        "unclosed.md": "---\ntitle: [unclosed\n# body\n\nhostileword\n",
        "odd name with spaces.md": "# Spaces\n\nhostileword\n",
        "-leading-dash.md": "# Dash\n\nhostileword\n",
        "ünïcödé/名前.md": "# Unicode\n\nhostileword\n",
        "UPPER.MD": "# Upper\n\nhostileword\n",
        "new\nline.md": "# Newline\n\nhostileword\n",
        "a" * 200 + ".md": "# Long\n\nhostileword\n",
        "nested/" + "/".join(f"d{i}" for i in range(40)) + "/deepest.md": "# Deepest\n\nhostileword\n",
    }
    files.update({f"tiny/{i // 1000:02d}/t{i:05d}.md": f"tiny {i}\n" for i in range(TINY)})
    write_files(root, files)
    os.symlink(root, root / "loop")  # a folder symlink back to the vault root
    os.symlink(root / "nested", root / "nested" / "d0" / "up")
    os.symlink(outside, root / "escape.md")
    os.symlink(root / "missing-target.md", root / "broken.md")
    os.mkfifo(root / "pipe.md")
    os.mkfifo(root / ".vaultsearchignore")
    return {
        "huge.md": "too_large",
        "binary.md": "binary",
        "escape.md": "symlink_outside_vault",
        "broken.md": "unreadable",
        "pipe.md": "not_regular_file",
        ".vaultsearchignore": "not_regular_file",
    }


def test_a_hostile_vault_builds_with_every_problem_reported(tmp_path: Path) -> None:
    outside = write_files(tmp_path / "outside", {"secret.md": "# Secret\n\noutsideword\n"}) / "secret.md"
    pwned = tmp_path / "pwned"
    vault = tmp_path / "vault"
    expected = hostile(vault, outside, pwned)
    report = build_index(vault, config=IndexConfig(max_note_bytes=1_000_000))
    reasons = {p["path"]: p["reason"] for p in report.problems}
    for path, reason in expected.items():
        assert reasons.get(path) == reason, (path, reasons.get(path))
    assert {"bomb.md", "python.md", "python2.md", "deep.md", "unclosed.md"} <= set(reasons)  # YAML problems
    assert not pwned.exists()  # no Python object was ever constructed
    assert report.notes >= TINY + 12
    gen.clear_verify_cache()
    assert gen.verify_full(gen.layout_for(vault))["generation_id"] == report.generation_id
    assert len(search_vault(vault, "hostileword", limit=50)) >= 10
    assert list(search_vault(vault, "outsideword")) == []
    assert [r.rel_path for r in search_vault(vault, "tiny 12345", mode="fts", limit=1)] == ["tiny/12/t12345.md"]
