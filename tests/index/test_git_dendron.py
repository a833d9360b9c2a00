"""``--source git`` on a git copy of the Dendron vault with a synthetic history of 200 commits
(``bench.bench_git.make_repo``: one fast-import stream): every note's git dates are what the
history says, and an incremental build after a commit equals a cold build of the same commit."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from bench.bench_git import commit_change, make_repo
from core.build.builder import build_index
from core.vault.gitsource import iso_utc
from tests.index.test_git_build import active, dates
from tests.index.test_incremental import _comparable
from tests.paths import DENDRON

pytestmark = [
    pytest.mark.skipif(not shutil.which("git") or not DENDRON.is_dir(), reason="needs git and the Dendron corpus"),
    pytest.mark.slow,
]


def test_dendron_with_200_commits(tmp_path: Path) -> None:
    repo = tmp_path / "dendron"
    made = make_repo(repo, 200, source=DENDRON)
    first = build_index(repo, source="git")
    assert first.notes == made["notes"] == 1012 and first.problems == []
    expected = {rel: (iso_utc(last), iso_utc(added)) for rel, (last, added) in made["dates"].items()}
    assert dates(repo) == expected
    touched = commit_change(repo, 0.05)
    (repo / random.Random(3).choice(sorted(made["dates"]))).write_text("# uncommitted edit\n")
    report = build_index(repo)
    assert (report.changed, report.reused) == (touched, made["notes"] - touched)
    cold = tmp_path / "cold"
    build_index(repo, index_dir=cold, source="git")
    assert _comparable(active(repo)) == _comparable(active(repo, cold))
    assert dates(repo) == dates(repo, cold)
