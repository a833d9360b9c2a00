"""Every git call goes through one runner that never executes a command the repository configures
(``core.vault.gitsource.git_command``): a repository whose configuration names, for each setting
that can make git run something, a command writing a marker file is built, checked and searched,
and no marker appears. A control run of plain git with the same repository shows the settings are
live (the markers do appear there). And ``status`` of a git vault whose ``.vaultsearchignore`` is a
FIFO answers with a typed problem instead of blocking."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.errors import GitCommandError
from core.index.gitstatus import git_freshness
from core.index.status import index_status
from core.searcher import search_vault
from core.vault.gitrun import BlobRef
from tests.gitrepo import DAY, T0, commit, init
from tests.gitrepo import git as run

pytestmark = pytest.mark.skipif(not __import__("shutil").which("git"), reason="needs the git executable")


def _script(bin_dir: Path, markers: Path, name: str, tail: str = "") -> str:
    """An executable that writes ``markers/name`` (then runs ``tail``, e.g. ``cat`` for a filter)."""
    path = bin_dir / f"{name}.sh"
    path.write_text(f"#!/bin/sh\ntouch '{markers / name}'\n{tail}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _signed_head(repo: Path) -> None:
    """Make HEAD a commit carrying a (fake) PGP signature: ``log`` with ``log.showSignature`` runs gpg on it."""
    body = run(repo, "cat-file", "commit", "HEAD") + "\n"
    head, _, message = body.partition("\n\n")
    sig = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----"
    raw = f"{head}\n{sig}\n\n{message}".encode()
    done = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "-t", "commit", "--stdin"], input=raw, capture_output=True
    )
    run(repo, "update-ref", "HEAD", done.stdout.decode().strip())


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose configuration runs a marker command through every setting in ``SETTINGS``."""
    markers, bin_dir = tmp_path / "markers", tmp_path / "bin"
    markers.mkdir()
    bin_dir.mkdir()
    repo = init(tmp_path / "repo")
    commit(repo, {".gitattributes": "*.md filter=evil diff=evil\n", "a.md": "# A\n\nharbour\n"}, T0)
    commit(repo, {"b.md": "# B\n\nharbour too\n", "a.md": "# A\n\nharbour two\n"}, T0 + DAY)
    _signed_head(repo)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("b.md filter=evilinfo\n")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction", "fsmonitor-watchman"):
        _script(hooks, markers, "hooks")
        (hooks / hook).symlink_to(bin_dir / "hooks.sh")
    config = {
        "core.fsmonitor": _script(bin_dir, markers, "fsmonitor"),
        "filter.evil.clean": _script(bin_dir, markers, "filter_clean", "cat"),
        "filter.evil.smudge": _script(bin_dir, markers, "filter_clean", "cat"),
        "filter.evil.required": "true",
        "filter.evilinfo.clean": _script(bin_dir, markers, "filter_info", "cat"),
        "diff.evil.textconv": _script(bin_dir, markers, "textconv", 'cat "$1"'),
        "diff.external": _script(bin_dir, markers, "external"),
        "core.pager": _script(bin_dir, markers, "pager", "cat"),
        "pager.status": "true",
        "log.showSignature": "true",
        "gpg.program": _script(bin_dir, markers, "gpg"),
        "core.hooksPath": str(hooks),
        "alias.status": "!" + _script(bin_dir, markers, "alias"),
    }
    for key, value in config.items():
        run(repo, "config", key, value)
    return repo, markers


def _touch_notes(repo: Path) -> None:
    """New mtimes, same content: ``status`` must compare contents, the moment a clean filter runs."""
    for name in ("a.md", "b.md"):
        os.utime(repo / name, ns=(T0 * 10**9, (T0 + 5 * DAY) * 10**9))


def test_plain_git_runs_the_configured_commands_control(hostile: tuple[Path, Path]) -> None:
    repo, markers = hostile
    _touch_notes(repo)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["status"], ["log", "-p", "-2"], ["log", "-1", "--ext-diff", "-p"]):
        subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env)
    fired = {p.name for p in markers.iterdir()}
    assert {"fsmonitor", "filter_clean", "filter_info", "textconv", "external", "gpg"} <= fired


def test_no_git_call_runs_a_command_the_repository_configures(hostile: tuple[Path, Path]) -> None:
    repo, markers = hostile
    _touch_notes(repo)
    report = build_index(repo, source="git")
    assert report.notes == 2
    commit(repo, {"d.md": "# D\n\nharbour three\n"}, T0 + 2 * DAY)  # plain git: its hooks and filters run
    for marker in markers.iterdir():
        marker.unlink()
    (repo / "c.md").write_text("# C\n\nuncommitted harbour\n")
    _touch_notes(repo)
    status = index_status(repo)
    assert status["staleness"]["stale"] is True and status["staleness"]["git"]["uncommitted"] >= 1
    fresh = git_freshness(repo)
    assert fresh is not None and fresh["commits_since"] == 1
    assert [r.rel_path for r in search_vault(repo, "harbour", mode="fts")]
    build_index(repo, source="git")  # incremental: diff-tree, log since the base, cat-file
    assert sorted(p.name for p in markers.iterdir()) == []


def test_status_of_a_git_vault_with_a_fifo_ignore_file_reports_it_and_never_blocks(tmp_path: Path) -> None:
    repo = init(tmp_path / "repo")
    commit(repo, {"a.md": "# A\n\nharbour\n"}, T0)
    build_index(repo, source="git")
    os.mkfifo(repo / ".vaultsearchignore")
    (repo / "new.md").write_text("# New\n")
    found: list[dict] = []
    worker = threading.Thread(target=lambda: found.append(index_status(repo)), daemon=True)
    worker.start()
    worker.join(60)  # a guard against a hang (blocked forever on the FIFO before the fix), not a speed bound
    if not found:
        os.close(os.open(repo / ".vaultsearchignore", os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader
    assert found, "status blocked on the FIFO"
    status = found[0]
    git = status["staleness"]["git"]
    assert git["uncommitted_paths"] == ["new.md"]
    assert [(p["path"], p["reason"]) for p in git["problems"]] == [(".vaultsearchignore", "not_regular_file")]


def test_a_missing_blob_of_a_partial_clone_is_an_error_never_a_fetch(tmp_path: Path) -> None:
    """A promisor remote would be asked for a missing blob through the configured ssh command."""
    markers, bin_dir = tmp_path / "markers", tmp_path / "bin"
    markers.mkdir()
    bin_dir.mkdir()
    repo = init(tmp_path / "repo")
    commit(repo, {"a.md": "# A\n\nharbour\n"}, T0)
    blob = run(repo, "rev-parse", "HEAD:a.md")
    for key, value in {
        "core.repositoryformatversion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.url": "ssh://example.invalid/vault",
        "remote.origin.promisor": "true",
        "core.sshCommand": _script(bin_dir, markers, "ssh", "exit 1"),
    }.items():
        run(repo, "config", key, value)
    os.unlink(repo / ".git" / "objects" / blob[:2] / blob[2:])
    report = build_index(repo, source="git")
    assert [(p["path"], p["reason"]) for p in report.problems] == [("a.md", "git_blob_missing")]
    with pytest.raises(GitCommandError) as exc:
        BlobRef(repo, blob).load()
    assert exc.value.reason == "git_command_failed"
    assert list(markers.iterdir()) == []
    subprocess.run(["git", "-C", str(repo), "cat-file", "-p", blob], capture_output=True)  # control: plain git
    assert [p.name for p in markers.iterdir()] == ["ssh"]


def test_a_config_include_that_never_ends_fails_the_git_build_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``include.path`` naming a FIFO makes git block forever reading its configuration: the call is
    stopped after ``GIT_TIMEOUT_SECONDS`` and the build fails with a typed error saying so."""
    from core.vault import gitrun

    repo = init(tmp_path / "repo")
    commit(repo, {"a.md": "# A\n"}, T0)
    fifo = repo / ".git" / "endless"
    os.mkfifo(fifo)
    run(repo, "config", "include.path", str(fifo))
    monkeypatch.setattr(gitrun, "GIT_TIMEOUT_SECONDS", 1.0)
    with pytest.raises(GitCommandError) as exc:
        build_index(repo, source="git")
    assert "did not end within 1 s" in str(exc.value) and exc.value.reason == "git_command_failed"


def test_a_process_that_read_a_blob_leaves_no_cat_file_running_at_exit(tmp_path: Path) -> None:
    """A blob read outside a finished build (a build that failed half-way, a direct read) kept its
    ``git cat-file --batch`` process and pipes open until the interpreter died: "subprocess is still
    running" and unclosed pipes at exit (seen in CI's output). They are closed at exit now."""
    repo = init(tmp_path / "repo")
    commit(repo, {"a.md": "# A\n"}, T0)
    blob = run(repo, "rev-parse", "HEAD:a.md")
    code = f"from core.vault.gitrun import BlobRef\nassert BlobRef({str(repo)!r}, {blob!r}).load()[0] == b'# A\\n'\n"
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr
