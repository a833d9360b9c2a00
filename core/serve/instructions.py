"""The MCP server's ``instructions``: what a client is told at ``initialize``, built from the index's
state when the server starts (the ``status`` tool's answer, so only what this server's callers may
see: a restricted server counts its visible notes, never the hidden ones).

It says which vault and classifications are served, how many notes, whether the index is behind
the vault (and by how much), whether semantic search is available (dense coverage), what is missing
(no index: build one) and which tool to call next. It is not refreshed while the server runs: the
text says so and points to ``status`` for the live state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import IndexMissingError, VaultSearchError
from core.registry import DEFAULT_MODE, SEARCH_MODE_REGISTRY
from core.serve.tools import Tools

NEXT_TOOLS = (
    f'Next: call `search` with {{"query": "..."}} (mode {DEFAULT_MODE} unless you pass one), then `read_note` '
    "with a hit's path (from_line: its line_start) to read it, `related` for its links and backlinks; "
    "`modes` lists the retrieval modes."
)
LIVE = "This text was built when the server started; `status` gives the live state."


def server_instructions(tools: Tools) -> str:
    """The instructions for ``tools``' vault as its index is now (see the module docstring)."""
    vault = f"vault {tools.vault_real}"
    shown = ", ".join(tools.config.visible_label())
    head = f"vaultsearch: read-only search over the Markdown {vault} (classifications shown: {shown})."
    try:
        status = tools.call("status", {})
    except IndexMissingError:
        return " ".join(
            (
                head,
                "No index yet: every tool answers index_missing until one is built.",
                f"Tell the user to run: vaultsearch index {tools.vault_real}",
                f"(then `status` to check). {LIVE}",
            )
        )
    except VaultSearchError as exc:
        return " ".join(
            (
                head,
                f"The index cannot be served now ({exc.reason}): tools answer that error.",
                exc.hint or f"rebuild with: vaultsearch index {tools.vault_real}",
                f"{LIVE}",
            )
        )
    vault_arg = str(tools.vault_real)
    fresh = _freshness_line(status["freshness"], vault_arg)
    return " ".join((head, _index_line(status), fresh, _dense_line(status, vault_arg), NEXT_TOOLS, LIVE))


def _index_line(status: Mapping[str, Any]) -> str:
    notes = status["coverage"]["indexed_notes"]
    age = _duration(status["age_seconds"])
    line = f"Index: {notes} note(s) searchable by this server, built {age} ago."
    if not notes:
        line += " Nothing to search: the vault holds no visible notes yet."
    return line


def _freshness_line(fresh: Mapping[str, Any], vault: str) -> str:
    """Is the index behind the vault, and by how much (counts of visible notes only)."""
    failure = fresh.get("last_build_failure")
    failed = f" The last watch build failed ({failure.get('reason')})." if isinstance(failure, Mapping) else ""
    if not fresh.get("checked"):
        return f"Freshness: not checked ({fresh.get('reason')}); results may miss recent edits.{failed}"
    if not fresh.get("stale"):
        return f"Freshness: the index is up to date with the vault.{failed}"
    counts = ", ".join(f"{fresh.get(k, 0)} {k}" for k in ("added", "modified", "removed") if fresh.get(k))
    commits = fresh.get("commits_since")
    behind = f"{commits} commit(s) and " if commits else ""
    unverified = fresh.get("modified_unverified")
    by_stat = f"; {unverified} of the modified seen by file stat only, content not compared" if unverified else ""
    return (
        f"Freshness: the index is BEHIND the vault ({behind}{counts or 'changes'} note(s) since it was built"
        f"{by_stat}): "
        "search can miss or misrank those notes; `read_note` reads the file as it is now. Rebuild with "
        f"`vaultsearch index {vault}` (or serve with --watch).{failed}"
    )


def _dense_line(status: Mapping[str, Any], vault: str) -> str:
    """Whether semantic search is available: the share of chunks with a dense vector."""
    dense = status["dense"]
    coverage = float(dense.get("coverage") or 0.0)
    needing = " and ".join(m.name for m in SEARCH_MODE_REGISTRY.values() if "dense_vectors" in m.needs)
    if status["legs"]["dense"] == "ok":
        return f"Semantic search: available (every chunk embedded): {needing} and {DEFAULT_MODE} use the vectors."
    if dense.get("chunks_with_vectors"):
        return (
            f"Semantic search: incomplete ({coverage:.0%} of chunks embedded): {needing} fail closed "
            f"(dense_incomplete), {DEFAULT_MODE} answers lexically; finish with `vaultsearch index {vault} --embed-only`."
        )
    return (
        f"Semantic search: not available (no dense vectors): {needing} fail closed (dense_index_unavailable), "
        f"{DEFAULT_MODE} answers lexically (fts). To switch it on: `vaultsearch index {vault} --embed`."
    )


def _duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{int(seconds)} second{'s' if int(seconds) != 1 else ''}"
