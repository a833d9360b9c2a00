"""Freshness of a git-sourced index: its watermark against the revision it follows.

The index is a view of one commit (meta ``git_commit``). It is up to date when the revision it
follows (meta ``git_rev``, e.g. ``HEAD``) still resolves to that commit: one ``rev-parse``,
whatever the size of the vault (``watermark_current``). ``git_freshness`` adds how far the
revision moved (commits, and the note paths the commits changed) and the working tree's note
changes that are not committed. Those are *not indexed by design*, so they never count as
staleness: status shows them as "not indexed (uncommitted): N".

The read path may call ``git_freshness`` (a search response's freshness); it imports the git
helpers only when called, so that importing this module loads no build module.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.index.layout import IndexLayout, layout_for
from core.index.manifest import peek_segment
from core.index.state import active_record
from core.index.tables.meta import get_meta


def _active_meta(layout: IndexLayout) -> dict[str, Any] | None:
    """The active generation's meta, read without hashing it (None: no generation state)."""
    record = active_record(layout)
    if record is None:
        return None
    path = peek_segment(layout, record)
    if path is None:
        return None
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return get_meta(conn)
    finally:
        conn.close()


def watermark_current(vault: str | Path, index_dir: str | Path | None = None) -> bool | None:
    """True when the active generation's watermark is the commit its revision names now; None when
    the index is not git-sourced. O(1): the state row, the meta table, one ``git rev-parse``."""
    from core.vault import gitsource as git

    layout = layout_for(Path(vault).resolve(), Path(index_dir) if index_dir else None)
    meta = _active_meta(layout)
    if not meta or meta.get("source") != "git":
        return None
    repo = git.discover(layout.vault)
    return bool(git.resolve_commit(repo, str(meta["git_rev"])) == meta["git_commit"])


def git_freshness(
    vault: str | Path,
    meta: Mapping[str, Any] | None = None,
    *,
    index_dir: str | Path | None = None,
    uncommitted: bool = True,
) -> dict[str, Any] | None:
    """Freshness of a git-sourced index whose generation meta is ``meta`` (default: the active
    generation's, read without hashing it); None when the index is not git-sourced.

    ``up_to_date``: the watermark is what ``rev`` resolves to now. ``commits_since``: commits the
    revision gained since the watermark (None when the watermark is not in its history: a reset
    or a rewrite). ``changed``: note paths whose entry differs between the indexed tree and the
    revision's tree now. ``uncommitted``: note changes in the working tree that HEAD does not hold
    (not indexed by design; None when not asked).
    """
    from core.errors import GitRevisionError
    from core.vault import gitsource as git

    vault = Path(vault).resolve()
    layout = layout_for(vault, Path(index_dir) if index_dir else None)
    meta = _active_meta(layout) if meta is None else meta
    if not meta or meta.get("source") != "git":
        return None
    repo = git.discover(vault)
    watermark, rev = str(meta["git_commit"]), str(meta["git_rev"])
    out: dict[str, Any] = {
        "source": "git",
        "rev": rev,
        "watermark": watermark,
        "tree": meta.get("git_tree"),
        "detached": git.detached_head(repo),
        "shallow": repo.shallow,
    }
    try:
        now = git.resolve(repo, rev)
    except GitRevisionError as exc:  # the branch was deleted: reported, the index still serves its commit
        out.update(resolved=None, up_to_date=False, commits_since=None, changed=_changed_notes_none(), error=exc.reason)
    else:
        same = now.tree == meta.get("git_tree")
        changed = _changed_notes(repo, str(meta.get("git_tree")), now.tree) if not same else _changed_notes_none()
        out.update(
            resolved=now.commit,
            up_to_date=now.commit == watermark,
            commits_since=git.commits_between(repo, watermark, now.commit),
            changed=changed,
        )
    if uncommitted:
        index_rel = _inside(layout.index_dir, vault)
        found = git.uncommitted(repo, index_skip=index_rel)
        out["uncommitted"] = len(found.paths)
        out["uncommitted_paths"] = found.paths[:20]
        out["problems"] = [{"path": p.path, "reason": p.reason, "detail": p.detail} for p in found.problems]
    return out


def _changed_notes(repo: Any, old_tree: str, new_tree: str) -> dict[str, list[str]]:
    """Note paths added / modified / removed between the indexed tree and the current one."""
    from core.vault import gitsource as git

    out: dict[str, list[str]] = {"added": [], "modified": [], "removed": []}
    found = git.changed_status(repo, old_tree, new_tree) or {}
    for path, status in sorted(found.items()):
        if path[-3:].lower() == ".md":
            out["added" if status == "A" else "removed" if status == "D" else "modified"].append(path)
    return out


def _changed_notes_none() -> dict[str, list[str]]:
    return {"added": [], "modified": [], "removed": []}


def _inside(path: Path, root: Path) -> str | None:
    try:
        rel = path.resolve().relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() + "/"


def git_staleness(vault: Path, meta: Mapping[str, Any], index_dir: Path | None) -> dict[str, Any]:
    """``status``'s staleness block for a git-sourced index: stale means the revision moved on
    (the paths it changed are ``modified``); uncommitted edits are counted apart, never stale."""
    fresh = git_freshness(vault, meta, index_dir=index_dir)
    assert fresh is not None  # the caller checked that the index is git-sourced
    return {"stale": not fresh["up_to_date"], **fresh["changed"], "git": fresh, "uncommitted": fresh["uncommitted"]}
