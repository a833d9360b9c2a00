"""The read-only tools both servers expose: search, read_note, related, status, modes.

One :class:`Tools` per server process holds what is fixed at start-up (the vault, the index
directory, the visible classifications, the freshness options); every call resolves the
active generation again (a cached verified identity: a few ``stat`` calls), so a generation
published while the server runs is served on the next call. Errors are typed
``VaultSearchError`` values with a stable ``reason``; the servers turn them into tool errors.

Visibility: a note outside the visible classifications does not exist for any tool (not in
hits, counts, links, paths or freshness); asking for it by path gives the same
``note_not_found`` as a path that was never there.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from core.errors import (
    InvalidArgumentError,
    NoteNotFoundError,
    PathOutsideVaultError,
    VaultSearchError,
)
from core.index.freshness import FreshnessOptions, check_freshness
from core.index.freshness_visible import sees_in
from core.index.layout import ResolvedIndex, layout_for
from core.index.tables.meta import meta_value
from core.index.tables.notes import visible_note_at, visible_titles
from core.index.verify import connect_readonly, resolve
from core.index.visible_counts import visible_counts
from core.index.watch_state import last_build_failure
from core.ranking.filters import UNCLASSIFIED, Filters
from core.ranking.visibility import CallerStatistics
from core.registry import DEPRECATED_ALIASES, modes_json
from core.searcher import search_vault
from core.serve import schema as s
from core.serve.note_window import NoteLines, fit_lines, json_bytes, line_range
from core.serve.related import caller_graph, walk

DEFAULT_CLASSIFICATIONS = (UNCLASSIFIED,)  # notes without a classification count as "public"
WARM_WAIT_SECONDS = 10.0  # bounded: a search never waits on a warm-up longer than this


@dataclass(frozen=True)
class ServeConfig:
    vault: Path
    index_dir: Path | None = None
    classifications: tuple[str, ...] = DEFAULT_CLASSIFICATIONS
    freshness: FreshnessOptions = field(default_factory=FreshnessOptions)

    def visible_label(self) -> list[str]:
        """What a client can see, as said at start-up and in ``status`` (a note without a classification
        counts as ``public``: visible only with it)."""
        levels = [c.lower() for c in self.classifications]
        extra = [c for c in levels if c != UNCLASSIFIED]
        return [*(["(unclassified)", UNCLASSIFIED] if UNCLASSIFIED in levels else []), *extra]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    params: dict[str, s.Param]
    aliases: dict[str, str]

    @property
    def input_schema(self) -> dict[str, Any]:
        return s.input_schema(self.params, self.aliases)


TOOL_SPECS: dict[str, ToolSpec] = {
    t.name: t
    for t in (
        ToolSpec(
            "search",
            "Search the vault",
            "Search the notes through a verified index. Returns a versioned envelope: requested and actual "
            "mode, contract, fallback reason, index provenance, freshness (is the index behind the vault?), and "
            "hits with path, title, heading path, file line range, snippet, score and its source, the note's "
            "content SHA-256. A mode that cannot run honestly is an error with its reason, never an empty list.",
            s.SEARCH_PARAMS,
            s.SEARCH_ALIASES,
        ),
        ToolSpec(
            "read_note",
            "Read a note",
            "A note's text with file line numbers (all of it, one section, or from_line + max_lines) and its "
            "frontmatter as data. Paths are vault-relative; nothing outside the vault is readable.",
            s.READ_PARAMS,
            s.READ_ALIASES,
        ),
        ToolSpec(
            "related",
            "Links and backlinks",
            "The notes a note links to and the notes linking to it (wikilinks, Markdown links, typed relations), "
            "up to depth hops, from the index's edge table.",
            s.RELATED_PARAMS,
            s.RELATED_ALIASES,
        ),
        ToolSpec(
            "status",
            "Index status",
            "The served generation, its age, coverage, dense coverage, freshness, degraded legs, the watcher's "
            "last build, and which classifications this server shows.",
            {},
            {},
        ),
        ToolSpec("modes", "Retrieval modes", "The retrieval modes of the registry and what each needs.", {}, {}),
    )
}


def _heading_list(value: str) -> list[str]:
    try:
        out = json.loads(value)
    except ValueError:
        return []
    return [str(x) for x in out] if isinstance(out, list) else []


class Tools:
    """The tool implementations over one vault (thread-safe: no mutable state of its own)."""

    def __init__(self, config: ServeConfig, *, watch_state: Callable[..., dict[str, Any]] | None = None) -> None:
        self.config = config
        self._watch_state = watch_state
        self._warm = threading.Event()  # cleared while a generation the watcher just published warms up
        self._warm.set()
        self.warm_failure: dict[str, Any] | None = None
        self._warmed: str | None = None  # the generation the last warm-up loaded
        self.layout = layout_for(Path(config.vault).resolve(), config.index_dir)
        self.vault_real = self.layout.vault
        self._filters = Filters(classifications=tuple(c.lower() for c in config.classifications))
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "search": self.search,
            "read_note": self.read_note,
            "related": self.related,
            "status": self.status,
            "modes": self.modes,
        }

    # ------------------------------------------------------------ dispatch

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        spec = TOOL_SPECS.get(name)
        if spec is None:
            raise InvalidArgumentError(f"unknown tool {name!r}; tools: {', '.join(TOOL_SPECS)}", tool=name)
        return self._handlers[name](s.parse_arguments(name, arguments, spec.params, spec.aliases))

    # ------------------------------------------------------------ the watcher's new generations

    def generation_published(self) -> None:
        """The watcher moved the active pointer: searches wait for :meth:`warm` rather than each
        verifying the new file and loading its term matrix in parallel."""
        self._warm.clear()

    def published(self) -> None:
        """The watcher's ``on_publish``: hold searches and warm the new generation at once, inside the
        build, before its retention and report (what edit-to-searchable would otherwise wait for)."""
        self.generation_published()
        self._warm_active()

    def warm(self, outcome: Any) -> None:
        """After a watch build: verify the new generation and load its sparse index once (what the
        next search would otherwise pay), unless :meth:`published` already did. A failure is kept
        in ``warm_failure`` (shown by status); the next search raises it to its caller."""
        if outcome.ok and not outcome.up_to_date and outcome.generation_id != self._warmed:
            self._warm_active()
        else:
            self._warm.set()

    def _warm_active(self) -> None:
        try:
            results = search_vault(  # with the server's classifications: what its callers' searches need
                self.config.vault,
                "warm",
                1,
                "fts",
                index_dir=self.config.index_dir,
                freshness=False,
                classifications=self.config.classifications,
            )
            self._warmed = results.index.generation_id
            self.warm_failure = None
        except VaultSearchError as exc:
            self.warm_failure = exc.to_dict()
        finally:
            self._warm.set()

    def _open(self) -> tuple[ResolvedIndex, sqlite3.Connection]:
        resolved = resolve(self.layout)
        return resolved, connect_readonly(resolved)

    def _freshness(self, resolved: ResolvedIndex, conn: sqlite3.Connection) -> dict[str, Any]:
        return check_freshness(
            resolved, conn, options=self.config.freshness, classifications=self._filters.classifications
        )

    def _visible_sql(self) -> tuple[str, list[object]]:
        return self._filters.visible_classification_clause()

    # ------------------------------------------------------------ search

    def search(self, a: dict[str, Any]) -> dict[str, Any]:
        filter_kw = {k: a[k] for k in s.filter_params() if k in a and a[k] not in ((), None)}
        if filter_kw.get("include_superseded") is False:
            filter_kw.pop("include_superseded")
        mode = DEPRECATED_ALIASES.get(a["mode"], a["mode"])
        self._warm.wait(WARM_WAIT_SECONDS)
        results = search_vault(
            self.config.vault,
            a["query"],
            a["max_results"],
            mode,
            raw=a["raw"],
            allow_fallback=a["allow_fallback"],
            index_dir=self.config.index_dir,
            freshness=self.config.freshness,
            classifications=self.config.classifications,
            **filter_kw,
        )
        hits = [
            {
                "rank": i,
                "path": r.rel_path,
                "title": r.title,
                "heading_path": _heading_list(r.heading_path),
                "line_start": r.line_start,
                "line_end": r.line_end,
                "snippet": r.snippet,
                "score": r.score,
                "score_source": r.score_source,
                "via": r.via,
                "note_type": r.note_type,
                "tags": list(r.tags),
                "content_sha256": r.content_sha256,
            }
            for i, r in enumerate(results, start=1)
        ]
        envelope = {
            "version": s.ENVELOPE_VERSION,
            "query": a["query"],
            "requested_mode": a["mode"],
            "actual_mode": results.actual_mode,
            "retrieval_contract": results.retrieval_contract,
            "fallback_reason": results.fallback_reason,
            "index": results.index.to_dict(),
            "freshness": dict(results.freshness),
            "visible_classifications": self.config.visible_label(),
            # which query words were widened (prefix, subword, typo) and which matched nothing: never silent
            "query_expansions": [dict(e) for e in results.query_expansions],
            "unmatched_words": list(results.unmatched_words),
            "hits": hits,
        }
        return s.fit_budget(envelope, a["budget_bytes"])

    # ------------------------------------------------------------ notes by path

    def _confine(self, rel: str) -> str:
        """The normalised vault-relative path, or ``path_outside_vault`` (absolute, ``..``, symlink out)."""
        if not rel or "\x00" in rel:
            raise InvalidArgumentError("path must be a non-empty vault-relative path", argument="path")
        posix = rel.replace("\\", "/")
        p = PurePosixPath(posix)
        if p.is_absolute() or re.match(r"^[A-Za-z]:", posix) or ".." in p.parts:
            raise PathOutsideVaultError(f"{rel!r} is not a path inside the vault", path=rel)
        norm = p.as_posix()
        try:
            real = (self.vault_real / norm).resolve()
        except OSError:  # a link removed while it was resolved (resolve races with the vault)
            raise NoteNotFoundError(f"no note {rel!r} in the served index", path=rel) from None
        if not real.is_relative_to(self.vault_real):
            raise PathOutsideVaultError(f"{rel!r} resolves outside the vault", path=rel)
        return norm

    def _note_row(self, conn: sqlite3.Connection, rel: str) -> tuple[Any, ...]:
        clause, vals = self._visible_sql()
        row = visible_note_at(conn, rel, clause, vals)
        if row is None:
            raise NoteNotFoundError(f"no note {rel!r} in the served index", path=rel)
        return row

    def _hidden(self, rel: str) -> NoteNotFoundError:
        """What a caller who may not see ``rel`` gets: the answer for a path that was never there."""
        return NoteNotFoundError(f"no note {rel!r} in the served index", path=rel)

    def read_note(self, a: dict[str, Any]) -> dict[str, Any]:
        """The note as the vault holds it now, read through one confined, pinned open and served only
        when the build would serve it (its classification read by the build's own reader)."""
        from core.vault.notes import decode_text, is_binary, read_frontmatter
        from core.vault.scan import MAX_NOTE_BYTES
        from core.vault.show import read_confined

        rel = self._confine(a["path"])
        resolved, conn = self._open()
        try:
            note_id, rel, title, indexed_sha, _ = self._note_row(conn, rel)
            limit = int(meta_value(conn, "max_note_bytes") or MAX_NOTE_BYTES)  # the build's size limit
            fresh = self._freshness(resolved, conn)
        finally:
            conn.close()
        data, sha = read_confined(str(self.vault_real), rel, limit=limit)
        if is_binary(data):  # the build skips a binary file: not a note
            raise self._hidden(rel)
        text, _ = decode_text(rel, data)
        del data
        front = read_frontmatter(rel, text)
        if (front.classification or UNCLASSIFIED) not in (self._filters.classifications or ()):
            raise self._hidden(rel)  # reclassified (or made unreadable) since the build: hidden now
        lines = NoteLines(text)
        body_first = text.count("\n", 0, len(text) - len(front.body)) + 1
        first, last, section = line_range(lines, max(1, body_first), a)
        frontmatter, fm_bytes = front.mapping, json_bytes(front.mapping)
        omitted = fm_bytes > a["max_bytes"] // 2  # the frontmatter is also readable as lines from line 1
        if omitted:
            frontmatter, fm_bytes = {}, json_bytes({})
        text_out, end = fit_lines(lines, first, last, a["max_bytes"] - fm_bytes)
        return {
            "path": rel,
            "title": title,
            "frontmatter": frontmatter,
            "frontmatter_omitted": omitted,
            "section": section,
            "line_start": first,
            "line_end": end,
            "total_lines": lines.total,
            "body_line_start": body_first,
            "text": text_out,
            "truncated": end < last or omitted,
            "next_from_line": end + 1 if end < lines.total else None,
            "content_sha256": sha,
            "changed_since_index": sha != indexed_sha,
            "index": {"generation_id": resolved.generation_id, "kind": resolved.kind},
            "freshness": fresh,
        }

    def related(self, a: dict[str, Any]) -> dict[str, Any]:
        """Links, backlinks and unresolved links (core.serve.related), equal for a restricted caller to
        the answer from the vault without the notes it may not see, within ``budget_bytes``."""
        rel = self._confine(a["path"])
        resolved, conn = self._open()
        try:
            note_id, rel, title, _, _ = self._note_row(conn, rel)
            clause, vals = self._visible_sql()
            graph = caller_graph(conn, self._statistics(resolved, conn))
            links, backlinks, unresolved = walk(graph, note_id, visible_titles(conn, clause, vals), a["depth"])
            fresh = self._freshness(resolved, conn)
        finally:
            conn.close()
        envelope = {
            "path": rel,
            "title": title,
            "links": links,
            "backlinks": backlinks,
            "unresolved": unresolved,
            "index": {"generation_id": resolved.generation_id, "kind": resolved.kind},
            "freshness": fresh,
        }
        return s.fit_lists(envelope, a["budget_bytes"], ("links", "backlinks", "unresolved"))

    def _statistics(self, resolved: ResolvedIndex, conn: sqlite3.Connection) -> CallerStatistics:
        """What this server's callers may see of the generation (cached per generation and visible set)."""
        generation = (
            None if resolved.kind == "legacy_db" else (str(resolved.path), resolved.generation_id, resolved.sha256)
        )
        return CallerStatistics(
            conn, self._visible_sql(), str(resolved.layout.index_dir), generation, self._filters.classifications
        )

    # ------------------------------------------------------------ status, modes

    def status(self, a: dict[str, Any]) -> dict[str, Any]:
        resolved, conn = self._open()
        try:
            clause, vals = self._visible_sql()
            notes, chunks, vectors = visible_counts(conn, clause, vals)
            fresh = self._freshness(resolved, conn)
            sees = sees_in(conn, self.vault_real, self._filters.classifications)  # watch state: visible paths only
            failure = last_build_failure(self.layout.index_dir, 0.0, sees)
            watch = self._watch_state(sees) if self._watch_state else None
        finally:
            conn.close()
        dense_leg = (
            "ok" if chunks and vectors == chunks else ("dense_incomplete" if vectors else "dense_index_unavailable")
        )
        return {
            "vault": str(self.vault_real),
            "generation_id": resolved.generation_id,
            "index_kind": resolved.kind,
            "source_snapshot_hash": resolved.source_snapshot_hash,
            "age_seconds": round(max(0.0, time.time() - resolved.created_at), 3),
            "coverage": {"indexed_notes": notes, "chunks": chunks},
            "dense": {
                "chunks_with_vectors": vectors,
                "chunks": chunks,
                "coverage": round(vectors / chunks, 4) if chunks else 0.0,
            },
            "legs": {"fts": "ok", "vector": "ok", "link_graph": "ok", "dense": dense_leg},
            "degraded": [leg for leg, state in (("dense", dense_leg),) if state != "ok"],
            "freshness": fresh,
            "last_build_failure": failure,
            "watch": {**watch, "warm_failure": self.warm_failure} if watch is not None else {"enabled": False},
            "visible_classifications": self.config.visible_label(),
        }

    def modes(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"modes": modes_json(), "deprecated_aliases": dict(DEPRECATED_ALIASES)}
