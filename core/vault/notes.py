"""Parse one Markdown note: frontmatter, metadata fields, tags, links, title.

``parse_note(rel_path, data)`` never raises on bad input. What went wrong is recorded as
``Problem`` values with a stable snake_case ``reason``; the builder lists them in its
report. Reason codes (``PROBLEM_REASONS`` holds them all, including the scanner's):

    binary                  NUL byte in the first 8 KiB: the file is skipped
                            (``parse_note`` returns None; the caller records
                            ``skip_problem(rel_path, data)``)
    utf8_invalid            not valid UTF-8: decoded with U+FFFD replacements, indexed
    empty                   the file is empty or whitespace only: indexed, title from the name
    yaml_invalid            the frontmatter is not valid YAML (or absurdly large/deep):
                            metadata empty, body = text after the closing fence
    frontmatter_not_mapping the frontmatter is valid YAML but not a mapping: metadata empty
    frontmatter_unclosed    a leading ``---`` line with no closing ``---``/``...``:
                            the whole text is the body
    classification_unreadable
                            the frontmatter (closed or not, parsable or not) mentions a
                            classification that cannot be read exactly: the note gets the
                            reserved classification ``unreadable`` (fails closed, see below)
    date_invalid            a date field could not be read as a date: raw value kept in extra
    field_invalid           a known field has an unusable shape (e.g. a mapping as title):
                            raw value kept in extra
    too_large, unreadable, symlink_outside_vault, ignore_file_invalid
                            recorded by ``core.vault.scan``

Decisions worth knowing:

- YAML is loaded with the safe loader (C when available) but with timestamps left as
  strings, so an impossible date (``2021-13-45``) is a ``date_invalid`` on that field
  rather than a failure of the whole frontmatter (``core.vault.frontmatter``); dates are
  normalised by ``core.vault.dates``.
- Synonyms (``description|summary|desc``, ``type|kind``, ``namespace|project``): the
  first present, non-empty one is used; the others stay in ``extra``.
- ``note_type``, ``status``, ``volatility`` and ``classification`` are stripped and
  lower-cased (they are filter values; access control compares classifications exactly).
- Classification fails closed (``read_classification``): it is read only from exactly one
  top-level key spelled ``classification`` holding a non-empty string, in frontmatter that
  parsed cleanly. Anything else that mentions a classification - a YAML error, an unclosed
  or indented fence, a list or mapping value (``[secret]``), a differently cased key
  (``Classification:``), a duplicated key, an empty or non-string value - gives the reserved
  value ``unreadable`` (``UNREADABLE_CLASSIFICATION``) and a ``classification_unreadable``
  problem: a caller that restricts classifications sees such a note only when it lists
  ``unreadable`` explicitly.
- Inline tags follow Obsidian (``#`` at the start or after whitespace; letters, digits,
  ``_ - /``; at least one non-digit) and also allow inner dots for Dendron's
  hierarchical tags (``#role.bugcatcher``); trailing dots are sentence punctuation.
- ``supersedes``/``superseded_by`` are kept as tuples of targets and also emitted as
  frontmatter Links of those kinds, so the edge table holds the succession too.
- ``[[#heading]]`` (a link into the same note) and wikilinks/embeds of attachments
  (``![[diagram.png]]``) are not note links and are not recorded.
- ``Link`` and link extraction live in ``core.vault.links`` (``core.vault.notes.Link`` is the same class).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from core.index.tables.notes import DATE_FIELD_KEYS
from core.vault.chunking import mask_code, scan_blocks
from core.vault.dates import normalise_date
from core.vault.frontmatter import json_scalar_text, load_frontmatter, split_frontmatter
from core.vault.links import Link, body_links, parse_wikilink_inner
from core.vault.names import abbreviations, file_stem, leading_h1, reader_names, title_keys
from core.vault.problems import Problem

PROBLEM_REASONS: frozenset[str] = frozenset(
    {
        "binary",
        "utf8_invalid",
        "empty",
        "yaml_invalid",
        "frontmatter_not_mapping",
        "frontmatter_unclosed",
        "date_invalid",
        "field_invalid",
        "classification_unreadable",
        "too_large",
        "unreadable",
        "symlink_outside_vault",
        "ignore_file_invalid",
    }
)
BINARY_SNIFF_BYTES = 8192
DATE_FIELDS = tuple(DATE_FIELD_KEYS)  # created, updated, source_date, date; each read from its keys
RELATION_FIELDS = ("related", "links", "parent")
# The classification a note gets when its frontmatter mentions one that cannot be read exactly.
UNREADABLE_CLASSIFICATION = "unreadable"
# Any mention of the word (any case) in a frontmatter that did not parse cleanly, and a key-like
# mention (``classification:`` at a line start or after ``{``/``,``, optionally quoted) in one that did.
_CLASSIFICATION_WORD = re.compile(r"classification", re.IGNORECASE)
_CLASSIFICATION_KEY = re.compile(r"(?:^|[{,])[ \t]*[\"']?classification[\"']?[ \t]*:", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class ParsedNote:
    rel_path: str  # POSIX path relative to the vault
    title: str
    description: str | None
    note_type: str | None
    tags: tuple[str, ...]  # lower-cased, no '#', unique, sorted
    dates: dict[str, str]  # keys among created, updated, source_date, date -> ISO-8601
    volatility: str | None
    status: str | None
    classification: str | None
    namespace: str | None
    supersedes: tuple[str, ...]
    superseded_by: tuple[str, ...]
    aliases: tuple[str, ...]
    links: tuple[Link, ...]
    extra: dict[str, Any]  # every other frontmatter key, JSON-safe
    body: str  # text after the frontmatter
    problems: tuple[Problem, ...] = field(default=())
    frontmatter_id: str | None = None  # frontmatter 'id' (also kept in extra)
    body_line: int = 0  # lines of the file before the body (the frontmatter block): file line = body line + this
    # every name a reader knows the note by, with the rule that gave it (NAME_RULES), the shown title first
    names: tuple[tuple[str, str], ...] = ()
    date_keys: dict[str, str] = field(default_factory=dict)  # date field -> the other key it was read from


_TAG = re.compile(r"#([\w/-]+(?:\.[\w/-]+)*)")
_TAG_NON_DIGIT = re.compile(r"[^\d.]")


# ---------------------------------------------------------------- bytes -> text


def is_binary(data: bytes) -> bool:
    """True when the first 8 KiB hold a NUL byte (a binary file named ``.md``)."""
    return b"\x00" in data[:BINARY_SNIFF_BYTES]


def skip_problem(rel_path: str, data: bytes) -> Problem:
    """The ``binary`` Problem to record for a file ``parse_note`` returned None for."""
    offset = data.find(b"\x00", 0, BINARY_SNIFF_BYTES)
    return Problem(rel_path, "binary", f"NUL byte at offset {offset}")


def decode_text(rel_path: str, data: bytes) -> tuple[str, list[Problem]]:
    """UTF-8 text without a BOM; invalid bytes become U+FFFD with a ``utf8_invalid`` problem."""
    try:
        text = data.decode("utf-8")
        problems: list[Problem] = []
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        problems = [Problem(rel_path, "utf8_invalid", f"invalid byte at offset {exc.start}")]
    return text.removeprefix("\ufeff"), problems


# ---------------------------------------------------------------- frontmatter fields


@dataclass
class _Meta:
    """Frontmatter fields being pulled out of ``extra`` (which starts as the whole mapping)."""

    rel_path: str
    extra: dict[str, Any]
    problems: list[Problem] = field(default_factory=list)

    def invalid(self, key: str, expected: str) -> None:
        got = type(self.extra[key]).__name__
        self.problems.append(Problem(self.rel_path, "field_invalid", f"{key}: expected {expected}, got {got}"))

    def text(self, *keys: str) -> str | None:
        """First present non-empty scalar among ``keys``; consumed keys leave ``extra``."""
        for key in keys:
            if key not in self.extra:
                continue
            value = self.extra[key]
            if isinstance(value, (dict, list)) and value:
                self.invalid(key, "text")
                continue
            del self.extra[key]
            text = "" if value is None or value == [] or value == {} else json_scalar_text(value).strip()
            if text:
                return text
        return None

    def items(self, key: str) -> list[str]:
        """A string or a (nested) list of scalars as a flat list of non-empty strings."""
        if key not in self.extra:
            return []
        value = self.extra[key]
        if isinstance(value, dict):
            self.invalid(key, "a list or a string")
            return []
        del self.extra[key]
        return _flatten(value)


def _flatten(value: Any) -> list[str]:
    """Scalars of a value, depth-first; ``[[x]]`` written unquoted in YAML is a nested list."""
    if value is None:
        return []
    if isinstance(value, list):
        return [item for element in value for item in _flatten(element)]
    if isinstance(value, dict):
        return [item for element in value.values() for item in _flatten(element)]
    text = json_scalar_text(value).strip()
    return [text] if text else []


def _strip_brackets(text: str) -> str:
    """``[[x]]`` -> ``x`` (relation targets may be written as wikilinks)."""
    if text.startswith("[[") and text.endswith("]]"):
        return text[2:-2].strip()
    return text


def _note_refs(items: list[str]) -> tuple[str, ...]:
    """Note references (``x``, ``[[x]]``, ``[[x#h|label]]``) reduced to their target ``x``."""
    refs = (_strip_brackets(item).partition("|")[0].partition("#")[0].strip() for item in items)
    return tuple(dict.fromkeys(ref for ref in refs if ref))


def _frontmatter_tags(meta: _Meta) -> list[str]:
    """Frontmatter tags: a list of tags, or one string split on commas and whitespace."""
    raw = meta.extra.get("tags")
    items = meta.items("tags")
    if isinstance(raw, str):
        items = re.split(r"[,\s]+", raw)
    tags = (item.strip().lstrip("#").strip().lower() for item in items)
    return [tag for tag in tags if tag]


def _frontmatter_dates(meta: _Meta) -> tuple[dict[str, str], dict[str, str]]:
    """The four date fields as ISO text, and the key each was read from where that is not the field's
    own name (``updated`` from ``lastmod``): per field the first of its keys (``DATE_FIELD_KEYS``)
    present with a readable date; an unreadable one stays raw in ``extra`` (``date_invalid``), and so
    do the keys after the one that won."""
    dates: dict[str, str] = {}
    keys: dict[str, str] = {}
    for name, names in DATE_FIELD_KEYS.items():
        for key in names:
            if key not in meta.extra or meta.extra[key] in (None, ""):
                meta.extra.pop(key, None)
                continue
            iso = normalise_date(meta.extra[key])
            if iso is None:
                meta.problems.append(Problem(meta.rel_path, "date_invalid", f"{key}: {meta.extra[key]!r}"[:200]))
                continue
            dates[name] = iso
            del meta.extra[key]
            if key != name:
                keys[name] = key
            break
    return dates, keys


def _relation_links(meta: _Meta) -> list[Link]:
    """``related``/``links``/``parent`` and the ``relations:`` map as frontmatter Links."""
    typed: list[tuple[str, list[str]]] = [(key, meta.items(key)) for key in RELATION_FIELDS]
    if "relations" in meta.extra:
        relations = meta.extra["relations"]
        if isinstance(relations, dict):
            del meta.extra["relations"]
            typed += [(kind.strip().lower(), _flatten(targets)) for kind, targets in relations.items()]
        elif relations is not None:
            meta.invalid("relations", "a mapping of relation type to targets")
    links: list[Link] = []
    for kind, targets in typed:
        for target in targets:
            link = parse_wikilink_inner(_strip_brackets(target), kind or "related", "frontmatter")
            if link is not None:
                links.append(link)
    return links


def _lower(text: str | None) -> str | None:
    return text.lower() if text is not None else None


def _extract_fields(meta: _Meta) -> dict[str, Any]:
    """Pull the meaningful fields out of ``meta.extra`` (what remains there is ``extra``).

    Returns ParsedNote keyword arguments, plus ``title`` (None when the frontmatter has none).
    """
    raw_id = meta.extra.get("id")
    dates, date_keys = _frontmatter_dates(meta)
    fields: dict[str, Any] = dict(
        title=meta.text(*title_keys(meta.extra)),
        description=meta.text("description", "summary", "desc"),
        note_type=_lower(meta.text("type", "kind")),
        tags=tuple(_frontmatter_tags(meta)),
        dates=dates,
        date_keys=date_keys,
        volatility=_lower(meta.text("volatility")),
        status=_lower(meta.text("status")),
        classification=None,  # read_classification decides (fails closed)
        namespace=meta.text("namespace", "project"),
        supersedes=_note_refs(meta.items("supersedes")),
        superseded_by=_note_refs(meta.items("superseded_by")),
        aliases=tuple(dict.fromkeys(meta.items("aliases"))),
        links=tuple(_relation_links(meta)),
        frontmatter_id=None if raw_id is None or isinstance(raw_id, (dict, list)) else json_scalar_text(raw_id),
    )
    fields["links"] += tuple(
        Link(target, kind, source="frontmatter") for kind in ("supersedes", "superseded_by") for target in fields[kind]
    )
    return fields


# ---------------------------------------------------------------- classification (fails closed)

_YAML_FAILURES = frozenset({"yaml_invalid", "frontmatter_not_mapping"})
_FENCE_CHARS = ("---", "...")


# What str.splitlines splits on: the loose region is found line by line without a list of all lines.
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _line_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``text``, the lines ``text.splitlines()`` gives, found lazily."""
    pos = 0
    for brk in _LINE_BREAK.finditer(text):
        yield pos, brk.start()
        pos = brk.end()
    if pos < len(text):
        yield pos, len(text)


def _loose_region(text: str, yaml_text: str | None, unclosed: bool) -> str:
    """The text that may be frontmatter when none parsed cleanly: the fenced YAML, the whole text
    after an unclosed fence, an indented (or blank-line-preceded) fenced block, or a first line
    that is a bare ``classification:`` key."""
    if yaml_text is not None:
        return yaml_text
    if unclosed:
        return text
    spans = _line_spans(text)
    first = next(((a, b) for a, b in spans if text[a:b].strip()), None)
    if first is None:
        return ""
    line = text[first[0] : first[1]]
    if line.strip().startswith("---"):
        end = next((a for a, b in spans if text[a:b].strip() in _FENCE_CHARS), len(text))
        return text[first[1] : end]
    return line if _CLASSIFICATION_KEY.match(line.lstrip()) else ""


def read_classification(
    rel_path: str, text: str, yaml_text: str | None, mapping: dict[str, Any], *, clean: bool, unclosed: bool
) -> tuple[str | None, Problem | None]:
    """(classification, problem): the lower-cased value of exactly one top-level ``classification``
    key holding a non-empty string in cleanly parsed frontmatter; None when nothing mentions a
    classification; else ``UNREADABLE_CLASSIFICATION`` with a ``classification_unreadable`` problem."""

    def unreadable(why: str) -> tuple[str, Problem]:
        return UNREADABLE_CLASSIFICATION, Problem(rel_path, "classification_unreadable", why)

    if yaml_text is not None and clean:
        keys = [k for k in mapping if k.strip().lower() == "classification"]
        mentions = len(_CLASSIFICATION_KEY.findall(yaml_text))
        if not keys and not mentions:
            return None, None
        if keys != ["classification"]:
            return unreadable(f"classification key(s) {keys!r}: only one lower-case 'classification' key is read")
        if mentions > 1:
            return unreadable(f"classification mentioned {mentions} times (duplicated or nested key)")
        value = mapping["classification"]
        if not isinstance(value, str) or not value.strip():
            return unreadable(f"classification must be a non-empty string, got {type(value).__name__}")
        if any(unicodedata.category(ch) == "Cc" for ch in value.strip()):
            return unreadable("classification holds a control character")
        return value.strip().lower(), None
    region = _loose_region(text, yaml_text, unclosed)
    if _CLASSIFICATION_WORD.search(region):
        return unreadable("the frontmatter that mentions a classification could not be read")
    return None, None


@dataclass(frozen=True)
class Frontmatter:
    """A note's frontmatter as the build reads it, classification included."""

    yaml_text: str | None  # the text between the fences (None: no closed frontmatter)
    body: str  # the text after it
    mapping: dict[str, Any]  # the YAML as data ({} when absent or unreadable)
    problems: tuple[Problem, ...]  # frontmatter_unclosed, yaml_invalid, frontmatter_not_mapping
    classification: str | None  # lower-cased; UNREADABLE_CLASSIFICATION when it cannot be read exactly
    classification_problem: Problem | None


def read_frontmatter(rel_path: str, text: str) -> Frontmatter:
    """The frontmatter and classification of a note's decoded text: the one reader of both, used by
    the build (``parse_note``) and by every tool that reads a note from the vault again."""
    yaml_text, body, unclosed = split_frontmatter(text)
    problems: list[Problem] = []
    if unclosed:
        problems.append(Problem(rel_path, "frontmatter_unclosed", "no closing '---' or '...' line"))
    mapping: dict[str, Any] = {}
    if yaml_text is not None:
        mapping, yaml_problems = load_frontmatter(rel_path, yaml_text)
        problems += yaml_problems
    classification, unreadable = read_classification(
        rel_path,
        text,
        yaml_text,
        mapping,
        clean=not any(p.reason in _YAML_FAILURES for p in problems),
        unclosed=unclosed,
    )
    return Frontmatter(yaml_text, body, mapping, tuple(problems), classification, unreadable)


# ---------------------------------------------------------------- body: code, tags, links


def inline_tags(masked: str) -> set[str]:
    """Obsidian-style inline ``#tags`` (plus Dendron's dotted ones) of code-masked text."""
    tags: set[str] = set()
    for match in _TAG.finditer(masked):
        if match.start() > 0 and not masked[match.start() - 1].isspace():
            continue  # 'a#b', URL fragments, '##' of a heading
        tag = match.group(1).rstrip(".").lower()
        if _TAG_NON_DIGIT.search(tag):
            tags.add(tag)
    return tags


# ---------------------------------------------------------------- the note


def stem(rel_path: str) -> str:
    """The file name without ``.md``: the note's name in Obsidian."""
    return file_stem(rel_path)


def note_title(title: str | None, rel_path: str, h1: str | None = None) -> str:
    """The displayed name (``core.vault.names``): the frontmatter title; else, for an index note
    (``index.md``/``README.md``/``_index.md`` in a folder), its leading H1, else its folder's name;
    else the file name (stem), as Obsidian shows it. A template placeholder is not a title."""
    return reader_names(rel_path, title, h1, (), ())[0][0]


def note_names(note: ParsedNote) -> tuple[str, ...]:
    """Every name a note is known by (``ParsedNote.names``: title, file or folder name, H1, aliases,
    abbreviations), without repeats."""
    if not note.names:  # a ParsedNote made by hand: Obsidian's names
        return tuple(dict.fromkeys((note.title, stem(note.rel_path), *note.aliases)))
    return tuple(dict.fromkeys((note.title, *(name for name, _ in note.names))))


_NAME_WORD = re.compile(r"[^\W_]+")


def names_text(note: ParsedNote) -> str:
    """The text of the note's name field: title, aliases, and the words of its other names (file or
    folder name, H1, abbreviations) that they do not already hold (``dendron.topic.schema`` under the
    title "Schemas" adds "dendron topic schema"; a file named like its title adds nothing, so a name
    does not count twice)."""
    named = " ".join((note.title, *note.aliases))
    have = {w.casefold() for w in _NAME_WORD.findall(named)}
    others = [n for n in note_names(note) if n != note.title and n not in note.aliases]
    extra = [w for n in others for w in _NAME_WORD.findall(n) if w.casefold() not in have]
    return " ".join([named, *dict.fromkeys(extra)]) if extra else named


def parse_note(rel_path: str, data: bytes) -> ParsedNote | None:
    """Parse raw file bytes. Never raises for bad input: problems go in ``.problems``.

    Returns None only when the file must be skipped (binary); the caller records the
    Problem via ``skip_problem``.
    """
    if is_binary(data):
        return None
    text, problems = decode_text(rel_path, data)
    if not text.strip():
        problems.append(Problem(rel_path, "empty", "file is empty or whitespace only"))
    front = read_frontmatter(rel_path, text)
    body = front.body
    problems += front.problems
    meta = _Meta(rel_path, dict(front.mapping))
    fields = _extract_fields(meta)
    problems += meta.problems
    fences, heads = scan_blocks(body)
    masked = mask_code(body, fences)
    meta.extra.pop("classification", None)
    classification = front.classification
    if front.classification_problem is not None:
        problems.append(front.classification_problem)
    h1 = leading_h1(body, heads)
    names = reader_names(rel_path, fields["title"], h1, fields["aliases"], abbreviations(front.mapping, h1))
    fields.update(
        classification=classification,
        title=names[0][0],
        names=names,
        tags=tuple(sorted(set(fields["tags"]) | inline_tags(masked))),
        links=fields["links"] + tuple(body_links(masked)),
    )
    body_line = text.count("\n", 0, len(text) - len(body))
    return ParsedNote(
        rel_path=rel_path, extra=meta.extra, body=body, problems=tuple(problems), body_line=body_line, **fields
    )
