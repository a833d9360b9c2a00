"""Peak RSS of ``vaultsearch index`` from the working tree and from git (``--source git``) on the
same files: 40 notes of 12 MiB in one commit (binary content: read, hashed and skipped, so that
the figure is the cost of reading, not of indexing). Issue 28, case 14.

    PYTHONPATH=$PWD .venv/bin/python bench/git_rss.py /tmp/git-rss/repo worktree git

Each build runs in its own process; its peak RSS is the kernel's high-water mark (``wait4``).
The repository is made on the first run and reused.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

NOTES, SIZE = 40, 12 * 1024 * 1024


def make_repo(root: Path) -> None:
    root.mkdir(parents=True)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "bench@example.org")
    git("config", "user.name", "bench")
    rnd = random.Random(1)
    for i in range(NOTES):
        (root / f"n{i:02}.md").write_bytes(b"\0" + rnd.randbytes(SIZE - 1))
    git("add", "-A")
    git("commit", "-q", "-m", "big notes")


def peak_rss_mib(root: Path, source: str) -> tuple[int, float]:
    """(exit status, peak RSS in MiB) of one fresh build from ``source``."""
    index_dir = root.parent / f"idx-{source}"
    shutil.rmtree(index_dir, ignore_errors=True)
    exe = str(Path(sys.executable).with_name("vaultsearch"))
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execv(exe, [exe, "index", str(root), "--index-dir", str(index_dir), "--source", source, "--json"])
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    root = Path(sys.argv[1])
    if not root.exists():
        make_repo(root)
    for source in sys.argv[2:] or ["worktree", "git"]:
        code, mib = peak_rss_mib(root, source)
        print(f"{source}: exit {code}, peak RSS {mib:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
