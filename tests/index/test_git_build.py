"""``--source git`` builds on repositories made here: what is indexed (committed blobs, never the
working tree), the watermark, incremental builds from the tree diff, git dates (commits, renames,
deletions, a merge), detached HEAD, a shallow clone, status and freshness, and the errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from core import generations as gen
from core.build.builder import build_index
from core.errors import GitRevisionError, NotAGitRepoError, UsageError
from core.index.gitstatus import git_freshness, watermark_current
from core.index.status import index_status
from core.index.tables.meta import get_meta
from core.searcher import search_vault
from core.vault.gitsource import iso_utc
from tests.gitrepo import DAY, T0, commit, init
from tests.gitrepo import git as run
from tests.index.test_incremental import _comparable, note_rows

pytestmark = pytest.mark.skipif(not __import__("shutil").which("git"), reason="needs the git executable")


def iso(ts: int) -> str:
    return iso_utc(ts)


def active(vault: Path, index_dir: Path | None = None) -> sqlite3.Connection:
    return gen.connect_readonly(gen.resolve(gen.layout_for(vault, index_dir)))


def dates(vault: Path, index_dir: Path | None = None) -> dict[str, tuple[str | None, str | None]]:
    conn = active(vault, index_dir)
    try:
        return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT rel_path, git_date, git_created FROM notes")}
    finally:
        conn.close()


def meta(vault: Path) -> dict:
    conn = active(vault)
    try:
        return get_meta(conn)
    finally:
        conn.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init(tmp_path / "repo")
    commit(root, {"alpha.md": "# Alpha\n\nalpha harbour\n", "dir/beta.md": "# Beta\n\nbeta harbour\n"}, T0, "one")
    commit(root, {"gamma.md": "# Gamma\n\ngamma harbour\n", "alpha.md": "# Alpha\n\nalpha harbour v2\n"}, T0 + DAY)
    return root


def test_the_index_is_the_commit_not_the_working_tree(repo: Path) -> None:
    (repo / "alpha.md").write_text("# Alpha\n\nhalfwritten\n")
    (repo / "draft.md").write_text("# Draft\n\nhalfwritten\n")
    report = build_index(repo, source="git")
    assert report.notes == 3 and report.problems == []
    assert [r.rel_path for r in search_vault(repo, "halfwritten")] == []
    assert {r.rel_path for r in search_vault(repo, "harbour")} == {"alpha.md", "dir/beta.md", "gamma.md"}
    m = meta(repo)
    assert m["source"] == "git" and m["git_rev"] == "HEAD"
    assert (m["git_commit"], m["git_tree"]) == (run(repo, "rev-parse", "HEAD"), run(repo, "rev-parse", "HEAD^{tree}"))
    status = index_status(repo)
    assert status["uncommitted"] == 2 and status["staleness"]["stale"] is False
    assert status["staleness"]["git"]["uncommitted_paths"] == ["alpha.md", "draft.md"]


def test_dates_are_the_last_and_the_first_commit_and_filterable(repo: Path) -> None:
    build_index(repo, source="git")
    assert dates(repo) == {
        "alpha.md": (iso(T0 + DAY), iso(T0)),
        "dir/beta.md": (iso(T0), iso(T0)),
        "gamma.md": (iso(T0 + DAY), iso(T0 + DAY)),
    }
    recent = search_vault(repo, "harbour", date_field="git_date", since=iso(T0 + DAY)[:10])
    assert {r.rel_path for r in recent} == {"alpha.md", "gamma.md"}
    old = search_vault(repo, "harbour", date_field="git_created", until=iso(T0)[:10])
    assert {r.rel_path for r in old} == {"alpha.md", "dir/beta.md"}
    hit_dates = next(r for r in recent if r.rel_path == "gamma.md").dates
    assert {k: v for k, v in hit_dates.items() if k != "mtime"} == {
        "git_date": iso(T0 + DAY),
        "git_created": iso(T0 + DAY),
    }


def test_an_up_to_date_index_is_known_from_the_watermark_alone(repo: Path) -> None:
    first = build_index(repo, source="git")
    assert watermark_current(repo) is True
    again = build_index(repo)  # the source is a stored setting
    assert again.up_to_date and again.generation_id == first.generation_id and again.timings == {}
    commit(repo, {"notes.txt": "not a note"}, T0 + 2 * DAY)
    assert watermark_current(repo) is False
    moved = build_index(repo)  # same vault tree, new commit: the watermark moves on
    assert not moved.up_to_date and moved.reused == 3 and moved.changed == 0
    assert meta(repo)["git_commit"] == run(repo, "rev-parse", "HEAD") and watermark_current(repo) is True


def test_an_incremental_build_reads_only_what_the_commit_changed(repo: Path, tmp_path: Path) -> None:
    build_index(repo, source="git")
    before = active(repo)
    kept = note_rows(before, "dir/beta.md")
    commit(repo, {"gamma.md": "# Gamma\n\ngamma harbour v3\n", "new.md": "# New\n"}, T0 + 2 * DAY)
    commit(repo, {"alpha.md": None}, T0 + 3 * DAY)
    report = build_index(repo)
    assert (report.reused, report.changed, report.added, report.removed) == (1, 2, 1, 1)
    assert report.full_rebuild_reason is None
    after = active(repo)
    assert note_rows(after, "dir/beta.md") == kept
    cold = tmp_path / "cold"
    build_index(repo, index_dir=cold, source="git")
    assert _comparable(after) == _comparable(active(repo, cold))
    assert dates(repo) == dates(repo, cold)


def test_renames_deletions_and_a_merge_date_like_a_full_history_pass(repo: Path, tmp_path: Path) -> None:
    build_index(repo, source="git")
    run(repo, "checkout", "-q", "-b", "side")
    commit(repo, {"dir/beta.md": "# Beta\n\nbeta on a branch\n"}, T0 + 2 * DAY, "side")
    run(repo, "checkout", "-q", "main")
    run(repo, "mv", "gamma.md", "dir/gamma.md")
    commit(repo, {"alpha.md": None}, T0 + 3 * DAY, "rename and delete")
    run(repo, "merge", "-q", "--no-edit", "side", when=T0 + 4 * DAY)
    report = build_index(repo)
    assert report.removed == 2 and report.added == 1
    found = dates(repo)
    assert found == {
        "dir/beta.md": (iso(T0 + 2 * DAY), iso(T0)),  # the branch commit, not the merge
        "dir/gamma.md": (iso(T0 + 3 * DAY), iso(T0 + 3 * DAY)),  # a rename is an add
    }
    build_index(repo, index_dir=tmp_path / "cold", source="git")
    assert dates(repo, tmp_path / "cold") == found


def test_a_detached_head_and_an_explicit_revision_are_indexed_as_commits(repo: Path) -> None:
    first = run(repo, "rev-parse", "HEAD~1")
    run(repo, "checkout", "-q", "--detach", first)
    build_index(repo, source="git")
    assert dates(repo).keys() == {"alpha.md", "dir/beta.md"} and meta(repo)["git_commit"] == first
    assert git_freshness(repo, meta(repo))["detached"] is True
    build_index(repo, source="git", rev="main")
    assert meta(repo)["git_rev"] == "main" and len(dates(repo)) == 3
    commit(repo, {"late.md": "# Late\n"}, T0 + 5 * DAY)  # a commit on the detached HEAD: main did not move
    assert build_index(repo).up_to_date


def test_a_shallow_clone_dates_from_the_history_it_has_and_says_so(repo: Path, tmp_path: Path) -> None:
    commit(repo, {"dir/beta.md": "# Beta\n\nlater\n"}, T0 + 2 * DAY)
    clone = tmp_path / "clone"
    run(tmp_path, "clone", "-q", "--depth", "1", repo.as_uri(), str(clone))
    report = build_index(clone, source="git")
    assert {(p["path"], p["reason"]) for p in report.problems} == {(".", "git_shallow_history")}
    assert dates(clone)["alpha.md"] == (iso(T0 + 2 * DAY), iso(T0 + 2 * DAY))  # the boundary commit adds all
    assert index_status(clone)["staleness"]["git"]["shallow"] is True


def test_status_counts_commits_since_the_watermark_and_never_calls_uncommitted_stale(repo: Path) -> None:
    build_index(repo, source="git")
    (repo / "gamma.md").write_text("# Gamma\n\nedited, not committed\n")
    assert index_status(repo)["staleness"]["stale"] is False
    commit(repo, {"dir/beta.md": "# Beta 2\n"}, T0 + 2 * DAY)
    commit(repo, {"zeta.md": "# Zeta\n"}, T0 + 3 * DAY)
    st = index_status(repo)["staleness"]
    assert st["stale"] is True and st["git"]["commits_since"] == 2
    assert (st["added"], st["modified"], st["removed"]) == (["zeta.md"], ["dir/beta.md", "gamma.md"], [])
    assert st["uncommitted"] == 0  # the commit took gamma.md's edit along


def test_switching_back_to_the_working_tree_drops_git_dates(repo: Path) -> None:
    build_index(repo, source="git")
    build_index(repo, source="worktree")
    assert set(dates(repo).values()) == {(None, None)} and meta(repo)["source"] == "worktree"
    assert "uncommitted" not in index_status(repo)


def test_errors_are_typed(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "n.md").write_text("# N\n")
    with pytest.raises(NotAGitRepoError):
        build_index(tmp_path / "plain", source="git")
    assert not (tmp_path / "plain" / ".vaultsearch").exists()
    with pytest.raises(GitRevisionError):
        build_index(repo, source="git", rev="no-such-branch")
    with pytest.raises(UsageError) as exc:
        build_index(repo, source="worktree", rev="HEAD")
    assert exc.value.reason == "usage"


def test_lfs_pointers_and_submodules_are_skipped_and_reported(repo: Path, tmp_path: Path) -> None:
    sub = init(tmp_path / "sub")
    commit(sub, {"s.md": "# S\n"}, T0)
    run(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "mod")
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "1" * 64 + "\nsize 99\n"
    commit(repo, {"lfs.md": pointer}, T0 + 2 * DAY)
    report = build_index(repo, source="git")
    assert {(p["path"], p["reason"]) for p in report.problems} == {
        ("mod", "git_submodule_skipped"),
        ("lfs.md", "git_lfs_pointer_skipped"),
    }
    assert "lfs.md" not in dates(repo)


def test_switching_a_working_tree_index_to_git_carries_identical_notes_over(repo: Path) -> None:
    (repo / "gamma.md").write_text("# Gamma\n\nnot committed\n")
    build_index(repo)  # indexes the working tree's gamma.md
    report = build_index(repo, source="git")
    assert (report.reused, report.changed) == (2, 1)  # gamma.md is read back from its committed blob
    assert meta(repo)["source"] == "git" and dates(repo)["gamma.md"] == (iso(T0 + DAY), iso(T0 + DAY))


def _add_fake_vectors(vault: Path) -> None:
    """Publish a copy of the active generation with a (fake) dense vector for every chunk."""
    import shutil as sh

    import numpy as np

    layout = gen.layout_for(vault)
    base = gen.resolve(layout)
    with gen.build_lock(layout):
        staged = gen.new_staging_path(layout)
        sh.copyfile(base.parts[0].path, staged)
        conn = sqlite3.connect(staged)
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks")]
        conn.executemany(
            "INSERT INTO chunk_vectors(chunk_id, vector) VALUES (?, ?)",
            [(i, np.full(4, i, dtype="<f4").tobytes()) for i in ids],
        )
        conn.execute("INSERT INTO meta(key, value) VALUES ('dense_model', '\"fake-model\"')")
        conn.commit()
        conn.close()
        record = gen.GenerationRecord(
            source_snapshot_hash=base.source_snapshot_hash or "",
            notes=base.record["notes"],
            chunks=len(ids),
            dense_chunks=len(ids),
            chunker=base.record["chunker"],
            tokenizer=base.record["tokenizer"],
            timings={},
            problems=[],
            dense_model="fake-model",
        )
        gen.publish(layout, staged, record, expected_base=base.generation_id)


def test_dense_vectors_of_notes_a_commit_did_not_touch_are_carried_over(repo: Path) -> None:
    build_index(repo, source="git")
    _add_fake_vectors(repo)
    before = active(repo)
    kept = {rel: note_rows(before, rel) for rel in ("alpha.md", "dir/beta.md")}
    assert all(rows["vectors"] for rows in kept.values())
    commit(repo, {"gamma.md": "# Gamma\n\nchanged\n"}, T0 + 2 * DAY)
    report = build_index(repo)
    assert (report.reused, report.changed) == (2, 1)
    after = active(repo)
    for rel, rows in kept.items():
        assert note_rows(after, rel) == rows, rel  # ids, rows, git dates and vectors all kept
    assert note_rows(after, "gamma.md")["vectors"] == []
    assert gen.verify_full(gen.layout_for(repo))


def test_git_freshness_reads_the_active_index_and_ignores_a_working_tree_index(repo: Path, tmp_path: Path) -> None:
    build_index(repo, source="git")
    commit(repo, {"omega.md": "# Omega\n"}, T0 + 2 * DAY)
    fresh = git_freshness(repo)
    assert fresh is not None and fresh["up_to_date"] is False and fresh["commits_since"] == 1
    assert fresh["changed"] == {"added": ["omega.md"], "modified": [], "removed": []}
    build_index(repo, index_dir=tmp_path / "wt", source="worktree")
    assert git_freshness(repo, index_dir=tmp_path / "wt") is None
    assert watermark_current(repo, tmp_path / "wt") is None


def test_the_in_place_layout_builds_from_git_too(repo: Path) -> None:
    first = build_index(repo, source="git", in_place=True)
    assert first.index_kind == "legacy_db" and first.notes == 3
    assert build_index(repo, in_place=True).up_to_date
    commit(repo, {"alpha.md": "# Alpha\n\nalpha harbour v3\n"}, T0 + 2 * DAY)
    report = build_index(repo, in_place=True)
    assert (report.reused, report.changed) == (2, 1)
    conn = sqlite3.connect(gen.layout_for(repo).legacy_path)
    try:
        row = conn.execute("SELECT git_date FROM notes WHERE rel_path = 'alpha.md'").fetchone()
        assert row == (iso(T0 + 2 * DAY),) and get_meta(conn)["git_commit"] == run(repo, "rev-parse", "HEAD")
    finally:
        conn.close()


def test_dot_paths_follow_the_working_tree_rule_in_a_git_tree(repo: Path) -> None:
    """Issue #16's default holds for the git source too: dot-files and dot-folders are not notes."""
    commit(
        repo, {".github/fixture.md": "# Fixture\n\nharbour\n", "sub/.draft.md": "# Draft\n\nharbour\n"}, T0 + 2 * DAY
    )
    build_index(repo, source="git")
    assert {r.rel_path for r in search_vault(repo, "harbour")} == {"alpha.md", "dir/beta.md", "gamma.md"}
    build_index(repo, changes={"include_dot_paths": True})
    found = {r.rel_path for r in search_vault(repo, "harbour")}
    assert {".github/fixture.md", "sub/.draft.md"} <= found
