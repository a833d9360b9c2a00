"""The tools' output schemas (MCP ``outputSchema``, the OpenAPI 200 responses).

Each is a JSON Schema (Draft 2020-12) with ``type: object`` whose every ``required`` name is
declared in ``properties`` with a type and a description, with no ``$ref`` (nothing to resolve).
tests/serve/test_mcp_schemas.py checks these rules, the ones the MCP Inspector's ``--strict``
applies, and that real structured results validate against them.
"""

from __future__ import annotations

from typing import Any

from core.serve.schema import ENVELOPE_VERSION


def _t(kind: str | list[str], description: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **more}


_NULLABLE_STR = {"type": ["string", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_FRESHNESS = _t(
    "object",
    "is the index behind the vault: checked, stale, counts of added / modified / removed notes (visible ones only)",
    required=["checked", "stale"],
    properties={
        "checked": _t("boolean", "whether the vault was compared with the index"),
        "stale": _t(["boolean", "null"], "the index is behind the vault (null: not checked)"),
        "added": _t("integer", "notes added since the build"),
        "modified": _t("integer", "notes modified since the build"),
        "removed": _t("integer", "notes removed since the build"),
    },
)
_NOTE_INDEX = _t("object", "the generation that answered: generation_id, kind")
_BUDGET = _t(
    "object",
    "the byte budget: budget_bytes, bytes used, truncated, dropped",
    required=["budget_bytes", "bytes", "truncated"],
    properties={
        "budget_bytes": _t("integer", "the budget asked for"),
        "bytes": _t("integer", "the envelope's size"),
        "truncated": _t("boolean", "something was left out to fit"),
    },
)
_HIT = {
    "type": "object",
    "required": [
        "rank",
        "path",
        "title",
        "heading_path",
        "line_start",
        "line_end",
        "snippet",
        "score",
        "content_sha256",
    ],
    "properties": {
        "rank": {"type": "integer"},
        "path": {"type": "string"},
        "title": {"type": "string"},
        "heading_path": _STRINGS,
        "line_start": {"type": ["integer", "null"], "description": "1-based first file line of the best chunk"},
        "line_end": {"type": ["integer", "null"], "description": "1-based last file line (inclusive)"},
        "snippet": {"type": "string"},
        "score": {"type": "number"},
        "score_source": {"type": "string"},
        "via": {"type": ["object", "null"], "description": "graph expansion: the edge the hit came through"},
        "note_type": _NULLABLE_STR,
        "tags": _STRINGS,
        "content_sha256": {"type": "string"},
    },
}
_SEARCH = {
    "type": "object",
    "required": [
        "version",
        "requested_mode",
        "actual_mode",
        "retrieval_contract",
        "fallback_reason",
        "index",
        "freshness",
        "visible_classifications",
        "query_expansions",
        "unmatched_words",
        "hits",
        "returned",
        "budget",
    ],
    "properties": {
        "version": _t("string", "the envelope's version", const=ENVELOPE_VERSION),
        "query": _t("string", "the query as given"),
        "requested_mode": _t("string", "the mode asked for"),
        "actual_mode": _t("string", "the mode that ran"),
        "retrieval_contract": _t("string", "what the ranking guarantees (fts, fts_fallback, dense, ...)"),
        "fallback_reason": _t(["string", "null"], "why another mode ran than the one asked for (null: none)"),
        "index": _t("object", "which index answered: kind, generation_id, source_snapshot_hash, watermark, age"),
        "freshness": _FRESHNESS,
        "visible_classifications": {**_STRINGS, "description": "the classifications this server shows"},
        "query_expansions": _t(
            "array", "query words widened (prefix, typo, ...) and to what", items={"type": "object"}
        ),
        "unmatched_words": {**_STRINGS, "description": "query words no indexed term serves"},
        "hits": _t("array", "one per note, best first", items=_HIT),
        "returned": _t("integer", "how many hits the envelope holds"),
        "budget": _BUDGET,
    },
}
_READ_NOTE = {
    "type": "object",
    "required": ["path", "frontmatter", "line_start", "line_end", "text", "truncated", "content_sha256", "freshness"],
    "properties": {
        "path": _t("string", "the vault-relative path"),
        "title": _t(["string", "null"], "the note's title"),
        "frontmatter": _t("object", "the note's frontmatter as data ({} when omitted for size)"),
        "frontmatter_omitted": _t("boolean", "the frontmatter was left out to fit max_bytes"),
        "section": _t(["string", "null"], "the section read (null: by lines)"),
        "line_start": _t("integer", "the first file line given (1-based)"),
        "line_end": _t("integer", "the last file line given (inclusive)"),
        "total_lines": _t("integer", "the file's line count"),
        "body_line_start": _t("integer", "the first line after the frontmatter"),
        "text": _t("string", "the lines, each prefixed by its number"),
        "truncated": _t("boolean", "fewer lines than asked for were given"),
        "next_from_line": _t(["integer", "null"], "from_line for the next page (null: end of file)"),
        "content_sha256": _t("string", "SHA-256 of the file as read now"),
        "changed_since_index": _t("boolean", "the file differs from the indexed one"),
        "index": _NOTE_INDEX,
        "freshness": _FRESHNESS,
    },
}
_RELATED = {
    "type": "object",
    "required": ["path", "links", "backlinks", "unresolved", "freshness", "budget", "total"],
    "properties": {
        "path": _t("string", "the vault-relative path"),
        "title": _t(["string", "null"], "the note's title"),
        "links": _t("array", "notes this note links to (path, title, kind, depth, via)", items={"type": "object"}),
        "backlinks": _t("array", "notes linking to this note", items={"type": "object"}),
        "unresolved": _t("array", "link targets that name no visible note", items={"type": "object"}),
        "index": _NOTE_INDEX,
        "freshness": _FRESHNESS,
        "budget": _BUDGET,
        "total": _t("object", "counts before the budget: links, backlinks, unresolved"),
    },
}
_STATUS = {
    "type": "object",
    "required": ["generation_id", "freshness", "visible_classifications", "legs"],
    "properties": {
        "vault": _t("string", "the vault folder served"),
        "generation_id": _t(["string", "null"], "the served generation (null: a legacy in-place index)"),
        "index_kind": _t("string", "immutable_generation or legacy_db"),
        "source_snapshot_hash": _t(["string", "null"], "hash of the vault snapshot the index was built from"),
        "age_seconds": _t("number", "seconds since the generation was built"),
        "coverage": _t("object", "indexed_notes and chunks this server shows"),
        "dense": _t("object", "chunks_with_vectors, chunks, coverage: is semantic search available"),
        "legs": _t("object", "each retrieval leg: ok or why not"),
        "degraded": {**_STRINGS, "description": "legs that are not ok"},
        "freshness": _FRESHNESS,
        "last_build_failure": _t(["object", "null"], "the watcher's last failed build newer than the served one"),
        "watch": _t("object", "the watcher's state (enabled: false without --watch)"),
        "visible_classifications": {**_STRINGS, "description": "the classifications this server shows"},
    },
}
_MODES = {
    "type": "object",
    "required": ["modes"],
    "properties": {
        "modes": _t("array", "the retrieval modes of the registry and what each needs", items={"type": "object"}),
        "deprecated_aliases": _t("object", "old mode names and the mode each now means"),
    },
}
OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "search": _SEARCH,
    "read_note": _READ_NOTE,
    "related": _RELATED,
    "status": _STATUS,
    "modes": _MODES,
}
