"""The one git runner: every git call of the git source is made here (``git_command``), and none lets
git execute a command that a repository configures.

A repository's ``.git/config`` (with its includes) and ``info/attributes`` can name commands git
would run: an fsmonitor hook, clean/smudge/process filters, textconv and external diff drivers,
pagers, gpg (``log.showSignature``), hooks, ssh and credential helpers (a partial clone's lazy
fetch). ``SAFE_CONFIG`` turns each off for every call through ``GIT_CONFIG_KEY_n`` settings, which
outrank every configuration file; for ``status`` (the one call that reads the working tree, where
a clean filter runs) every filter and diff driver the configuration defines is emptied too (git
runs no driver whose command is empty). tests/index/test_git_runner.py sets each to a command that
writes a marker file and checks that no marker appears.

Blobs are read through ``_BlobStream``: one ``git cat-file --batch`` per process and repository,
asked for one blob at a time (its size from the header, then exactly that many bytes), so that a
build holds one note's content at a time (``BlobRef``: a blob read where it is parsed).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import GitCommandError
from core.vault.scan import MAX_NOTE_BYTES

_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_NO_LAZY_FETCH": "1",
}
# Settings every git call runs with (given as GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n, which outrank
# every configuration file). First, what a user's configuration must not change: raw paths, and
# the root commit's files in the history pass (log.showRoot=false would hide the commit that added
# them). Then every setting by which a repository's configuration could make git run a command:
# git here never executes anything a repository (its .git/config, includes, info/attributes) names.
SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.quotepath", "off"),
    ("log.showRoot", "true"),
    ("core.fsmonitor", "false"),  # a hook every command that reads the git index would run
    ("core.hooksPath", os.devnull),  # hooks (no call here is one that runs hooks, and none is found)
    ("core.pager", "cat"),  # pagers (also --no-pager and GIT_PAGER)
    ("pager.status", "false"),
    ("pager.log", "false"),
    ("diff.external", ""),  # external diff and textconv: no call asks for a patch (--no-ext-diff --no-textconv)
    ("log.showSignature", "false"),  # gpg.program on log / show
    ("protocol.allow", "never"),  # no transport at all: no ssh (core.sshCommand), no credential
    ("credential.helper", ""),  # helper, no lazy fetch of a partial clone's missing blob
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
# Commands that read the working tree, where a clean filter (``filter.<driver>.clean`` / ``.process``,
# chosen by a .gitattributes or info/attributes) would run: every driver the configuration names is
# emptied for them (git runs no filter whose command is empty).
_READS_WORKTREE = frozenset({"status"})
# A git call that has not ended by then is stopped and fails as a GitCommandError: a repository's
# configuration can make git block forever (an ``include.path`` naming a FIFO), and no source call
# may hang a build, a watcher or a server. Generous: a history walk of a large repository is slow.
GIT_TIMEOUT_SECONDS = 300.0
_DRIVER_KEYS = ("clean", "smudge", "process", "textconv", "command")


def decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


def git_command(
    cwd: Path, args: Sequence[str], extra: Sequence[tuple[str, str]] = ()
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of ``git -C cwd ARGS``: the one place a git call is made from (every
    call goes through ``run_git``, ``git_exit`` or ``_BlobStream``, each built here), with
    ``SAFE_CONFIG`` and ``extra`` settings that outrank every configuration file."""
    env = {**os.environ, **_ENV}
    settings = (*SAFE_CONFIG, *extra)
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for i, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return ["git", "--no-pager", "-C", str(cwd), *args], env


def _spawn(cwd: Path, args: Sequence[str], stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    extra: list[tuple[str, str]] = []
    if args and args[0] in _READS_WORKTREE:
        extra = [(f"filter.{name}.required", "false") for name in _drivers(cwd, "filter")]
        extra += [(f"{kind}.{name}.{key}", "") for kind in ("filter", "diff") for name in _drivers(cwd, kind)
                  for key in _DRIVER_KEYS]  # fmt: skip
    cmd, env = git_command(cwd, args, extra)
    return _run(cmd, env, args[0], stdin)


def _run(cmd: list[str], env: dict[str, str], name: str, stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    """Run one git command to its end, within ``GIT_TIMEOUT_SECONDS`` (then it is killed)."""
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, env=env, check=False, timeout=GIT_TIMEOUT_SECONDS)
    except FileNotFoundError:
        raise GitCommandError("the git executable was not found on PATH", command=name) from None
    except subprocess.TimeoutExpired:
        raise GitCommandError(
            f"git {name} did not end within {GIT_TIMEOUT_SECONDS:g} s and was stopped (does the repository's "
            "configuration include a file that never ends, such as a FIFO?)",
            command=name,
        ) from None


def _drivers(cwd: Path, kind: str) -> set[str]:
    """The ``filter`` or ``diff`` driver names the configuration defines (``git config`` only reads files)."""
    cmd, env = git_command(cwd, ("config", "-z", "--get-regexp", rf"^{kind}\."))
    done = _run(cmd, env, "config", None)
    names = set()
    for record in done.stdout.split(b"\0"):
        key = decode(record.partition(b"\n")[0])
        if key.count(".") >= 2:
            names.add(key[len(kind) + 1 : key.rindex(".")])
    return names


def run_git(cwd: Path, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> bytes:
    """stdout of ``git -C cwd ARGS``; a missing executable or an unexpected exit is a ``GitCommandError``."""
    done = _spawn(cwd, args, stdin)
    if done.returncode not in ok:
        raise GitCommandError(
            f"git {args[0]} failed ({done.returncode}): {decode(done.stderr).strip()[:300]}",
            command=" ".join(args[:3]),
            exit_status=done.returncode,
        )
    return done.stdout


def git_exit(cwd: Path, *args: str) -> int:
    return _spawn(cwd, args, None).returncode


class _BlobStream:
    """One ``git cat-file --batch`` process, asked for one blob at a time: a blob's size is read from
    its header, then exactly that many bytes, so that at most one blob is in memory here (a 12 MiB
    note costs 12 MiB, not a buffer of every blob read)."""

    def __init__(self, cwd: Path) -> None:
        cmd, env = git_command(cwd, ("cat-file", "--batch"))
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except FileNotFoundError:
            raise GitCommandError("the git executable was not found on PATH", command="cat-file") from None
        self.lock = threading.Lock()

    def read(self, blob: str, max_bytes: int) -> bytes:
        with self.lock:
            stdin, stdout = self.proc.stdin, self.proc.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(blob.encode("ascii") + b"\n")
                stdin.flush()
            except BrokenPipeError:
                raise GitCommandError(f"cat-file ended before blob {blob}", command="cat-file") from None
            header = stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                raise GitCommandError(
                    f"cat-file could not read blob {blob}: {decode(b' '.join(header))}", command="cat-file"
                )
            size = int(header[2])
            data = stdout.read(size)
            stdout.read(1)  # the LF after the content
            if len(data) != size:
                raise GitCommandError(f"cat-file ended inside blob {blob}", command="cat-file")
            if size > max_bytes:  # the listing's sizes are the blobs': only a damaged object gets here
                raise GitCommandError(f"blob {blob} holds {size} bytes > limit {max_bytes}", command="cat-file")
            return data

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_STREAMS: dict[tuple[int, str], _BlobStream] = {}  # (process id, repository folder) -> its stream
_STREAMS_LOCK = threading.Lock()


def blob_stream(cwd: Path) -> _BlobStream:
    """This process's blob stream of ``cwd`` (a forked worker starts its own)."""
    key = (os.getpid(), str(cwd))
    with _STREAMS_LOCK:
        found = _STREAMS.get(key)
        if found is None or found.proc.poll() is not None:
            found = _STREAMS[key] = _BlobStream(cwd)
        return found


def close_streams(cwd: Path) -> None:
    """End this process's blob stream of ``cwd`` (the end of a build)."""
    with _STREAMS_LOCK:
        found = _STREAMS.pop((os.getpid(), str(cwd)), None)
    if found is not None:
        found.close()


def _close_all_streams() -> None:
    """At exit: end every blob stream this process started (a build that failed half-way, a direct
    ``BlobRef.load``), so no ``git cat-file`` outlives it and its pipes are closed, not leaked."""
    with _STREAMS_LOCK:
        mine = [key for key in _STREAMS if key[0] == os.getpid()]
        streams = [_STREAMS.pop(key) for key in mine]
    for stream in streams:
        stream.close()


atexit.register(_close_all_streams)


@dataclass(frozen=True)
class BlobRef:
    """A note blob read where it is parsed (perhaps in a worker process), one at a time: the git
    source's deferred read, bounded as the working tree's read is (one note in memory per reader)."""

    cwd: Path
    blob: str
    max_bytes: int = MAX_NOTE_BYTES

    def load(self) -> tuple[bytes, str]:
        """(content, sha256) of the blob."""

        data = blob_stream(self.cwd).read(self.blob, self.max_bytes)
        return data, hashlib.sha256(data).hexdigest()
