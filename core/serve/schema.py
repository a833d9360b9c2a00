"""The tools' arguments: JSON schemas derived from the registry and the filter definitions,
argument aliases and coercion, and the byte budget of a result.

``search``'s filter arguments are generated from the fields of :class:`core.ranking.filters.Filters`
and its ``mode`` enum from ``SEARCH_MODE_REGISTRY``, so the schemas cannot drift from what the
library accepts (tests/serve/test_schema.py checks both). Classifications are never an argument:
the server fixes them at start-up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from core.errors import InvalidArgumentError
from core.index.tables.notes import DATE_FIELD_NAMES
from core.ranking.filters import Filters
from core.registry import DEFAULT_MODE, DEPRECATED_ALIASES, MODE_NAMES

ENVELOPE_VERSION = "vaultsearch.search/1"


@dataclass(frozen=True)
class RequestBounds:
    """The one bound on every HTTP request (bytes, time, nesting): what ``serve`` enforces before a
    tool runs. The biggest legitimate request (a 10,000-character query with every filter) is a
    few tens of KiB; a body is refused at ``max_body_bytes`` from its Content-Length or while it
    streams (413), a request whose headers or body do not arrive in time is closed (408 for a body),
    a JSON body nested deeper than ``max_json_depth`` is ``invalid_argument`` (400)."""

    max_body_bytes: int = 1 << 20
    max_header_bytes: int = 16 * 1024
    header_seconds: float = 10.0  # from the connection (or the previous response) to complete headers
    body_seconds: float = 30.0  # from the headers to the complete body
    keep_alive_seconds: int = 5  # an idle keep-alive connection
    max_json_depth: int = 32


REQUEST_BOUNDS = RequestBounds()
DEFAULT_BUDGET_BYTES = 8 * 1024
MIN_BUDGET_BYTES, MAX_BUDGET_BYTES = 1024, 256 * 1024
MAX_RESULTS = 100

# What each filter means, keyed by Filters field; a field missing here fails at import.
FILTER_HELP: dict[str, str] = {
    "note_types": "note type(s) (frontmatter type/kind): any of",
    "tags_all": "tags the note must all have (hierarchical: 'a' matches 'a/b')",
    "tags_any": "tags of which the note must have at least one",
    "path_prefixes": "vault-relative path or folder prefix(es): any of",
    "namespaces": "frontmatter namespace/project: any of",
    "date_field": "the date field since/until apply to",
    "since": "ISO date or datetime lower bound on date_field",
    "until": "ISO date or datetime upper bound on date_field (a date includes the whole day)",
    "volatility": "note volatility: any of",
    "status": "note status: any of",
    "include_superseded": "also return superseded notes (excluded by default)",
}
SERVER_FIXED = frozenset({"classifications"})  # Filters fields a client can never set

SEARCH_ALIASES = {
    "q": "query",
    "limit": "max_results",
    "n": "max_results",
    "k": "max_results",
    "top_k": "max_results",
    "after": "since",
    "before": "until",
    "type": "note_types",
    "types": "note_types",
    "note_type": "note_types",
    "tags": "tags_all",
    "tag": "tags_all",
    "any_tags": "tags_any",
    "path": "path_prefixes",
    "paths": "path_prefixes",
    "path_prefix": "path_prefixes",
    "namespace": "namespaces",
}
READ_ALIASES = {
    "note": "path",
    "rel_path": "path",
    "start_line": "from_line",
    "line": "from_line",
    "lines": "max_lines",
}
RELATED_ALIASES = {"note": "path", "rel_path": "path", "hops": "depth"}


@dataclass(frozen=True)
class Param:
    kind: str  # string | integer | boolean | string_list
    description: str
    required: bool = False
    enum: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    default: Any = None

    def schema(self) -> dict[str, Any]:
        if self.kind == "string_list":
            out: dict[str, Any] = {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}],
                "description": self.description + " (a list, or a comma-separated string)",
            }
        else:
            out = {"type": self.kind, "description": self.description}
        if self.enum:
            out["enum"] = list(self.enum)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.default is not None:
            out["default"] = self.default
        return out


def _filter_param(name: str, annotation: str, default: Any) -> Param:
    """A search argument from one Filters field, typed by the field's annotation."""
    help_text = FILTER_HELP[name]
    if annotation.startswith("tuple[str"):
        return Param("string_list", help_text)
    if annotation == "bool":
        return Param("boolean", help_text, default=default)
    if name == "date_field":
        return Param("string", help_text, enum=tuple(DATE_FIELD_NAMES), default=default)
    if annotation in ("str", "str | None"):
        return Param("string", help_text)
    raise RuntimeError(f"Filters.{name}: no tool argument type for {annotation!r}")  # a new field needs a mapping


def filter_params() -> dict[str, Param]:
    return {
        f.name: _filter_param(f.name, str(f.type), f.default) for f in fields(Filters) if f.name not in SERVER_FIXED
    }


SEARCH_PARAMS: dict[str, Param] = {
    "query": Param("string", "what to search for (plain text; FTS5 syntax only with raw=true)", required=True),
    "mode": Param("string", "retrieval mode (see the modes tool)", enum=MODE_NAMES, default=DEFAULT_MODE),
    "max_results": Param("integer", "hits to return", minimum=1, maximum=MAX_RESULTS, default=10),
    "budget_bytes": Param(
        "integer",
        "the whole JSON result fits in this many bytes (snippets cut, then hits dropped, and said so)",
        minimum=MIN_BUDGET_BYTES,
        maximum=MAX_BUDGET_BYTES,
        default=DEFAULT_BUDGET_BYTES,
    ),
    "allow_fallback": Param("boolean", "let a dense mode that cannot run answer with fts, labelled", default=False),
    "raw": Param("boolean", "pass FTS5 query syntax through (a bad query is a query_syntax error)", default=False),
    **filter_params(),
}
READ_PARAMS: dict[str, Param] = {
    "path": Param("string", "the note's vault-relative path, as search returns it", required=True),
    "section": Param("string", "a heading of the note: only that section (its sub-sections included)"),
    "from_line": Param("integer", "first file line to return (1-based; default: the body's first line)", minimum=1),
    "max_lines": Param("integer", "lines to return at most", minimum=1, maximum=5000, default=200),
    "max_bytes": Param(
        "integer",
        "bytes of the note to return at most: its text and frontmatter together, as JSON (a frontmatter over "
        "half of it is omitted, and said so: it is readable as lines from line 1)",
        minimum=256,
        maximum=MAX_BUDGET_BYTES,
        default=16384,
    ),
}
RELATED_PARAMS: dict[str, Param] = {
    "path": Param("string", "the note's vault-relative path", required=True),
    "depth": Param("integer", "hops to follow (links and backlinks)", minimum=1, maximum=3, default=1),
    "budget_bytes": Param(
        "integer",
        "the whole JSON result fits in this many bytes (the farthest links dropped first, and said so)",
        minimum=MIN_BUDGET_BYTES,
        maximum=MAX_BUDGET_BYTES,
        default=DEFAULT_BUDGET_BYTES,
    ),
}


def input_schema(params: dict[str, Param], aliases: dict[str, str]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments; aliases are listed in the description."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: p.schema() for name, p in params.items()},
        "required": [name for name, p in params.items() if p.required],
    }
    if aliases:
        schema["description"] = "accepted aliases: " + ", ".join(f"{a}={t}" for a, t in sorted(aliases.items()))
    return schema


def _coerce(name: str, p: Param, value: Any) -> Any:
    bad = InvalidArgumentError(f"argument {name!r} must be {p.kind.replace('_', ' ')}, not {value!r}", argument=name)
    if p.kind == "string_list":
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
            raise bad
        return tuple(v.strip() for v in items if v.strip())
    if p.kind == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise bad
        return value
    if p.kind == "integer":
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        if (p.minimum is not None and value < p.minimum) or (p.maximum is not None and value > p.maximum):
            raise InvalidArgumentError(
                f"argument {name!r} must be between {p.minimum} and {p.maximum}, not {value}", argument=name
            )
        return value
    if not isinstance(value, str):
        raise bad
    if p.enum and value not in p.enum:
        if name == "mode" and value in DEPRECATED_ALIASES:
            return value
        raise InvalidArgumentError(
            f"argument {name!r} must be one of {', '.join(p.enum)}, not {value!r}", argument=name
        )
    return value


def json_depth(value: Any) -> int:
    """How many objects/arrays deep a parsed JSON value nests (a scalar is 0, ``{}`` is 1)."""
    depth, level = 0, [value]
    while level := [x for x in level if isinstance(x, (dict, list))]:
        depth += 1
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x)]
    return depth


def lone_surrogate(value: Any) -> bool:
    """True when a string anywhere in a JSON value holds a lone surrogate (``"\\ud800"``: legal JSON,
    not Unicode text; no encoder can write it back)."""
    if isinstance(value, str):
        return not value.isascii() and any("\ud800" <= c <= "\udfff" for c in value)
    if isinstance(value, dict):
        return any(lone_surrogate(k) or lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(lone_surrogate(v) for v in value)
    return False


def parse_arguments(tool: str, raw: Any, params: dict[str, Param], aliases: dict[str, str]) -> dict[str, Any]:
    """Aliases resolved, values coerced, defaults filled; anything else is an ``invalid_argument``."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidArgumentError(f"{tool}: arguments must be a JSON object")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if lone_surrogate([key, value]):
            shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
            raise InvalidArgumentError(
                f"{tool}: argument {shown!r} holds a lone surrogate: not Unicode text", argument=shown
            )
        name = aliases.get(key, key)
        if name in SERVER_FIXED or name == "classification":
            raise InvalidArgumentError(
                "visible classifications are fixed when the server starts (--classification), never by a client",
                argument=key,
            )
        if name not in params:
            raise InvalidArgumentError(
                f"{tool}: unknown argument {key!r}; valid: {', '.join(params)} (aliases: "
                f"{', '.join(sorted(aliases)) or 'none'})",
                argument=key,
            )
        if name in out:
            raise InvalidArgumentError(f"{tool}: argument {name!r} given twice (through an alias)", argument=key)
        if value is not None:
            out[name] = _coerce(name, params[name], value)
    for name, p in params.items():
        if name not in out:
            if p.required:
                raise InvalidArgumentError(f"{tool}: missing required argument {name!r}", argument=name)
            if p.default is not None:
                out[name] = p.default
    return out


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def fit_budget(envelope: dict[str, Any], budget: int) -> dict[str, Any]:
    """Cut snippets, then drop hits from the end, until the JSON of ``envelope`` fits ``budget`` bytes.

    What was cut is said in ``envelope["budget"]``: a budget too small even for no hits is an error.
    """
    hits: list[dict[str, Any]] = envelope["hits"]
    info = {"budget_bytes": budget, "bytes": 0, "truncated": False, "snippets_cut": 0, "hits_dropped": 0}
    envelope["budget"] = info
    envelope["returned"] = len(hits)
    cut: set[int] = set()

    def size() -> int:
        return _measure(envelope, info)

    if size() <= budget:  # the usual case: one encoding
        return envelope
    for width in (160, 80):
        if size() <= budget:
            break
        for i, h in enumerate(hits):
            if len(h.get("snippet") or "") > width:
                h["snippet"] = h["snippet"][:width].rsplit(" ", 1)[0] + " …"
                cut.add(i)
        info["snippets_cut"] = len(cut)
        info["truncated"] = bool(cut)
    while hits and size() > budget:
        hits.pop()
        cut.discard(len(hits))
        info["snippets_cut"] = len(cut)
        info["hits_dropped"] += 1
        info["truncated"] = True
        envelope["returned"] = len(hits)
    if size() > budget:
        raise InvalidArgumentError(f"budget_bytes={budget} cannot hold even an empty result ({info['bytes']} bytes)")
    return envelope


def _measure(envelope: dict[str, Any], info: dict[str, Any]) -> int:
    """The envelope's JSON size in bytes, written into ``info["bytes"]`` (which it includes)."""
    info["bytes"] = 0
    info["bytes"] = len(dumps(envelope).encode("utf-8")) + 8  # room for the digits of "bytes" itself
    return int(info["bytes"])


def fit_lists(envelope: dict[str, Any], budget: int, keys: tuple[str, ...]) -> dict[str, Any]:
    """Drop entries of the lists ``envelope[key]`` until the JSON of ``envelope`` fits ``budget`` bytes.

    Entries are kept in the order (hop, position, list): the entries of hop 1 (``depth`` 1, or no
    ``depth``) taken from the lists in turn (the first of each, then the second of each, ...), then
    those of hop 2, and so on: a cut answer is the nearest part of the whole one, and each list keeps
    a prefix of itself. What was cut is said in ``envelope["budget"]`` (``dropped``
    per list) and ``envelope["total"]`` (each list's length before the cut); a budget too small even
    for empty lists is an error, as for :func:`fit_budget`."""
    lists: dict[str, list[dict[str, Any]]] = {k: envelope[k] for k in keys}
    info: dict[str, Any] = {"budget_bytes": budget, "bytes": 0, "truncated": False, "dropped": dict.fromkeys(keys, 0)}
    envelope["budget"], envelope["total"] = info, {k: len(v) for k, v in lists.items()}

    def size() -> int:
        return _measure(envelope, info)

    if size() <= budget:  # the usual case: one encoding
        return envelope
    order = sorted(
        ((entry.get("depth", 1), i, rank) for rank, k in enumerate(keys) for i, entry in enumerate(lists[k])),
    )
    for k in keys:
        envelope[k] = []
    room = budget - size() - 32  # what the "dropped" counts may still grow by
    kept: dict[str, int] = dict.fromkeys(keys, 0)
    for _, i, rank in order:
        need = len(dumps(lists[keys[rank]][i]).encode("utf-8")) + 1
        if need > room:
            break
        room -= need
        kept[keys[rank]] = i + 1  # a list's kept entries are a prefix of it: its order is by hop
    for k in keys:
        envelope[k] = lists[k][: kept[k]]
        info["dropped"][k] = len(lists[k]) - kept[k]
    info["truncated"] = any(info["dropped"].values())
    while size() > budget and any(envelope[k] for k in keys):  # the estimate was short: cut the last kept
        last = max((k for k in keys if envelope[k]), key=lambda k: (envelope[k][-1].get("depth", 1), keys.index(k)))
        envelope[last].pop()
        info["dropped"][last] += 1
        info["truncated"] = True
    if size() > budget:
        raise InvalidArgumentError(f"budget_bytes={budget} cannot hold even an empty result ({info['bytes']} bytes)")
    return envelope
