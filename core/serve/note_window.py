"""The window of a note ``read_note`` returns: its lines found on demand, a section or a line
range, and the numbered lines that fit the caller's byte budget (as JSON text).

Lines are 1-based and count every line of the file (frontmatter included), the numbering of a
hit's line range. A large note's window is served without a list of all its lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from core.errors import SectionNotFoundError
from core.serve import schema as s

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_COUNT_BLOCK = 1 << 20  # characters counted at a time when looking for a line


class NoteLines:
    """The lines of a note's text, found on demand: a window of a large note is served without a
    list of all its lines (``str.split`` of a 16 MiB note of short lines costs hundreds of MB)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.total = text.count("\n") + (0 if not text or text.endswith("\n") else 1)

    def offset(self, n: int) -> int:
        """Where 1-based line ``n`` starts (the text's end past its last line)."""
        text, pos, need = self.text, 0, n - 1
        while need > 0:  # whole blocks first, counted at C speed
            end = min(len(text), pos + _COUNT_BLOCK)
            found = text.count("\n", pos, end)
            if found >= need or end == len(text):
                break
            need, pos = need - found, end
        for _ in range(need):
            nl = text.find("\n", pos)
            if nl < 0:
                return len(text)
            pos = nl + 1
        return pos

    def iter_from(self, n: int) -> Iterator[tuple[int, str]]:
        """(number, text) of line ``n`` and every line after it."""
        text, pos = self.text, self.offset(n)
        while n <= self.total:
            nl = text.find("\n", pos)
            end = len(text) if nl < 0 else nl
            yield n, text[pos:end]
            n, pos = n + 1, end + 1


def json_bytes(value: Any) -> int:
    return len(s.dumps(value).encode("utf-8"))


def fit_lines(lines: NoteLines, first: int, last: int, budget: int) -> tuple[str, int]:
    """The numbered lines ``first..last`` whose text, as a JSON string, fits ``budget`` bytes, and
    the last line returned. One line longer than the budget is cut (and marked), so paging moves on."""
    out: list[str] = []
    used, end = 2, first - 1  # the JSON string's quotes
    for n, line in lines.iter_from(first):
        if n > last:
            break
        entry = f"{n}: {line}"
        size = json_bytes(entry) - 2 + (2 if out else 0)  # escaped text, and the escaped newline before it
        if used + size > budget:
            if not out:
                out.append(_cut(entry, budget - used - len(" …".encode())))
                end = n
            break
        out.append(entry)
        used, end = used + size, n
    return "\n".join(out), end


def _cut(entry: str, room: int) -> str:
    """``entry`` cut to at most ``room`` bytes as escaped JSON text, marked with an ellipsis."""
    cut = entry.encode("utf-8")[: max(0, room)].decode("utf-8", "ignore")
    while cut and json_bytes(cut) - 2 > room:
        cut = cut[: len(cut) * 9 // 10]
    return cut + " …"


def line_range(lines: NoteLines, body_first: int, a: dict[str, Any]) -> tuple[int, int, str | None]:
    """(first, last) 1-based file lines to return, and the section heading when one was asked for."""
    if "section" not in a:
        first = a.get("from_line", body_first)
        return first, min(lines.total, first + a["max_lines"] - 1), None
    heads, fence = [], False
    for n, line in lines.iter_from(body_first):
        if _FENCE.match(line):
            fence = not fence
        m = None if fence else _HEADING.match(line)
        if m:
            heads.append((n, len(m.group(1)), m.group(2).strip()))
    want = a["section"].strip().lstrip("#").strip().lower()
    for i, (n, level, name) in enumerate(heads):
        if name.lower() == want:
            end = next((h[0] - 1 for h in heads[i + 1 :] if h[1] <= level), lines.total)
            first = a.get("from_line", n)
            return first, min(end, first + a["max_lines"] - 1), name
    raise SectionNotFoundError(
        f"no heading {a['section']!r} in the note", headings=[h[2] for h in heads][:50], section=a["section"]
    )
