"""core.vault.chunking: headings, code masking, heading-aware chunks and their invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import UsageError
from core.vault.chunking import CHUNKER_VERSION, Chunk, chunk_body, fenced_code_ranges, headings, mask_code


def check_invariants(body: str, chunks: list[Chunk], size: int) -> None:
    """The documented contract: exact offsets, trimmed, bounded, ordered, covering."""
    covered = bytearray(len(body))
    previous_start = -1
    for i, chunk in enumerate(chunks):
        assert chunk.ord == i
        assert chunk.text == body[chunk.start : chunk.end]
        assert chunk.text and chunk.text == chunk.text.strip()
        assert len(chunk.text) <= size
        assert chunk.start > previous_start
        previous_start = chunk.start
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    uncovered = [c for c, flag in zip(body, covered) if not flag]
    assert all(c.isspace() for c in uncovered)


def test_version_is_part_of_the_index_identity():
    assert CHUNKER_VERSION == "heading-v1"


@pytest.mark.parametrize("body", ["", "   \n\n\t"])
def test_empty_body_has_no_chunks(body):
    assert chunk_body(body) == []


def test_headings_ignore_code_and_parse_atx_rules():
    body = (
        "# One\n"
        "##   Two ##  \n"
        "```python\n# comment, not a heading\n```\n"
        "#tag is not a heading\n"
        "####### seven is not a heading\n"
        "   ### Three (indented up to 3)\n"
        "    # four spaces is code\n"
        "~~~~\n# tilde fence\n~~~~\n"
        "#\n"
        "###### Six\n"
    )
    assert headings(body) == ["One", "Two", "Three (indented up to 3)", "", "Six"]


def test_fence_closing_rules():
    body = "````\n```\nstill code\n````\nafter\n"
    (fence,) = fenced_code_ranges(body)
    assert body[fence[0] : fence[1]] == "````\n```\nstill code\n````"
    assert fenced_code_ranges("```py`x\nnot a fence\n") == ()  # backtick in info string


def test_mask_code_keeps_length_and_lines():
    body = "a `code #x` b\n```\n[[in]]\n```\n``two `ticks` here`` end `unmatched\n\nnew `para"
    masked = mask_code(body)
    assert len(masked) == len(body)
    assert masked.count("\n") == body.count("\n")
    assert "code" not in masked and "[[in]]" not in masked and "ticks" not in masked
    assert "`unmatched" in masked and "`para" in masked  # no closing run in the same paragraph


def test_sections_carry_heading_paths_and_heading_lines():
    body = (
        "Intro line.\n\n"
        "# Install\n\nGeneral steps.\n\n"
        "## On Linux\n\nUse apt.\n\n"
        "## On macOS\n\nUse brew.\n\n"
        "# Usage\n\nRun it.\n"
    )
    chunks = chunk_body(body)
    assert [(c.heading_path, c.text) for c in chunks] == [
        ((), "Intro line."),
        (("Install",), "# Install\n\nGeneral steps."),
        (("Install", "On Linux"), "## On Linux\n\nUse apt."),
        (("Install", "On macOS"), "## On macOS\n\nUse brew."),
        (("Usage",), "# Usage\n\nRun it."),
    ]
    check_invariants(body, chunks, 600)


def test_a_lone_heading_joins_its_first_child_but_not_a_sibling():
    body = "# Get-Item\n\n## SYNOPSIS\nGets the item.\n## Empty\n## Next\ntext\n"
    chunks = chunk_body(body)
    assert [(c.heading_path, c.text) for c in chunks] == [
        (("Get-Item", "SYNOPSIS"), "# Get-Item\n\n## SYNOPSIS\nGets the item."),
        (("Get-Item", "Empty"), "## Empty"),
        (("Get-Item", "Next"), "## Next\ntext"),
    ]


def test_hash_lines_in_code_do_not_split_sections():
    body = "# Script\n\n```bash\n# install deps\nmake\n```\n"
    chunks = chunk_body(body)
    assert len(chunks) == 1 and chunks[0].heading_path == ("Script",)


def test_long_section_splits_at_paragraphs_first():
    paragraphs = [f"Paragraph {i} " + "word " * 20 for i in range(10)]
    body = "# Long\n\n" + "\n\n".join(p.strip() for p in paragraphs)
    chunks = chunk_body(body, size=300, overlap=30)
    assert len(chunks) > 3
    check_invariants(body, chunks, 300)
    for chunk in chunks[:-1]:
        assert body[chunk.end : chunk.end + 2] == "\n\n"  # every cut at a blank line
    assert all(c.heading_path == ("Long",) for c in chunks)


def test_sentence_boundary_before_word_boundary():
    sentence = "This sentence has exactly some words in it. "
    body = sentence * 20  # one paragraph, one line
    chunks = chunk_body(body, size=200, overlap=20)
    check_invariants(body, chunks, 200)
    assert all(c.text.endswith(".") for c in chunks)


def test_word_boundary_and_overlap_snapped_to_word_start():
    body = " ".join(f"w{i:03d}" for i in range(300))
    chunks = chunk_body(body, size=100, overlap=20)
    check_invariants(body, chunks, 100)
    for prev, nxt in zip(chunks, chunks[1:]):
        assert prev.end - 20 <= nxt.start < prev.end  # overlap of at most 20 chars
        assert nxt.start == 0 or body[nxt.start - 1] == " "  # starts at a word
        assert body[prev.end] == " "  # ends at a word


def test_zero_overlap_pieces_do_not_overlap():
    body = " ".join(["word"] * 200)
    chunks = chunk_body(body, size=50, overlap=0)
    check_invariants(body, chunks, 50)
    assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:]))


def test_a_huge_word_is_hard_cut():
    body = "x" * 250
    chunks = chunk_body(body, size=100, overlap=10)
    check_invariants(body, chunks, 100)
    assert [len(c.text) for c in chunks][:2] == [100, 100]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (-5, 0), (10, 10), (10, -1), (10, 11), (True, 0), (10.0, 1)])
def test_bad_parameters_are_usage_errors(size, overlap):
    with pytest.raises(UsageError) as info:
        chunk_body("text", size=size, overlap=overlap)
    assert info.value.reason == "usage"


_BODY_ALPHABET = st.sampled_from(list("ab c.\n#`~!?") + ["# ", "## ", "```\n", "\n\n", "word ", "Sentence. "])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_BODY_ALPHABET, max_size=300).map("".join),
    st.integers(min_value=1, max_value=120),
    st.integers(min_value=0, max_value=119),
)
def test_chunk_invariants_hold_for_any_body(body, size, overlap):
    overlap = overlap % size
    chunks = chunk_body(body, size=size, overlap=overlap)
    check_invariants(body, chunks, size)
