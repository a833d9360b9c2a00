"""One reader of a note's frontmatter and classification (issue 28, case 1): ``read_frontmatter``
is what the build (``parse_note``) and every tool that reads a note again use; finding the loose
region of an unparsable frontmatter does not split the whole note into lines."""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from core.vault.notes import _CLASSIFICATION_KEY, _CLASSIFICATION_WORD, _loose_region, parse_note, read_frontmatter


def _reference_region(text: str) -> str:
    """The loose region as it was computed before (a list of every line of the note)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return ""
    if lines[first].strip().startswith("---"):
        end = next((j for j in range(first + 1, len(lines)) if lines[j].strip() in ("---", "...")), len(lines))
        return "\n".join(lines[first + 1 : end])
    return lines[first] if _CLASSIFICATION_KEY.match(lines[first].lstrip()) else ""


PIECES = st.sampled_from(
    ["---", "...", " ---", "classification: secret", "Classification:", "text", " ", "\t", "\n", "\r", "\r\n",
     "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "#"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=14).map("".join))
def test_the_loose_region_mentions_a_classification_exactly_when_the_line_list_did(text):
    found = bool(_CLASSIFICATION_WORD.search(_loose_region(text, None, False)))
    assert found == bool(_CLASSIFICATION_WORD.search(_reference_region(text)))


@settings(max_examples=200, deadline=None)
@given(st.lists(PIECES, max_size=14).map("".join))
def test_parse_note_and_the_tools_read_the_same_classification(text):
    note = parse_note("n.md", text.encode())
    assert note is not None and note.classification == read_frontmatter("n.md", text).classification


def test_the_classification_of_a_note_of_many_short_lines_is_read_without_a_line_list():
    text = "\n" + "xy\n" * 1_000_000  # 3 MB, no frontmatter
    tracemalloc.start()
    try:
        front = read_frontmatter("n.md", text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert front.classification is None and peak < len(text)
