"""A note's frontmatter: the fenced YAML block, loaded safely into a JSON-safe mapping (never raises).

YAML is loaded with the safe loader (C when available) but with timestamps left as strings, so an
impossible date is a problem of that field (``core.vault.notes``), not of the whole frontmatter.
Alias bombs, recursive anchors and absurd depth are cut off (``yaml_invalid``).
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from core.vault.problems import Problem

_MAX_YAML_VALUES = 20_000  # bound on values walked when making frontmatter JSON-safe
_MAX_YAML_DEPTH = 64


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML loader that keeps timestamps as strings (dates are normalised here)."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))

_FENCE_LINE = re.compile(r"(---|\.\.\.)[ \t]*\r?")


def split_frontmatter(text: str) -> tuple[str | None, str, bool]:
    """(frontmatter YAML or None, body, unclosed).

    Frontmatter is a first line ``---`` and a later line ``---`` or ``...``. With no
    closing line the whole text is the body and ``unclosed`` is True.
    """
    first_nl = text.find("\n")
    first = text if first_nl < 0 else text[:first_nl]
    if first.rstrip(" \t\r") != "---":
        return None, text, False
    if first_nl < 0:
        return None, text, True
    pos = first_nl + 1
    while pos <= len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        if _FENCE_LINE.fullmatch(text, pos, end):
            return text[first_nl + 1 : pos], ("" if nl < 0 else text[nl + 1 :]), False
        if nl < 0:
            break
        pos = nl + 1
    return None, text, True


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


def _plain(node: yaml.Node) -> Any:
    """The value of a composed node when it is a string, or a sequence of strings (what the safe
    constructor makes of it, built without it); ``_NOT_PLAIN`` for anything else."""
    if isinstance(node, yaml.ScalarNode):
        return node.value if node.tag == _STR else _NOT_PLAIN
    if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:  # not !!python/..., !!omap, a local tag
        items = node.value
        if all(isinstance(item, yaml.ScalarNode) and item.tag == _STR for item in items):
            return [item.value for item in items]
    return _NOT_PLAIN


_NOT_PLAIN = object()


def _load_yaml(yaml_text: str) -> Any:
    """``yaml.load`` with ``_Loader``. A mapping of string keys to strings and lists of strings (most
    frontmatter) is built straight from the nodes libyaml composed: the safe constructor would make
    the same values, one Python call per node. Aliases (a node met twice) take the constructor."""
    loader = _Loader(yaml_text)
    try:
        node = loader.get_single_node()
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP and len(node.value) <= _MAX_YAML_VALUES:
            out: dict[str, Any] = {}
            seen: set[int] = set()
            for key, value in node.value:
                plain = _plain(value)
                if key.tag != _STR or not isinstance(key, yaml.ScalarNode) or plain is _NOT_PLAIN or id(value) in seen:
                    break
                seen.add(id(value))
                out[key.value] = plain
            else:
                return out
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def load_frontmatter(rel_path: str, yaml_text: str) -> tuple[dict[str, Any], list[Problem]]:
    """Parse frontmatter YAML into a JSON-safe mapping with string keys (never raises)."""
    try:
        loaded = _load_yaml(yaml_text)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        return {}, [Problem(rel_path, "yaml_invalid", _yaml_error_detail(exc))]
    if loaded is None:
        return {}, []
    if not isinstance(loaded, dict):
        return {}, [Problem(rel_path, "frontmatter_not_mapping", f"frontmatter is a {type(loaded).__name__}")]
    budget = [_MAX_YAML_VALUES]
    safe = _json_safe(loaded, budget, 0)
    if budget[0] < 0:
        return {}, [
            Problem(rel_path, "yaml_invalid", f"frontmatter too large or too deep (over {_MAX_YAML_VALUES} values)")
        ]
    return safe, []


def _yaml_error_detail(exc: Exception) -> str:
    """One line: the YAML problem and where it is (line numbers count the opening fence)."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" (line {mark.line + 2}, column {mark.column + 1})" if mark is not None else ""
        return f"{exc.problem}{where}"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _json_safe(value: Any, budget: list[int], depth: int) -> Any:
    """A JSON-serialisable copy: str keys, lists for sequences, str for other objects.

    ``budget`` counts down the values walked; it goes negative (and the walk stops) on
    alias bombs, recursive anchors or absurd depth.
    """
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_YAML_DEPTH:
        budget[0] = -1
        return None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # NaN and infinities are not JSON
    if isinstance(value, dict):
        return {_key(k): _json_safe(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_safe(v, budget, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _key(key: Any) -> str:
    """A mapping key as a JSON object key (YAML allows ints, bools, null, ... as keys)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json_scalar_text(key)
    return str(key)


def json_scalar_text(value: Any) -> str:
    """Text of a YAML scalar the way it was most likely written (``true``, ``null``, ``3``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
