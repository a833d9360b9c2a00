"""The CLI's git source: ``index --source git [--rev]``, ``status`` with the watermark and the
uncommitted count, ``--date-field git_date``, ``--age-decay``, and the exit codes of its errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.cli import main
from tests.gitrepo import DAY, T0, commit, init
from tests.gitrepo import git as run_git

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="needs the git executable")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init(tmp_path / "repo")
    commit(root, {"a.md": "# A\n\nharbour\n"}, T0)
    commit(root, {"b.md": "# B\n\nharbour\n"}, T0 + DAY)
    return root


def test_index_status_and_search_from_git(capsys, repo: Path) -> None:
    code, out, _ = run(capsys, "index", str(repo), "--source", "git", "--rev", "main", "--json")
    assert code == 0 and json.loads(out)["notes"] == 2
    (repo / "c.md").write_text("# C\n\nharbour\n")
    code, out, _ = run(capsys, "status", str(repo), "--json", "--check")
    status = json.loads(out)
    assert code == 0 and status["uncommitted"] == 1 and status["source"] == "git"
    assert status["staleness"]["git"]["watermark"] == run_git(repo, "rev-parse", "main")
    code, out, _ = run(capsys, "status", str(repo))
    assert "not indexed (uncommitted): 1" in out and "watermark" in out
    code, out, _ = run(
        capsys, "search", str(repo), "harbour", "--date-field", "git_date", "--since", "2020-09-14", "--json"
    )
    assert [r["rel_path"] for r in json.loads(out)["results"]] == ["b.md"]
    code, out, _ = run(capsys, "search", str(repo), "harbour", "--age-decay", "--json")
    assert code == 0 and len(json.loads(out)["results"]) == 2
    commit(repo, {"c.md": None, "d.md": "# D\n"}, T0 + 2 * DAY)
    code, out, _ = run(capsys, "status", str(repo), "--json", "--check")
    assert code == 8 and json.loads(out)["staleness"]["git"]["commits_since"] == 1


def test_git_errors_exit_with_usage_codes(capsys, repo: Path, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    code, _, err = run(capsys, "index", str(tmp_path / "plain"), "--source", "git", "--json")
    assert code == 2 and json.loads(err)["reason"] == "not_a_git_repo"
    code, _, err = run(capsys, "index", str(repo), "--source", "git", "--rev", "nope", "--json")
    assert code == 2 and json.loads(err)["reason"] == "git_revision_unknown"
