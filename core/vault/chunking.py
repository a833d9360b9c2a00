"""Heading-aware chunking of a note body, plus the Markdown block scanner it rests on.

A body is cut into **sections** at ATX headings (``#`` .. ``######`` followed by a space or
the end of the line; ``#`` lines inside fenced code blocks are not headings). Each section
carries its heading path, e.g. ``('Install', 'On Linux')``; the text before the first
heading has the empty path. The heading line belongs to the section it opens; a heading
with nothing under it but a deeper heading (``# Get-Item`` then ``## SYNOPSIS``) joins that
child's section, so no chunk is a lone title.

A section longer than ``size`` characters is split greedily into pieces of at most ``size``
characters, cutting at the last boundary inside the window, preferring in turn: a blank
line (paragraph), a line break, a sentence end (``.``, ``!``, ``?``), whitespace (word);
a single word longer than the window is hard-cut. A boundary is only taken when it
leaves the piece at least ``max(overlap + 1, size // 3)`` characters long, so pieces are
not tiny and the walk always moves forward. Each next piece starts about ``overlap``
characters before the previous piece's end, snapped forward to the start of a word.

Offsets: ``start``/``end`` are character offsets into the body and, always,
``chunk.text == body[chunk.start:chunk.end]``. Chunk ranges are trimmed: a chunk never
starts or ends with whitespace, and whitespace-only sections produce no chunk. Together
the chunks cover every non-whitespace character of the body.

``scan_blocks``, ``heading_spans``, ``fenced_code_ranges`` and ``mask_code`` are shared with
``core.vault.notes`` (tags, links and the title must ignore code the same way chunking does).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import UsageError

CHUNKER_VERSION = "heading-v1"

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)")
_WHITESPACE = re.compile(r"\s+")
# Both patterns start with a literal character, so that re's literal-prefix search finds
# candidates at C speed: "`[`]*" is 6x faster than "`+" on the PowerShell docs, and a
# newline-led line pattern (over "\n" + text) 3x faster than a MULTILINE "^".
_INLINE_CODE = re.compile(r"`[`]*")
_BLOCK_LINE = re.compile(r"\n {0,3}(?:`{3}|~{3}|#)[^\n]*")


@dataclass(frozen=True)
class Chunk:
    ord: int  # 0-based position in the note
    heading_path: tuple[str, ...]  # e.g. ('Install', 'On Linux')
    text: str  # chunk text (body only, no frontmatter), overlap included
    start: int  # char offsets of text in the body: text == body[start:end]
    end: int


@dataclass(frozen=True)
class HeadingSpan:
    """One ATX heading: the line's char range in the text, its level and its text."""

    start: int
    end: int  # end of the line, without the newline
    level: int
    text: str


@functools.lru_cache(maxsize=4)
def scan_blocks(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[HeadingSpan, ...]]:
    """One pass over the text: fenced code ranges and the ATX headings outside them.

    Cached for the last few texts: parsing a note, listing its headings and chunking it
    all ask for the same body, and the scan is the costliest part of each (the result is
    immutable, and a str caches its own hash, so a repeated call costs a dict lookup).

    A fence opens with 3+ backticks (no backtick in the info string) or 3+ tildes, and
    closes with a line of the same character at least as long; an unclosed fence runs to
    the end of the text (CommonMark). Only lines that can open/close a fence or be a
    heading are looked at (one regex finds them), which keeps this fast on big notes.
    """
    fences: list[tuple[int, int]] = []
    heads: list[HeadingSpan] = []
    fence: tuple[str, int, int] | None = None  # (char, length, start offset)
    for match in _BLOCK_LINE.finditer("\n" + text):  # the match starts one before its line: at its offset in text
        offset, line = match.start(), match.group()[1:].rstrip("\r")
        if fence is not None:
            char, length, start = fence
            stripped = line.strip()
            if stripped[0] == char and set(stripped) == {char} and len(stripped) >= length:
                fences.append((start, offset + len(line)))
                fence = None
            continue
        opened = _FENCE_OPEN.fullmatch(line)
        if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
            fence = (opened.group(1)[0], len(opened.group(1)), offset)
            continue
        head = _heading(line, offset)
        if head is not None:
            heads.append(head)
    if fence is not None:
        fences.append((fence[2], len(text)))
    return tuple(fences), tuple(heads)


def _heading(line: str, offset: int) -> HeadingSpan | None:
    """Parse one line as an ATX heading, or None."""
    match = _ATX.fullmatch(line)
    if match is None:
        return None
    content = match.group(2) or ""
    content = _ATX_CLOSING.sub("", content).strip()
    return HeadingSpan(offset, offset + len(line), len(match.group(1)), content)


def fenced_code_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """Char ranges ``[start, end)`` of fenced code blocks (fence lines included)."""
    return scan_blocks(text)[0]


def heading_spans(text: str) -> tuple[HeadingSpan, ...]:
    """Every ATX heading outside fenced code, in order."""
    return scan_blocks(text)[1]


def mask_code(body: str, fences: Sequence[tuple[int, int]] | None = None) -> str:
    """``body`` with fenced code and inline code spans blanked (same length, same offsets)."""
    parts: list[str] = []
    pos = 0
    for start, end in fenced_code_ranges(body) if fences is None else fences:
        parts += [body[pos:start], _blank(body[start:end])]
        pos = end
    parts.append(body[pos:])
    return _mask_inline_code("".join(parts))


def _blank(text: str) -> str:
    """Spaces in place of every character but newlines (keeps line structure)."""
    if "\n" not in text:  # most inline code spans
        return " " * len(text)
    return "\n".join(" " * len(line) for line in text.split("\n"))


def _mask_inline_code(text: str) -> str:
    """Blank `code spans`: a run of n backticks up to the next run of exactly n, same paragraph."""
    runs = [m.span() for m in _INLINE_CODE.finditer(text)]
    closer: list[int | None] = [None] * len(runs)
    last_seen: dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        length = runs[i][1] - runs[i][0]
        closer[i] = last_seen.get(length)
        last_seen[length] = i
    parts: list[str] = []
    pos = i = 0
    while i < len(runs):
        j = closer[i]
        if j is None or _PARAGRAPH_BREAK.search(text, runs[i][1], runs[j][0]):
            i += 1
            continue
        parts += [text[pos : runs[i][0]], _blank(text[runs[i][0] : runs[j][1]])]
        pos = runs[j][1]
        i = j + 1
    parts.append(text[pos:])
    return "".join(parts)


def headings(body: str) -> list[str]:
    """Every ATX heading text of the body, in order (code fences ignored)."""
    return [h.text for h in heading_spans(body)]


def _sections(body: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """(start, end, heading_path) per section; each heading opens a section.

    A section holding nothing but its heading line, directly followed by a deeper heading,
    is merged into that child section (e.g. ``# Get-Item`` + ``## SYNOPSIS``), so no chunk
    is a lone title; the child's heading path wins.
    """
    out: list[tuple[int, int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    start, head_end, level = 0, 0, 0
    pending: int | None = None  # start of a lone heading waiting for its child
    for head in heading_spans(body):
        lone = level > 0 and not body[head_end : head.start].strip()
        sec_start = start if pending is None else pending
        if lone and head.level > level:
            pending = sec_start
        else:
            out.append((sec_start, head.start, tuple(t for _, t in stack)))
            pending = None
        while stack and stack[-1][0] >= head.level:
            stack.pop()
        stack.append((head.level, head.text))
        start, head_end, level = head.start, head.end, head.level
    out.append((start if pending is None else pending, len(body), tuple(t for _, t in stack)))
    return out


def _trim(body: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` so it neither starts nor ends with whitespace."""
    while start < end and body[start].isspace():
        start += 1
    while end > start and body[end - 1].isspace():
        end -= 1
    return start, end


def _last_boundary(window: str, lo: int) -> int | None:
    """Best cut offset in ``window`` (relative, at least ``lo``), or None for a hard cut.

    Preference: paragraph break, line break, sentence end, whitespace. The piece before
    the cut is ``window[:cut]``.
    """
    paragraph = [m.start() for m in _PARAGRAPH_BREAK.finditer(window, lo)]
    if paragraph:
        return paragraph[-1]
    line = window.rfind("\n", lo)
    if line >= 0:
        return line
    sentence = [m.end() for m in _SENTENCE_END.finditer(window, lo)]
    if sentence:
        return sentence[-1]
    space = [m.start() for m in _WHITESPACE.finditer(window, lo)]
    return space[-1] if space else None


def _next_start(body: str, cut: int, end: int, overlap: int, floor: int) -> int:
    """Start of the next piece: ``overlap`` chars before ``cut``, snapped forward to a word start."""
    pos = max(cut - overlap, floor + 1)
    while pos < cut and (body[pos].isspace() or not body[pos - 1].isspace()):
        pos += 1
    while pos < end and body[pos].isspace():
        pos += 1
    return pos


def _split_section(body: str, start: int, end: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Pieces ``[(start, end)]`` of at most ``size`` chars covering the trimmed section."""
    pieces: list[tuple[int, int]] = []
    lo = max(overlap + 1, size // 3)
    pos = start
    while pos < end:
        if end - pos <= size:
            pieces.append((pos, end))
            break
        window = body[pos : pos + size + 1]  # a boundary right after the window still fits
        rel = _last_boundary(window, lo)
        cut = pos + (rel if rel is not None and rel <= size else size)
        piece = _trim(body, pos, cut)
        if piece[1] > piece[0]:
            pieces.append(piece)
        pos = _next_start(body, cut, end, overlap, pos)
    return pieces


def chunk_body(body: str, *, size: int = 600, overlap: int = 60) -> list[Chunk]:
    """Cut ``body`` into heading-aware chunks of at most ``size`` chars (see module doc)."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise UsageError(f"chunk size must be a positive integer, got {size!r}", size=size)
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < size:
        raise UsageError(f"chunk overlap must be an integer in [0, size), got {overlap!r}", overlap=overlap, size=size)
    chunks: list[Chunk] = []
    for sec_start, sec_end, path in _sections(body):
        start, end = _trim(body, sec_start, sec_end)
        if start >= end:
            continue
        for piece_start, piece_end in _split_section(body, start, end, size, overlap):
            chunks.append(Chunk(len(chunks), path, body[piece_start:piece_end], piece_start, piece_end))
    return chunks
