"""A note's names: what a reader sees it called, and the short names it is cited by.

``reader_names`` decides, in this order (each name once, by ``core.ranking.names.name_key``):

- ``frontmatter``: the frontmatter title (the key in any case: ``title``, ``Title``, ``TITLE``);
- an index note (``index.md``, ``README.md``, ``_index.md`` in any case, inside a folder: Hugo,
  mdBook, Docusaurus, one folder per law) is named by its leading H1 (``heading``) and its
  folder's name (``folder``): its file name names nothing;
- any other note keeps Obsidian's rule: its file name (``file``) is its name (a leading H1 is a
  heading: "Help.md" starting ``# Plugins seeking help`` is not named so). Only when the file
  name is a URL slug (letters, no capital, no space: ``ch04-ownership.md``, docs sites) is a leading H1
  that says something else one more name (``heading``), though not the title shown;
- ``alias``: the frontmatter aliases;
- ``abbreviation``: official abbreviations and short names. (1) The parts of the H1's trailing
  parenthesised group (split on `` - ``, ``,``, ``;``) that look like an abbreviation (at most 3
  words and 20 characters, with two capitals or a capital and a digit: ``BGB``, ``ProdSG``,
  ``SGB V``) or that equal a short string value of the frontmatter (the vault says so). (2) The
  short string values of frontmatter keys named for short names (``ABBREVIATION_KEYS``, compared
  lower-cased without ``-``, ``_`` and spaces: ``abbr``, ``short_name``, ``Short Title``,
  ``acronym``, ``jurabk``...).

The first name is the note's title (what results show). A query that is exactly one of a note's
names gives it the full name match (``core.ranking.sparse.name_match``); a folder's name counts so
only where it is the title (``core.index.tables.names``: sibling sections share folder slugs). The leading H1 is the note's first
heading, of level 1, with nothing but blank lines before it in the body (a footer ``# Further
reading`` is a heading, not a name). A template placeholder (``{{title}}``) is no name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from core.ranking.names import name_key
from core.vault.chunking import HeadingSpan

NAME_RULES = ("frontmatter", "heading", "folder", "file", "alias", "abbreviation")
INDEX_FILE_NAMES = frozenset({"index.md", "readme.md", "_index.md"})
ABBREVIATION_KEYS = frozenset(
    {
        "abbr",
        "abbrev",
        "abbreviation",
        "abbreviations",
        "acronym",
        "acronyms",
        "shortname",
        "shortnames",
        "shorttitle",
        "jurabk",
        "amtabk",
    }
)
MAX_SHORT_NAME_CHARS = 40  # a frontmatter value longer than this (or of more than 4 words) is no short name
_TRAILING_GROUP = re.compile(r"\(([^()]{1,80})\)\s*$")
_GROUP_PARTS = re.compile(r"\s+[-\u2013\u2014]\s+|[,;]\s*")
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}|<%.*?%>", re.DOTALL)


def is_placeholder_title(title: str) -> bool:
    """True for an unrendered template title (``{{title}}``, ``Daily {{date}}``, Templater ``<% tp.file.title %>``)."""
    return _PLACEHOLDER.search(title) is not None


def file_stem(rel_path: str) -> str:
    """The file name without ``.md``: the note's name in Obsidian."""
    name = rel_path.rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") else name


def title_keys(mapping: dict[str, Any]) -> list[str]:
    """The frontmatter keys that name the title: ``title``, then the same word in any case (``Title:``)."""
    return ["title", *(k for k in mapping if isinstance(k, str) and k != "title" and k.strip().casefold() == "title")]


def index_folder(rel_path: str) -> str | None:
    """The folder's name when the note is an index note (``docs/intro/index.md`` -> ``intro``), else None."""
    folder, _, name = rel_path.rpartition("/")
    if not folder or name.lower() not in INDEX_FILE_NAMES:
        return None
    return folder.rsplit("/", 1)[-1]


def is_slug(stem: str) -> bool:
    """A file name written for a URL (``getting-started``, ``ch01_ownership``): letters, no capital, no
    space (a daily note's ``2024-01-02`` is no slug)."""
    return any(c.isalpha() for c in stem) and not any(c.isspace() or c.isupper() for c in stem)


def leading_h1(body: str, heads: Sequence[HeadingSpan]) -> str | None:
    """The text of the note's first heading when it is an H1 with only blank lines before it."""
    if not heads or heads[0].level != 1 or body[: heads[0].start].strip():
        return None
    text = heads[0].text.strip()
    return text if text and not is_placeholder_title(text) else None


def _short_strings(value: Any) -> list[str]:
    """A string or list of strings, kept when short enough to be a name."""
    items = value if isinstance(value, list) else [value]
    texts = (item.strip() for item in items if isinstance(item, str))
    return [t for t in texts if t and len(t) <= MAX_SHORT_NAME_CHARS and len(t.split()) <= 4]


def _looks_abbreviated(part: str) -> bool:
    """At most 3 words and 20 characters, with two capitals or a capital and a digit (``BGB``, ``SGB V``)."""
    if len(part) > 20 or len(part.split()) > 3:
        return False
    capitals = sum(c.isupper() for c in part)
    return capitals >= 2 or (capitals == 1 and any(c.isdigit() for c in part))


def abbreviations(mapping: dict[str, Any], h1: str | None) -> list[str]:
    """The official short names of a note: from its H1's trailing ``(...)`` and its short-name keys."""
    values = [v for v in mapping.values() if isinstance(v, str)]
    vault_says = {name_key(v) for v in _short_strings(values)}
    found: list[str] = []
    group = _TRAILING_GROUP.search(h1 or "")
    if group:
        parts = (p.strip() for p in _GROUP_PARTS.split(group.group(1)))
        found += [p for p in parts if p and (_looks_abbreviated(p) or name_key(p) in vault_says)]
    for key, value in mapping.items():
        if isinstance(key, str) and re.sub(r"[\s_-]", "", key.casefold()) in ABBREVIATION_KEYS:
            found += _short_strings(value)
    return found


def reader_names(
    rel_path: str, title: str | None, h1: str | None, aliases: Iterable[str], short: Iterable[str]
) -> tuple[tuple[str, str], ...]:
    """(name, rule) of every name of the note, the title it is shown by first; see the module docstring."""
    folder = index_folder(rel_path)
    stem = file_stem(rel_path)
    if folder is not None:
        own = [(h1, "heading"), (folder, "folder")]
    else:
        own = [(stem, "file"), (h1 if is_slug(stem) else None, "heading")]
    shown = [(title, "frontmatter")] if title and not is_placeholder_title(title) else []
    shown += [(name, rule) for name, rule in own if name][:1]  # the title: the frontmatter's, else H1/folder/file
    rest = [(name, rule) for name, rule in own if name and (name, rule) not in shown]
    folders = [pair for pair in rest if pair[1] == "folder"]  # after the short names: those win a shared key
    candidates = shown + [pair for pair in rest if pair[1] != "folder"]
    candidates += [(a, "alias") for a in aliases] + [(s, "abbreviation") for s in short] + folders
    seen: set[str] = set()
    names: list[tuple[str, str]] = []
    for name, rule in candidates:
        key = name_key(name) if name else ""
        if name and (key not in seen or not names):
            names.append((name, rule))
            seen.add(key)
    return tuple(names)


def name_rows(names: Iterable[tuple[str, str]]) -> tuple[tuple[str, str, int], ...]:
    """(name key, rule, ord) per name with a key, each key once (the first name wins): ``note_names`` rows."""
    rows: dict[str, tuple[str, str, int]] = {}
    for ord_, (name, rule) in enumerate(names):
        key = name_key(name)
        if key and key not in rows:
            rows[key] = (key, rule, ord_)
    return tuple(rows.values())
