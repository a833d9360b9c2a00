"""Git repositories made in the tests: commits with fixed dates, one helper per git verb used."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

DAY = 86_400
T0 = 1_600_000_000  # 2020-09-13T12:26:40Z


def git(repo: Path, *args: str, when: int | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{when} +0000"
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "Tester")
    git(path, "config", "commit.gpgsign", "false")
    return path


def write(repo: Path, files: Mapping[str, str | bytes | None]) -> None:
    """Write (text or bytes) or delete (None) files in the working tree."""
    for rel, content in files.items():
        path = repo / rel
        if content is None:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def commit(repo: Path, files: Mapping[str, str | bytes | None], when: int, message: str = "change") -> str:
    """Write the files, commit everything at ``when`` (epoch seconds), return the commit SHA."""
    write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message, when=when)
    return git(repo, "rev-parse", "HEAD")


def have_git() -> bool:
    return shutil.which("git") is not None
