"""Read a vault from a git commit instead of the working tree (``--source git``).

Git access is the ``git`` executable, a fixed handful of processes per build, never one per
note (bench/bench_git.py measured it against dulwich and pygit2; see docs/benchmarks.md):

    discover        ``rev-parse --show-toplevel --show-prefix --is-shallow-repository``
    resolve         ``rev-parse --verify REV^{commit}`` and the vault folder's tree in it
    list_tree       ``ls-tree -r -z -l TREE``: mode, type, blob id, size and path of every entry
    read_blobs      ``cat-file --batch``: every blob the build reads, through one process
    history         ``log --name-status -z --no-renames``: one pass over the history for the
                    dates of every path (or over ``OLD..NEW`` only, for an incremental build)
    changed_paths   ``diff-tree -r -z --no-renames OLD_TREE NEW_TREE``: what a commit range changed
    uncommitted     ``status --porcelain -z``: note changes not committed yet (reported, not indexed)

The same ignore rules as the working-tree scan apply: dot-folders skipped by the scan
(``.git``, ``.obsidian``, ``.vaultsearch``, ``.trash``) and ``.vaultsearchignore``, read from
the tree being indexed. Git never writes the repository here (``GIT_OPTIONAL_LOCKS=0``).

Documented behaviour (``Problem.reason`` where an entry is skipped and reported):

    not a repository          ``NotAGitRepoError`` (the vault folder is not inside a work tree)
    unknown revision          ``GitRevisionError`` (also: the vault folder absent in that commit)
    detached HEAD             indexed like any commit; ``detached`` in status
    shallow clone             dates come from the history that exists: ``git_shallow_history``
    submodule                 ``git_submodule_skipped`` (a gitlink has no blobs here)
    LFS pointer file          ``git_lfs_pointer_skipped`` (the pointer is not the note)
    symlink in the tree       ``git_symlink_skipped`` (a blob holding a path, not a note)
    over the size limit       ``too_large``, as in the working-tree scan
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

from core.errors import GitCommandError, GitRevisionError, NotAGitRepoError, UsageError
from core.vault.problems import Problem
from core.vault.scan import (
    IGNORE_FILE,
    MAX_NOTE_BYTES,
    SKIP_DIR_NAMES,
    load_ignore_spec,
    parse_ignore_spec,
    undecodable,
    undecodable_problem,
)

LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
_LFS_POINTER_MAX = 1024  # an LFS pointer file is ~130 bytes; git-lfs rejects pointers over 1 KiB
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
_DRIVER_KEYS = ("clean", "smudge", "process", "textconv", "command")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


def git_command(
    cwd: Path, args: Sequence[str], extra: Sequence[tuple[str, str]] = ()
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of ``git -C cwd ARGS``: the one place a git call is made from (every
    call goes through ``run_git``, ``_git_exit`` or ``_BlobStream``, each built here), with
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
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, env=env, check=False)
    except FileNotFoundError:
        raise GitCommandError("the git executable was not found on PATH", command=args[0]) from None


def _drivers(cwd: Path, kind: str) -> set[str]:
    """The ``filter`` or ``diff`` driver names the configuration defines (``git config`` only reads files)."""
    cmd, env = git_command(cwd, ("config", "-z", "--get-regexp", rf"^{kind}\."))
    try:
        done = subprocess.run(cmd, capture_output=True, env=env, check=False)
    except FileNotFoundError:
        raise GitCommandError("the git executable was not found on PATH", command="config") from None
    names = set()
    for record in done.stdout.split(b"\0"):
        key = _decode(record.partition(b"\n")[0])
        if key.count(".") >= 2:
            names.add(key[len(kind) + 1 : key.rindex(".")])
    return names


def run_git(cwd: Path, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> bytes:
    """stdout of ``git -C cwd ARGS``; a missing executable or an unexpected exit is a ``GitCommandError``."""
    done = _spawn(cwd, args, stdin)
    if done.returncode not in ok:
        raise GitCommandError(
            f"git {args[0]} failed ({done.returncode}): {_decode(done.stderr).strip()[:300]}",
            command=" ".join(args[:3]),
            exit_status=done.returncode,
        )
    return done.stdout


def _git_exit(cwd: Path, *args: str) -> int:
    return _spawn(cwd, args, None).returncode


@dataclass(frozen=True)
class Repo:
    """A vault folder inside a git work tree."""

    vault: Path
    toplevel: Path
    prefix: str  # the vault folder relative to the top level, "" or ending in "/"
    shallow: bool

    def git(self, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> bytes:
        return run_git(self.vault, *args, stdin=stdin, ok=ok)

    def succeeds(self, *args: str) -> bool:
        """True when ``git ARGS`` exits 0 (a yes/no question such as ``merge-base --is-ancestor``)."""
        return _git_exit(self.vault, *args) == 0


def discover(vault: Path) -> Repo:
    """The repository holding ``vault``; ``NotAGitRepoError`` when there is none."""
    vault = Path(vault).resolve()
    if not vault.is_dir():
        raise UsageError(f"vault is not a directory: {vault}", vault=str(vault))
    cmd = ("rev-parse", "--show-toplevel", "--show-prefix", "--is-shallow-repository")
    try:
        out = run_git(vault, *cmd)
    except GitCommandError as exc:
        if exc.evidence.get("exit_status") == 128:
            raise NotAGitRepoError(
                f"{vault} is not inside a git work tree",
                vault=str(vault),
                hint="index the working tree: --source worktree",
            ) from None
        raise
    top, prefix, shallow = (_decode(line) for line in out.splitlines()[:3])
    return Repo(vault, Path(top), prefix, shallow == "true")


@dataclass(frozen=True)
class Revision:
    """A resolved revision: the commit (the watermark) and the vault folder's tree in it."""

    rev: str
    commit: str
    tree: str
    committed_at: int  # committer time, epoch seconds


def resolve_commit(repo: Repo, rev: str) -> str:
    """The commit SHA ``rev`` names now (one ``rev-parse``): the O(1) half of the up-to-date check."""
    if not rev or rev.startswith("-"):
        raise GitRevisionError(f"not a revision: {rev!r}", rev=rev)
    out = repo.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", ok=(0, 1, 128))
    commit = _decode(out).strip()
    if not commit:
        raise GitRevisionError(f"revision {rev!r} does not name a commit in {repo.toplevel}", rev=rev)
    return commit


def resolve(repo: Repo, rev: str = "HEAD") -> Revision:
    """``rev`` as a commit and the tree of the vault folder in it."""
    commit = resolve_commit(repo, rev)
    out = repo.git("rev-parse", "--verify", "--quiet", f"{commit}:{repo.prefix}", ok=(0, 1, 128))
    tree = _decode(out).strip()
    if not tree:
        raise GitRevisionError(f"the vault folder {repo.prefix!r} does not exist in {rev} ({commit[:12]})", rev=rev)
    when = int(_decode(repo.git("show", "-s", "--format=%ct", commit)).strip())
    return Revision(rev, commit, tree, when)


# ---------------------------------------------------------------- the tree


@dataclass(frozen=True)
class TreeEntry:
    """One note blob of the tree: its path relative to the vault, blob id and size."""

    rel_path: str
    blob: str
    size: int


@dataclass(frozen=True)
class TreeListing:
    entries: list[TreeEntry]  # sorted by rel_path
    problems: list[Problem]


def _ls_tree(repo: Repo, tree: str) -> list[tuple[str, str, str, str, str]]:
    """(mode, type, object, size, path) of every entry under ``tree``, recursively."""
    rows = []
    for record in repo.git("ls-tree", "-r", "-z", "-l", "--full-tree", tree).split(b"\0"):
        if not record:
            continue
        head, _, path = record.partition(b"\t")
        mode, kind, obj, size = head.split()
        rows.append((_decode(mode), _decode(kind), _decode(obj), _decode(size), _decode(path)))
    return rows


def _skipped_dir(rel_path: str, spec: GitIgnoreSpec | None) -> bool:
    parts = rel_path.split("/")
    if any(p in SKIP_DIR_NAMES for p in parts[:-1]):
        return True
    if spec is None:
        return False
    return any(spec.match_file("/".join(parts[: i + 1]) + "/") for i in range(len(parts) - 1))


def _ignore_spec(repo: Repo, rows: list[tuple[str, str, str, str, str]]) -> tuple[GitIgnoreSpec | None, list[Problem]]:
    blob = next((obj for mode, kind, obj, _, path in rows if path == IGNORE_FILE and kind == "blob"), None)
    if blob is None:
        return None, []
    return parse_ignore_spec(read_blobs(repo, [blob])[blob])


def list_tree(
    repo: Repo,
    tree: str,
    *,
    max_bytes: int = MAX_NOTE_BYTES,
    skip: str | None = None,
    include_dot_paths: bool = False,
) -> TreeListing:
    """Every note blob of ``tree`` under the scan's ignore rules (``.vaultsearchignore`` from the tree),
    dot-files and dot-folders skipped as the working-tree scan skips them unless ``include_dot_paths``.

    ``skip`` is a folder (relative to the vault, ending in "/") never listed: the index directory.
    """
    rows = _ls_tree(repo, tree)
    spec, problems = _ignore_spec(repo, rows)
    entries = []
    for mode, kind, obj, size, path in rows:
        is_note = path[-3:].lower() == ".md"
        if (skip and path.startswith(skip)) or _skipped_dir(path, spec) or (spec is not None and spec.match_file(path)):
            continue
        if not include_dot_paths and any(part.startswith(".") for part in path.split("/")):
            continue
        if undecodable(path):  # not valid UTF-8: reported, never indexed (as the working-tree scan does)
            if kind == "blob" and is_note:
                problems.append(undecodable_problem(path))
            continue
        if kind == "commit":
            problems.append(Problem(path, "git_submodule_skipped", f"submodule at commit {obj[:12]}"))
        elif kind == "blob" and is_note and mode == "120000":
            problems.append(Problem(path, "git_symlink_skipped", "a symlink in the tree is not followed"))
        elif kind == "blob" and is_note:
            if int(size) > max_bytes:
                problems.append(Problem(path, "too_large", f"{size} bytes > limit {max_bytes}"))
            else:
                entries.append(TreeEntry(path, obj, int(size)))
    entries.sort(key=lambda e: e.rel_path)
    return TreeListing(entries, problems)


def read_blobs(repo: Repo, blobs: Iterable[str]) -> dict[str, bytes]:
    """blob id -> content, through one ``git cat-file --batch`` process for all of them."""
    wanted = list(dict.fromkeys(blobs))
    if not wanted:
        return {}
    out = repo.git("cat-file", "--batch", "--buffer", stdin=("\n".join(wanted) + "\n").encode())
    found: dict[str, bytes] = {}
    at = 0
    for blob in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if len(header) != 3 or header[1] != b"blob":
            raise GitCommandError(f"cat-file could not read blob {blob}: {_decode(out[at:end])}", command="cat-file")
        size = int(header[2])
        found[blob] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return found


def is_lfs_pointer(data: bytes) -> bool:
    return len(data) <= _LFS_POINTER_MAX and data.startswith(LFS_POINTER_PREFIX)


# ---------------------------------------------------------------- history and diffs


def iso_utc(epoch_seconds: int) -> str:
    """A commit time as the ISO-8601 UTC text the date filters compare."""
    return dt.datetime.fromtimestamp(epoch_seconds, dt.UTC).isoformat()


@dataclass(frozen=True)
class PathDates:
    """What one history pass knows of a path (epoch seconds)."""

    last: int  # newest commit that changed it
    added: int | None  # newest commit that added it (None: not added within the range)


def history(repo: Repo, commit: str, since: str | None = None) -> dict[str, PathDates]:
    """One ``git log`` pass: for every path (relative to the vault) changed in ``commit``'s history
    (or in ``since..commit``), the newest commit time that changed it and the newest that added it.

    Merge commits contribute no changes of their own (git's default): a path's dates come from the
    commits that changed it on any branch. Renames count as a delete and an add (``--no-renames``).
    Committer time, so that dates follow the order in which commits entered the history.
    """
    spec = f"{since}..{commit}" if since else commit
    out = repo.git(
        "log", "--no-ext-diff", "--no-textconv", "--relative", "--format=%x01%ct", "--name-status", "-z",
        "--no-renames", spec, "--", ".",
    )  # fmt: skip
    dates: dict[str, PathDates] = {}
    when = 0
    tokens = out.split(b"\0")
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip(b"\n")
        i += 1
        if token.startswith(b"\x01"):
            when = int(token[1:])
        elif token and i < len(tokens):
            path = _decode(tokens[i])
            i += 1
            old = dates.get(path)
            added = when if token == b"A" else None
            if old is not None:
                known = [a for a in (old.added, added) if a is not None]
                when_max, added = max(old.last, when), (max(known) if known else None)
                dates[path] = PathDates(when_max, added)
            else:
                dates[path] = PathDates(when, added)
    return dates


def is_ancestor(repo: Repo, old: str, new: str) -> bool:
    """True when commit ``old`` is in ``new``'s history (False also when ``old`` no longer exists)."""
    return repo.succeeds("merge-base", "--is-ancestor", old, new)


def changed_paths(repo: Repo, old_tree: str, new_tree: str) -> set[str] | None:
    """Paths (relative to the vault) whose entry differs between two trees; None when ``old_tree``
    is gone (a rewritten and pruned history): the caller then compares contents instead."""
    found = changed_status(repo, old_tree, new_tree)
    return None if found is None else set(found)


def changed_status(repo: Repo, old_tree: str, new_tree: str) -> dict[str, str] | None:
    """path -> ``A`` / ``D`` / ``M`` / ``T`` between two trees (``diff-tree --name-status``); None
    when ``old_tree`` no longer exists."""
    if not repo.succeeds("cat-file", "-e", old_tree):
        return None
    out = repo.git(
        "diff-tree", "--no-ext-diff", "--no-textconv", "-r", "-z", "--no-renames", "--name-status", old_tree, new_tree
    )
    tokens = [t for t in out.split(b"\0")]
    found = {_decode(tokens[i + 1]): _decode(tokens[i]) for i in range(0, len(tokens) - 1, 2) if tokens[i]}
    return {path: status for path, status in found.items() if not undecodable(path)}  # never listed: never indexed


def commits_between(repo: Repo, old: str, new: str) -> int | None:
    """How many commits ``new`` has that ``old`` has not (None when ``old`` is not in its history)."""
    if old == new:
        return 0
    if not repo.succeeds("cat-file", "-e", old) or not is_ancestor(repo, old, new):
        return None
    return int(_decode(repo.git("rev-list", "--count", f"{old}..{new}")).strip())


def detached_head(repo: Repo) -> bool:
    return not repo.succeeds("symbolic-ref", "--quiet", "HEAD")


@dataclass(frozen=True)
class Uncommitted:
    """Note paths the working tree or the git index changed and HEAD does not hold, and the problems
    met (a ``.vaultsearchignore`` that is a FIFO is reported, never opened in a way that blocks)."""

    paths: list[str]
    problems: list[Problem]


def uncommitted(repo: Repo, *, max_bytes: int = MAX_NOTE_BYTES, index_skip: str | None = None) -> Uncommitted:
    """Note paths (relative to the vault) with changes in the working tree or the git index that
    HEAD does not hold: added, modified, deleted or untracked. The scan's ignore rules apply
    (``.vaultsearchignore`` as it is in the working tree, read as the scan reads it); git's own
    ignores hide untracked files."""
    out = repo.git(
        "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all", "--", "."
    )
    spec, problems = load_ignore_spec(repo.vault)
    paths = []
    for record in out.split(b"\0"):
        if len(record) < 4:
            continue
        path = _decode(record[3:])
        if not path.startswith(repo.prefix):
            continue
        rel = path[len(repo.prefix) :]
        if (
            rel[-3:].lower() != ".md"
            or undecodable(rel)
            or _skipped_dir(rel, spec)
            or (spec is not None and spec.match_file(rel))
        ):
            continue
        if index_skip and rel.startswith(index_skip):
            continue
        paths.append(rel)
    return Uncommitted(sorted(set(paths)), problems)
