"""Git access of ``--source git`` on repositories made here: listing with the ignore rules, blobs
in one batch, the one-pass history (dates), tree diffs, and each documented edge case."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import GitRevisionError, NotAGitRepoError
from core.vault import gitsource as git
from tests.gitrepo import DAY, T0, commit, init
from tests.gitrepo import git as run

pytestmark = pytest.mark.skipif(not __import__("shutil").which("git"), reason="needs the git executable")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init(tmp_path / "repo")
    commit(root, {"a.md": "# A\n", "dir/b.md": "# B\n", "img.png": "x", ".obsidian/w.md": "# W\n"}, T0, "one")
    commit(root, {"a.md": "# A\n\nmore\n"}, T0 + DAY, "two")
    return root


def test_list_tree_applies_the_scan_rules_and_the_committed_ignore_file(repo: Path) -> None:
    commit(repo, {".vaultsearchignore": "dir/\n", "c.MD": "# C\n"}, T0 + 2 * DAY)
    (repo / ".vaultsearchignore").write_text("a.md\n")  # the working tree's copy does not count
    r = git.discover(repo)
    listing = git.list_tree(r, git.resolve(r, "HEAD").tree)
    assert [e.rel_path for e in listing.entries] == ["a.md", "c.MD"]
    assert listing.problems == []


def test_read_blobs_returns_every_blob_through_one_batch(repo: Path) -> None:
    r = git.discover(repo)
    entries = git.list_tree(r, git.resolve(r, "HEAD").tree).entries
    blobs = git.read_blobs(r, [e.blob for e in entries])
    assert {e.rel_path: blobs[e.blob] for e in entries} == {"a.md": b"# A\n\nmore\n", "dir/b.md": b"# B\n"}


def test_history_gives_last_change_and_last_add_per_path_in_one_pass(repo: Path) -> None:
    commit(repo, {"dir/b.md": None}, T0 + 3 * DAY)
    commit(repo, {"dir/b.md": "# B again\n"}, T0 + 4 * DAY)
    r = git.discover(repo)
    head = git.resolve(r, "HEAD").commit
    found = git.history(r, head)
    assert found["a.md"] == git.PathDates(T0 + DAY, T0)
    assert found["dir/b.md"] == git.PathDates(T0 + 4 * DAY, T0 + 4 * DAY)  # re-added: created anew
    since = git.history(r, head, since=run(repo, "rev-parse", "HEAD~2"))
    assert set(since) == {"dir/b.md"}


def test_a_vault_in_a_subfolder_sees_paths_relative_to_itself(tmp_path: Path) -> None:
    root = init(tmp_path / "repo")
    commit(root, {"notes/x.md": "# X\n", "other/y.md": "# Y\n"}, T0)
    r = git.discover(root / "notes")
    assert r.prefix == "notes/"
    assert [e.rel_path for e in git.list_tree(r, git.resolve(r, "HEAD").tree).entries] == ["x.md"]
    assert set(git.history(r, git.resolve(r, "HEAD").commit)) == {"x.md"}


def test_changed_paths_is_the_tree_diff(repo: Path) -> None:
    r = git.discover(repo)
    old = git.resolve(r, "HEAD").tree
    commit(repo, {"dir/b.md": "# B2\n", "new.md": "# N\n", "a.md": None}, T0 + 2 * DAY)
    new = git.resolve(r, "HEAD").tree
    assert git.changed_status(r, old, new) == {"a.md": "D", "dir/b.md": "M", "new.md": "A"}
    assert git.changed_paths(r, "0" * 40, new) is None  # a tree that is gone: compare contents instead


def test_not_a_repository_and_unknown_revisions_are_typed_errors(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(NotAGitRepoError) as exc:
        git.discover(tmp_path / "plain")
    assert exc.value.reason == "not_a_git_repo"
    r = git.discover(repo)
    for rev in ("nope", "--output=/tmp/x", "HEAD~5", ""):
        with pytest.raises(GitRevisionError) as err:
            git.resolve(r, rev)
        assert err.value.reason == "git_revision_unknown"


def test_submodules_symlinks_lfs_pointers_and_large_blobs_are_reported(tmp_path: Path, repo: Path) -> None:
    sub = init(tmp_path / "sub")
    commit(sub, {"s.md": "# S\n"}, T0)
    run(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "mod")
    (repo / "link.md").symlink_to("a.md")
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 12345\n"
    commit(repo, {"big.md": "x" * 2000, "lfs.md": pointer}, T0 + 2 * DAY)
    r = git.discover(repo)
    listing = git.list_tree(r, git.resolve(r, "HEAD").tree, max_bytes=1000)
    reasons = {p.path: p.reason for p in listing.problems}
    assert reasons == {"mod": "git_submodule_skipped", "link.md": "git_symlink_skipped", "big.md": "too_large"}
    lfs = next(e for e in listing.entries if e.rel_path == "lfs.md")
    assert git.is_lfs_pointer(git.read_blobs(r, [lfs.blob])[lfs.blob])


def test_uncommitted_counts_note_changes_only(repo: Path) -> None:
    (repo / "a.md").write_text("# A edited\n")
    (repo / "fresh.md").write_text("# F\n")
    (repo / "img.png").write_text("y")
    (repo / ".obsidian" / "w.md").write_text("# W2\n")
    r = git.discover(repo)
    assert git.uncommitted(r).paths == ["a.md", "fresh.md"]
    assert not (repo / ".git" / "index.lock").exists()


def test_the_history_pass_ignores_a_user_setting_that_hides_the_root_commit(repo: Path) -> None:
    run(repo, "config", "log.showRoot", "false")
    r = git.discover(repo)
    assert git.history(r, git.resolve(r, "HEAD").commit)["dir/b.md"] == git.PathDates(T0, T0)
