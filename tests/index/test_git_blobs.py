"""A ``--source git`` build reads its blobs one at a time, where they are parsed (``BlobRef`` through
one ``cat-file --batch`` stream per process), as the working tree's build reads its files: planning
holds no blob content beyond the small ones the listing read, the size limit holds on the stream,
and the build ends its stream (issue 28, case 14; bench/git_rss.py measures the peak RSS)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.gitbuild import GitSource
from core.errors import GitCommandError
from core.searcher import search_vault
from core.vault import gitrun
from core.vault import gitsource as git
from tests.gitrepo import T0, commit, init

pytestmark = pytest.mark.skipif(not __import__("shutil").which("git"), reason="needs the git executable")

BIG = "# Big\n\nharbour " + "tide " * 20_000 + "\n"  # ~100 KiB: read where parsed


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init(tmp_path / "repo")
    commit(root, {"big1.md": BIG, "big2.md": BIG.replace("Big", "Bigger"), "small.md": "# Small\n\nharbour\n"}, T0)
    return root


def test_planning_a_git_build_reads_no_large_blob(repo: Path) -> None:
    source = GitSource(repo, repo / ".vaultsearch", git.MAX_NOTE_BYTES, "HEAD")
    scan = source.scan()
    reads = {f.rel_path: (data, sha) for f, data, sha in source.read(scan.files, defer=True)}
    assert isinstance(reads["small.md"][0], bytes)  # read with the listing already (LFS pointer check)
    for rel in ("big1.md", "big2.md"):
        ref, sha = reads[rel]
        assert isinstance(ref, gitrun.BlobRef) and sha is None
        data, digest = ref.load()
        assert data == (repo / rel).read_bytes() and digest == hashlib.sha256(data).hexdigest()
    gitrun.close_streams(source.repo.vault)


def test_the_stream_keeps_the_size_limit(repo: Path) -> None:
    r = git.discover(repo)
    entry = next(e for e in git.list_tree(r, git.resolve(r).tree).entries if e.rel_path == "big1.md")
    with pytest.raises(GitCommandError) as exc:
        gitrun.BlobRef(r.vault, entry.blob, max_bytes=1024).load()
    assert exc.value.reason == "git_command_failed"
    gitrun.close_streams(r.vault)


def test_a_git_build_indexes_streamed_blobs_and_ends_its_stream(repo: Path) -> None:
    report = build_index(repo, source="git")
    assert report.notes == 3 and report.problems == []
    assert {r.rel_path for r in search_vault(repo, "harbour", mode="fts")} == {"big1.md", "big2.md", "small.md"}
    assert (os.getpid(), str(repo.resolve())) not in gitrun._STREAMS
