"""Read a vault from a git commit instead of the working tree (``--source git``).

Git access is the ``git`` executable, a fixed handful of processes per build, never one per
note (bench/bench_git.py measured it against dulwich and pygit2; see docs/benchmarks.md):

    discover        ``rev-parse --show-toplevel --show-prefix --is-shallow-repository``
    resolve         ``rev-parse --verify REV^{commit}`` and the vault folder's tree in it
    list_tree       ``ls-tree -r -z -l TREE``: mode, type, blob id, size and path of every entry
    read blobs      ``cat-file --batch``: one process per build (and per worker process), asked for
                    one blob at a time where it is parsed (``BlobRef``): size from the header,
                    then exactly that many bytes, so one note's content is in memory at a time
    history         ``log --name-status -z --no-renames``: one pass over the history for the
                    dates of every path (or over ``OLD..NEW`` only, for an incremental build)
    changed_paths   ``diff-tree -r -z --no-renames OLD_TREE NEW_TREE``: what a commit range changed
    uncommitted     ``status --porcelain -z``: note changes not committed yet (reported, not indexed)

The same ignore rules as the working-tree scan apply: dot-folders skipped by the scan
(``.git``, ``.obsidian``, ``.vaultsearch``, ``.trash``) and ``.vaultsearchignore``, read from
the tree being indexed. Git never writes the repository here (``GIT_OPTIONAL_LOCKS=0``).

Every call is made through ``git_command``, which never lets git execute a command a repository
configures (``core.vault.gitrun``: fsmonitor, hooks, pagers, external diff, textconv, gpg, transports,
credential helpers; clean/smudge filter drivers emptied for ``status``, the one call that reads
the working tree). File names git lists are decoded with ``surrogateescape``; a name that is not
valid UTF-8 is reported (``undecodable_name``) and never indexed.

Documented behaviour (``Problem.reason`` where an entry is skipped and reported):

    not a repository          ``NotAGitRepoError`` (the vault folder is not inside a work tree)
    unknown revision          ``GitRevisionError`` (also: the vault folder absent in that commit)
    detached HEAD             indexed like any commit; ``detached`` in status
    shallow clone             dates come from the history that exists: ``git_shallow_history``
    submodule                 ``git_submodule_skipped`` (a gitlink has no blobs here)
    LFS pointer file          ``git_lfs_pointer_skipped`` (the pointer is not the note)
    symlink in the tree       ``git_symlink_skipped`` (a blob holding a path, not a note)
    over the size limit       ``too_large``, as in the working-tree scan
    missing blob              ``git_blob_missing`` (a partial clone: never fetched, see gitrun)
    name not valid UTF-8      ``undecodable_name``, as in the working-tree scan
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

from core.errors import GitCommandError, GitRevisionError, NotAGitRepoError, UsageError
from core.vault.gitrun import blob_stream, decode, git_exit, run_git
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
        return git_exit(self.vault, *args) == 0


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
    top, prefix, shallow = (decode(line) for line in out.splitlines()[:3])
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
    commit = decode(out).strip()
    if not commit:
        raise GitRevisionError(f"revision {rev!r} does not name a commit in {repo.toplevel}", rev=rev)
    return commit


def resolve(repo: Repo, rev: str = "HEAD") -> Revision:
    """``rev`` as a commit and the tree of the vault folder in it."""
    commit = resolve_commit(repo, rev)
    out = repo.git("rev-parse", "--verify", "--quiet", f"{commit}:{repo.prefix}", ok=(0, 1, 128))
    tree = decode(out).strip()
    if not tree:
        raise GitRevisionError(f"the vault folder {repo.prefix!r} does not exist in {rev} ({commit[:12]})", rev=rev)
    when = int(decode(repo.git("show", "-s", "--format=%ct", commit)).strip())
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
        rows.append((decode(mode), decode(kind), decode(obj), decode(size), decode(path)))
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
        elif kind == "blob" and is_note and not size.isdigit():  # ls-tree -l: "BAD" (a partial clone's)
            problems.append(Problem(path, "git_blob_missing", f"blob {obj[:12]} is not in the repository"))
        elif kind == "blob" and is_note:
            if int(size) > max_bytes:
                problems.append(Problem(path, "too_large", f"{size} bytes > limit {max_bytes}"))
            else:
                entries.append(TreeEntry(path, obj, int(size)))
    entries.sort(key=lambda e: e.rel_path)
    return TreeListing(entries, problems)


def read_blobs(repo: Repo, blobs: Iterable[str], max_bytes: int = MAX_NOTE_BYTES) -> dict[str, bytes]:
    """blob id -> content, streamed one blob at a time through this process's ``cat-file --batch``
    (for the few small blobs a listing reads: the ignore file, LFS pointer checks)."""
    stream = blob_stream(repo.vault)
    return {blob: stream.read(blob, max_bytes) for blob in dict.fromkeys(blobs)}


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
            path = decode(tokens[i])
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
    found = {decode(tokens[i + 1]): decode(tokens[i]) for i in range(0, len(tokens) - 1, 2) if tokens[i]}
    return {path: status for path, status in found.items() if not undecodable(path)}  # never listed: never indexed


def commits_between(repo: Repo, old: str, new: str) -> int | None:
    """How many commits ``new`` has that ``old`` has not (None when ``old`` is not in its history)."""
    if old == new:
        return 0
    if not repo.succeeds("cat-file", "-e", old) or not is_ancestor(repo, old, new):
        return None
    return int(decode(repo.git("rev-list", "--count", f"{old}..{new}")).strip())


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
        path = decode(record[3:])
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
