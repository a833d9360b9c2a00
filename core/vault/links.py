"""Links: extract them from a note body, and resolve targets to notes the way Obsidian does.

Extraction (used by ``core.vault.notes`` on code-masked text, so links inside code do not count):

- ``[[t]]``, ``[[t|alias]]``, ``[[t#heading]]``, ``[[t#heading|alias]]`` -> kind ``wikilink``;
  ``![[t]]`` -> kind ``embed``. Obsidian writes ``[[target|alias]]`` but Dendron writes
  ``[[label|target]]``: the left part is ``target``, the right part is both ``alias`` and
  ``alt_target`` (its ``#heading`` in ``alt_heading``), and the resolver tries both.
  ``[[#heading]]`` (same note) and attachments (``![[diagram.png]]``) are not recorded.
- Relative Markdown links ``[x](other.md)``, ``[x](../a/b.md#anchor)``, ``[x](<a b.md>)``,
  ``[x](a%20b.md)`` -> kind ``markdown`` (percent-decoded). URLs with a scheme, absolute
  paths, pure anchors and non-``.md`` targets are not note links and are skipped.

Resolution: see ``LinkResolver.resolve``. ``Link`` is defined here and re-exported by
``core.vault.notes`` (which imports the extractors), so ``core.vault.notes.Link`` is the same class.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

ATTACHMENT_EXTENSIONS = frozenset(
    {
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "bmp",
        "ico",
        "pdf",
        "mp3",
        "mp4",
        "webm",
        "wav",
        "ogg",
        "m4a",
        "mov",
        "mkv",
        "flac",
        "canvas",
        "excalidraw",
    }
)
_WIKILINK = re.compile(r"\[\[([^\[\]\n]+)\]\]")
_MD_LINK = re.compile(
    r"\[([^\[\]\n]*(?:\[[^\[\]\n]*\][^\[\]\n]*)*)\]\(\s*(<[^<>\n]+>|[^\s()<>]+(?:\([^\s()]*\)[^\s()<>]*)*)"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?\s*\)"
)
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_DENDRON_VAULT_PREFIX = re.compile(r"dendron://[^/]*/")
_LEADING_DOTS = re.compile(r"^(?:\.\.?/)+")
_DENDRON_STEM = re.compile(r"[\w-]+(?:\.[\w-]+)+")


@dataclass(frozen=True)
class Link:
    """One outgoing link or typed relation, as written (``LinkResolver`` resolves it)."""

    target: str  # the target as written, without '#heading' or '|alias'
    kind: str  # 'wikilink' | 'embed' | 'markdown' | a relation type ('related', 'parent', ...)
    heading: str | None = None
    alias: str | None = None  # display text
    source: str = "body"  # 'body' | 'frontmatter'
    alt_target: str | None = None  # Dendron writes [[label|target]]: the other side, tried if target fails
    alt_heading: str | None = None  # the '#heading' of alt_target ([[label|target#heading]])


def parse_wikilink_inner(inner: str, kind: str, source: str = "body") -> Link | None:
    """A Link from the text between ``[[`` and ``]]``, or None (same-note or attachment link).

    ``left|right``: target/heading come from the left part, ``alias`` is the right part
    and ``alt_target``/``alt_heading`` the right part read as a target (Dendron puts
    the label first).
    """
    left, sep, right = inner.partition("|")
    target, _, heading = left.rstrip("\\").partition("#")
    target = target.strip()
    alias = right.strip() or None if sep else None
    alt_target = alt_heading = None
    if alias is not None:
        alt, _, alt_head = alias.partition("#")
        alt_target, alt_heading = alt.strip() or None, alt_head.strip() or None
    if not target or _is_attachment(target):
        return None
    return Link(target, kind, heading.strip() or None, alias, source, alt_target, alt_heading)


def _is_attachment(target: str) -> bool:
    name = target.rsplit("/", 1)[-1]
    return "." in name and name.rsplit(".", 1)[1].lower() in ATTACHMENT_EXTENSIONS


def _markdown_link(text: str, destination: str) -> Link | None:
    """A relative ``.md`` Markdown link as a Link, or None (URL, absolute, anchor, non-note)."""
    if destination.startswith("<"):
        destination = destination[1:-1]
    if _URL_SCHEME.match(destination) or destination.startswith(("/", "#", "\\")):
        return None
    path, _, anchor = destination.partition("#")
    path = unquote(path.partition("?")[0]).strip()
    if not path.lower().endswith(".md"):
        return None
    return Link(path, "markdown", unquote(anchor).strip() or None, text.strip() or None)


def body_links(masked: str) -> list[Link]:
    """Wikilinks, embeds and relative Markdown links of code-masked text, in body order."""
    found: list[tuple[int, Link]] = []
    for match in _WIKILINK.finditer(masked):
        embed = match.start() > 0 and masked[match.start() - 1] == "!"
        link = parse_wikilink_inner(match.group(1), "embed" if embed else "wikilink")
        if link is not None:
            found.append((match.start(), link))
    for match in _MD_LINK.finditer(masked):
        link = _markdown_link(match.group(1), match.group(2))
        if link is not None:
            found.append((match.start(), link))
    found.sort(key=lambda pair: pair[0])
    return [link for _, link in found]


# ---------------------------------------------------------------- resolution


@dataclass(frozen=True)
class Resolution:
    """How a link resolved: the note, the heading that applies, and which rule matched."""

    rel_path: str
    heading: str | None
    via: str  # 'target' | 'alt_target'
    rule: str  # 'path' | 'name' | 'alias'


def _without_md(path: str) -> str:
    return path[:-3] if path.lower().endswith(".md") else path


def _normalise_target(target: str) -> str:
    """Strip a Dendron ``dendron://vault/`` prefix, use '/' separators, trim spaces."""
    return _DENDRON_VAULT_PREFIX.sub("", target.strip().replace("\\", "/"), count=1).strip()


def _common_dir_depth(a: str, b: str) -> int:
    """Number of leading folders two POSIX paths share."""
    depth = 0
    for x, y in zip(a.split("/")[:-1], b.split("/")[:-1]):
        if x != y:
            break
        depth += 1
    return depth


def is_dendron_name(rel_path: str) -> bool:
    """True when the note's stem is a Dendron hierarchy (``a.b.c``, no spaces)."""
    return _DENDRON_STEM.fullmatch(_without_md(rel_path.rsplit("/", 1)[-1])) is not None


def reads_label_first(dendron_names: int, notes: int) -> bool:
    """True when most of a vault's ``notes`` have Dendron names (``is_dendron_name``)."""
    return notes > 0 and dendron_names * 2 >= notes


def looks_like_dendron(rel_paths: list[str]) -> bool:
    """True when most note stems are Dendron hierarchies (``a.b.c``, no spaces)."""
    return reads_label_first(sum(1 for p in rel_paths if is_dendron_name(p)), len(rel_paths))


class LinkResolver:
    """Built once per build from every note's (rel_path, aliases).

    ``label_first``: whether ``[[left|right]]`` means ``[[label|target]]`` (Dendron) rather
    than ``[[target|alias]]`` (Obsidian). None (the default) decides from the vault: label
    first when ``looks_like_dendron``. A link whose right part carries a ``dendron://``
    prefix is read label-first in any vault.
    """

    def __init__(self, notes: Iterable[tuple[str, tuple[str, ...]]], *, label_first: bool | None = None) -> None:
        self._exact: set[str] = set()
        self._lower: dict[str, list[str]] = defaultdict(list)
        self._names: dict[str, list[str]] = defaultdict(list)
        self._aliases: dict[str, list[str]] = defaultdict(list)
        for rel_path, aliases in notes:
            self._exact.add(rel_path)
            self._lower[rel_path.lower()].append(rel_path)
            self._names[_without_md(rel_path.rsplit("/", 1)[-1]).lower()].append(rel_path)
            for alias in dict.fromkeys(a.strip().lower() for a in aliases):
                if alias:
                    self._aliases[alias].append(rel_path)
        self.label_first = looks_like_dendron(list(self._exact)) if label_first is None else label_first

    def __len__(self) -> int:
        return len(self._exact)

    def resolve(self, link: Link, from_rel_path: str) -> str | None:
        """rel_path of the target note, or None when unresolved.

        Order: exact vault path (with or without .md; Markdown links are first resolved
        against the linking note's folder, wikilinks first against the vault root; then
        the same path case-insensitively), then case-insensitive file name / stem
        (Dendron stems like 'a.b.c' included; a target with folders must match the end
        of the path, as in Obsidian), then alias (case-insensitive). Ties go to the note
        sharing most folders with the linking note, then the shortest path, then the
        first in sort order. ``link.alt_target`` is tried the same way when
        ``link.target`` fails (or first, when the link is read label-first: see the class).
        """
        found = self.resolve_link(link, from_rel_path)
        return found.rel_path if found is not None else None

    def resolve_link(self, link: Link, from_rel_path: str) -> Resolution | None:
        """Like ``resolve`` but says which side and which rule matched (and the heading)."""
        sides = [("target", link.target, link.heading), ("alt_target", link.alt_target, link.alt_heading)]
        if link.alt_target and (self.label_first or link.alt_target.startswith("dendron://")):
            sides.reverse()
        for via, raw, heading in sides:
            if not raw:
                continue
            target = _normalise_target(raw)
            if not target:
                continue
            for rule, lookup in (("path", self._by_path), ("name", self._by_name), ("alias", self._by_alias)):
                hit = lookup(target, link.kind == "markdown", from_rel_path)
                if hit is not None:
                    return Resolution(hit, heading, via, rule)
        return None

    def _pick(self, candidates: list[str], from_rel_path: str) -> str | None:
        if not candidates:
            return None
        return min(candidates, key=lambda p: (-_common_dir_depth(p, from_rel_path), len(p), p))

    def _by_path(self, target: str, relative_first: bool, from_rel_path: str) -> str | None:
        folder = posixpath.dirname(from_rel_path)
        relative = posixpath.normpath(posixpath.join(folder, target))
        rooted = posixpath.normpath(target.lstrip("/"))
        bases = (relative, rooted) if relative_first else (rooted, relative)
        keys = [
            key
            for base in dict.fromkeys(bases)
            if base != ".." and not base.startswith("../")
            for key in (base, base + ".md")
        ]
        for key in keys:
            if key in self._exact:
                return key
        for key in keys:
            hit = self._pick(self._lower.get(key.lower(), []), from_rel_path)
            if hit is not None:
                return hit
        return None

    def _by_name(self, target: str, relative_first: bool, from_rel_path: str) -> str | None:
        stem = _without_md(target.rstrip("/")).lower()
        candidates = self._names.get(stem.rsplit("/", 1)[-1], [])
        if "/" in stem:
            suffix = "/" + _LEADING_DOTS.sub("", stem) + ".md"
            candidates = [c for c in candidates if ("/" + c.lower()).endswith(suffix)]
        return self._pick(candidates, from_rel_path)

    def _by_alias(self, target: str, relative_first: bool, from_rel_path: str) -> str | None:
        return self._pick(self._aliases.get(target.lower(), []), from_rel_path)


# ---------------------------------------------------------------- lookup keys (incremental resolution)

# The key every note has and every link a new note could match whatever its name (a target whose last
# part is ``.`` or ``..``: its path lookup depends on the linking note's folder, not on a name).
ANY_NAME = ""


def link_keys(target: str, alt_target: str | None) -> set[str]:
    """Lookup keys of a link (its ``target`` and ``alt_target``), such that a note can change how the link
    resolves only if one of ``note_keys(note)`` is among them: the lower-cased last part of the target's
    normalised path (the ``path`` rule), its stem (the ``name`` rule) and the whole target (the ``alias``
    rule). A note that is not the link's target can stop being a candidate without changing it (each rule
    takes the first or smallest candidate), so only a note that *appears* needs these keys; one that goes
    is found by the edges that point at it."""
    keys: set[str] = set()
    for raw in (target, alt_target):
        side = _normalise_target(raw) if raw else ""
        if not side:
            continue
        last = posixpath.basename(posixpath.normpath(side))
        keys.add(ANY_NAME if last in ("", ".", "..") else last.lower())
        keys.add(_without_md(side.rstrip("/")).lower().rsplit("/", 1)[-1])
        keys.add(side.lower())
    return keys


def note_keys(rel_path: str, aliases: Iterable[str]) -> set[str]:
    """The lookup keys under which ``LinkResolver`` finds a note (see ``link_keys``): its file name and stem
    lower-cased (a path ``a/b.md`` is found by a target ending ``b`` or ``b.md``), its aliases, and
    ``ANY_NAME``."""
    name = rel_path.rsplit("/", 1)[-1]
    keys = {ANY_NAME, name.lower(), _without_md(name.lower())}
    keys.update(a.strip().lower() for a in aliases if a.strip())
    return keys
