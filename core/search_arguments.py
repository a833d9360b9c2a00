"""Every argument of ``search_vault`` checked before any work, with a stable reason when it is refused.

Hostile input never reaches SQL, FTS5 or numpy: a wrong type, lone surrogates (invalid UTF-8), an
out-of-range limit, an unknown option, keyword or filter is a typed error (``InvalidArgumentError``,
``FilterError``: exit 2) or, for a keyword that is no parameter, a ``TypeError`` naming the valid ones.
"""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Any

from core.errors import InvalidArgumentError, UsageError
from core.index.freshness import FreshnessOptions
from core.modes.decay import AgeDecay
from core.ranking.filters import Filters
from core.registry import ModeSpec, get_mode

# The largest ``limit`` (hits) a search may ask for; KNOWN_OPTIONS are the keys ``options`` may hold.
MAX_LIMIT = 10_000
KNOWN_OPTIONS = frozenset({"reranker"})
_FLAGS = ("raw", "allow_fallback", "passages")


def _text_argument(name: str, value: object, *, optional: bool = False, max_chars: int | None = None) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be a string, got {type(value).__name__}", argument=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{name} is not valid text: a lone surrogate at {exc.start} (invalid UTF-8 on the command line?)",
            argument=name,
        ) from exc
    if max_chars is not None and len(value) > max_chars:
        raise InvalidArgumentError(f"{name} is longer than {max_chars} characters", argument=name)


def _path_argument(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise InvalidArgumentError(f"{name} must be a path, got {type(value).__name__}", argument=name)
    if len(path) > 4096:
        raise InvalidArgumentError(f"{name} is longer than 4096 characters", argument=name)
    try:  # a file name need not be UTF-8: the bytes the command line gave (surrogateescape) name the folder
        encoded = os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{name} is not a file system path: a lone surrogate at {exc.start}", argument=name
        ) from exc
    if b"\0" in encoded:
        raise InvalidArgumentError(f"{name} holds a NUL character", argument=name)


def check_search_arguments(
    vault: object,
    query: object,
    mode: object,
    limit: object,
    filters: object,
    filter_kw: dict[str, Any],
    rest: dict[str, Any],
) -> tuple[ModeSpec, Filters, int]:
    """Every argument of search_vault checked before any work: (the mode's spec, the Filters, the limit).

    Hostile input never reaches SQL, FTS5 or numpy: a wrong type, lone surrogates (invalid
    UTF-8), an out-of-range limit, an unknown option or filter is an InvalidArgumentError /
    FilterError (exit 2) with a stable reason. ``rest`` holds the other keyword arguments."""
    _path_argument("vault", vault)
    _text_argument("query", query)  # longer than MAX_QUERY_CHARS: searched by its start (clean_text)
    _text_argument("mode", mode)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(
            f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}"[:200], argument="limit"
        )
    for flag in _FLAGS:
        if not isinstance(rest.get(flag), bool):
            raise InvalidArgumentError(f"{flag} must be True or False, got {rest.get(flag)!r}"[:200], argument=flag)
    _text_argument("model", rest.get("model"), optional=True)
    _path_argument("index_dir", rest.get("index_dir"), optional=True)
    options = rest.get("options")
    if options is not None:
        if not isinstance(options, dict) or set(options) - KNOWN_OPTIONS:
            raise InvalidArgumentError(
                f"options must be a dict with keys among {sorted(KNOWN_OPTIONS)}, got {options!r}"[:300],
                argument="options",
            )
        for key, value in options.items():
            _text_argument(f"options[{key!r}]", value, optional=True)
    decay = rest.get("decay")
    if decay is not None and not isinstance(decay, AgeDecay):
        raise InvalidArgumentError(f"decay must be an AgeDecay, got {type(decay).__name__}", argument="decay")
    spec = get_mode(mode)  # type: ignore[arg-type]
    if filters is not None and filter_kw:
        raise UsageError("give filters either as filters=Filters(...) or as keywords, not both")
    if filters is not None and not isinstance(filters, Filters):
        raise InvalidArgumentError(f"filters must be a Filters, got {type(filters).__name__}", argument="filters")
    checked = filters if filters is not None else Filters.make(**filter_kw)
    checked.validate()  # every filter up front, also for a query that has no terms
    return spec, checked, limit


FILTER_KEYWORDS: tuple[str, ...] = tuple(f.name for f in fields(Filters))
SEARCH_KEYWORDS: tuple[str, ...] = (
    "vault_dir",
    "query",
    "max_results",
    "mode",
    "limit",
    "filters",
    "raw",
    "allow_fallback",
    "model",
    "index_dir",
    "options",
    "passages",
    "decay",
    "freshness",
)


def check_keywords(filter_kw: dict[str, Any]) -> None:
    """A keyword that is neither a parameter nor a filter is a TypeError naming the valid ones."""
    unknown = sorted(set(filter_kw) - set(FILTER_KEYWORDS))
    if unknown:
        raise TypeError(
            f"search_vault() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
            f"valid: {', '.join(SEARCH_KEYWORDS)}; filters: {', '.join(FILTER_KEYWORDS)}"
        )


def max_results_argument(max_results: object, limit: object) -> object:
    """The number of hits asked for (``limit`` is an alias); its type and range are checked by
    ``check_search_arguments``. A string in third place is the old signature's mode: a TypeError."""
    if isinstance(max_results, str) and limit is None:
        raise TypeError(
            f"max_results must be an int, not {max_results!r}: the signature is "
            "search_vault(vault_dir, query, max_results, mode); give the mode by keyword (mode=...)"
        )
    if limit is not None and max_results != 10 and limit != max_results:
        raise UsageError(f"max_results={max_results!r} and limit={limit!r} disagree; give one (limit is its alias)")
    return limit if limit is not None else max_results


def freshness_options(freshness: bool | FreshnessOptions) -> FreshnessOptions:
    if isinstance(freshness, FreshnessOptions):
        return freshness
    if not isinstance(freshness, bool):
        raise TypeError(f"freshness must be a bool or FreshnessOptions, not {type(freshness).__name__}")
    return FreshnessOptions(enabled=freshness)
