"""The analyzer's terms are FTS5's own tokens, and term vectors pack them exactly.

The reference is SQLite itself: a tiny FTS5 table with the same tokenizer, read back through
``fts5vocab`` (one row per token instance). Per-note counts must match it on real Dendron
notes (whose emoji newer than SQLite's Unicode tables are tokens, not separators), on the
stored term vectors of a real build, and on generated Unicode text.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import with_working
from hypothesis import given, settings
from hypothesis import strategies as st

from core import generations as gen
from core.build.builder import DEFAULT_TOKENIZER, build_index
from core.errors import UsageError
from core.index.tables.notes_fts import FTS_COLUMNS, stored_texts
from core.index.tables.terms import note_term_rows
from core.ranking.analysis import LANGUAGE_TOKENIZER, Analyzer, LocalVector, TermVectors, WordTable, check_tokenizer
from core.ranking.languages import LanguageAnalysis, note_language
from core.vault.chunking import headings
from core.vault.notes import parse_note
from tests import paths

DENDRON = paths.DENDRON
TOKENIZERS = (DEFAULT_TOKENIZER, "unicode61 remove_diacritics 0", "porter unicode61 remove_diacritics 1")


class Reference:
    """FTS5's own tokens of a text, through fts5vocab (the slow, certain way)."""

    def __init__(self, tokenizer: str, columns: tuple[str, ...] = ("x",)) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.columns = columns
        self.conn.execute(f"CREATE VIRTUAL TABLE t USING fts5({', '.join(columns)}, tokenize='{tokenizer}')")
        self.conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, t, instance)")
        self.next_id = 0

    def add(self, *texts: str) -> int:
        self.next_id += 1
        self.conn.execute(
            f"INSERT INTO t(rowid, {', '.join(self.columns)}) VALUES (?{', ?' * len(texts)})", (self.next_id, *texts)
        )
        return self.next_id

    def counts(self, doc: int, col: str = "x") -> Counter[str]:
        return Counter(
            {
                term: n
                for term, n in self.conn.execute(
                    "SELECT term, count(*) FROM temp.v WHERE doc = ? AND col = ? GROUP BY term", (doc, col)
                )
            }
        )

    def all_counts(self, col: str = "x") -> dict[int, Counter[str]]:
        """doc -> counts for every document, in one pass (per-doc queries scan the whole index)."""
        out: dict[int, Counter[str]] = {}
        for doc, term, n in self.conn.execute(
            "SELECT doc, term, count(*) FROM temp.v WHERE col = ? GROUP BY doc, term", (col,)
        ):
            out.setdefault(doc, Counter())[term] = n
        return out

    def clear(self) -> None:
        self.conn.execute("DELETE FROM t")

    def tokens(self, doc: int) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT term FROM temp.v WHERE doc = ? ORDER BY col, offset", (doc,))]


def dendron_bodies() -> dict[str, str]:
    return {p.name: parse_note(p.name, p.read_bytes()).body for p in sorted(DENDRON.glob("*.md"))}


# --- FTS5's tokens on real and generated text --------------------------------------------------------------


@pytest.mark.slow  # a cross-check on a whole real corpus; generated and edge-case texts run in the quick suite
def test_body_term_counts_equal_fts5vocab_on_every_real_dendron_note() -> None:
    bodies = dendron_bodies()
    analyzer, ref = Analyzer(DEFAULT_TOKENIZER), Reference(DEFAULT_TOKENIZER)
    docs = {name: ref.add(body) for name, body in bodies.items()}
    expected = ref.all_counts()
    mismatched = [
        name for name, body in bodies.items() if analyzer.count_terms(body) != expected.get(docs[name], Counter())
    ]
    assert mismatched == []
    # the corpus exercises the hard cases: non-ASCII text, and emoji FTS5 keeps as tokens
    assert sum(not body.isascii() for body in bodies.values()) > 10
    assert expected[docs["changelog.release.2020-11-01.md"]]["\N{FACE WITH PARTY HORN AND PARTY HAT}"] == 1


def _decode(vector: tuple[bytes, bytes], n_fields: int) -> dict[int, tuple[int, ...]]:
    ids = np.frombuffer(vector[0], "<i4")
    matrix = np.frombuffer(vector[1], "<u2").reshape(len(ids), n_fields)
    return {int(i): tuple(int(x) for x in row) for i, row in zip(ids, matrix)}


def test_batched_table_counts_equal_fts5vocab_per_note_and_field() -> None:
    bodies = [body for _, body in sorted(dendron_bodies().items())[:120]]
    notes = [[body[:200], "", body[200:400], "", body] for body in bodies]  # repeats across fields on purpose
    table = WordTable(n_fields=5)
    vectors = TermVectors(Analyzer(DEFAULT_TOKENIZER), n_fields=5)
    packed = []
    for start in range(0, len(notes), 32):  # several batches share one numbering
        new, local = table.count(notes[start : start + 32])
        vectors.register("table", new)
        packed += vectors.vectors([("table", v) for v in local])
    term_of = {i: t for i, t in vectors.take_new_terms()}
    ref = Reference(DEFAULT_TOKENIZER, FTS_COLUMNS)
    docs = [ref.add(*texts) for texts in notes]
    expected = {name: ref.all_counts(name) for name in FTS_COLUMNS}
    for doc, vector in zip(docs, packed):
        got = _decode(vector, 5)
        for col, name in enumerate(FTS_COLUMNS):
            assert Counter({term_of[i]: tf[col] for i, tf in got.items() if tf[col]}) == expected[name].get(doc, {})


EDGE_CASES = [
    "cafe\u0301 na\u00efve r\u00e9sum\u00e9",  # NFD and NFC diacritics
    "\u0130stanbul STRASSE Stra\u00dfe",  # case folding that Python's lower() does differently
    "a\u0300b x\u00b2 \u2163 \u00bd",  # a combining mark inside a word; numbers
    "don\u2019t it's foo_bar foo-bar e.g. 3.14",  # quotes and punctuation FTS5 splits at
    "\u4e2d\u6587\u5b57 \u0939\u093f\u0928\u094d\u0926\u0940 \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "emoji \U0001fa9d\U0001f973 old \U0001f600 \u2705 private \ue000use",
    "MiXeD CaSe ASCII_words and\ttabs\nnewlines",
    "",
]


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_edge_cases_match_fts5_tokens_in_order(tokenizer: str) -> None:
    analyzer, ref = Analyzer(tokenizer), Reference(tokenizer)
    for text in EDGE_CASES:
        doc = ref.add(text)
        assert analyzer.terms(text) == ref.tokens(doc), text
        assert analyzer.count_terms(text) == ref.counts(doc), text


_ALPHABET = st.one_of(
    st.characters(codec="ascii"),
    st.sampled_from(
        "\u00e9\u00c9\u0301\u0300\u0130\u00df\u2019\u201c\u2014\u00a0\u3000\u00b7\u00ab"
        "\u4e2d\u0939\u093f\u094d\u064a\ue000\U0001fa9d\U0001f600\u2163\u00bd"
    ),
    st.characters(max_codepoint=0x2FFFF, exclude_categories=("Cs",)),
)
_HYPOTHESIS_ANALYZER = Analyzer(DEFAULT_TOKENIZER)
_HYPOTHESIS_REFERENCE = Reference(DEFAULT_TOKENIZER)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=60))
def test_generated_text_matches_fts5_tokens(text: str) -> None:
    _HYPOTHESIS_REFERENCE.clear()
    doc = _HYPOTHESIS_REFERENCE.add(text)
    assert _HYPOTHESIS_ANALYZER.terms(text) == _HYPOTHESIS_REFERENCE.tokens(doc)
    assert _HYPOTHESIS_ANALYZER.count_terms(text) == _HYPOTHESIS_REFERENCE.counts(doc)


_PLAIN = {spec: (Analyzer(spec), Reference(spec)) for spec in (LANGUAGE_TOKENIZER, "unicode61 remove_diacritics 2")}
_CJK_ALPHABET = st.one_of(
    _ALPHABET,
    st.characters(min_codepoint=0x3000, max_codepoint=0x30FF),  # kana, their marks, CJK punctuation
    st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40),
    st.characters(min_codepoint=0xAC00, max_codepoint=0xAC40),
    st.characters(min_codepoint=0xFF00, max_codepoint=0xFFEF),  # half- and full-width forms
)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(_PLAIN)), st.text(alphabet=_CJK_ALPHABET, max_size=60))
def test_plain_unicode61_tokens_of_ascii_and_cjk_words_match_fts5(spec: str, text: str) -> None:
    """unicode61 without porter maps an ASCII letter/digit run to its lower case, and (without
    diacritic removal) a run of Han, kana or Hangul letters to itself, without asking FTS5
    (``Analyzer.map_words``): the tokens must still be FTS5's, mixed with words that do go to FTS5."""
    analyzer, ref = _PLAIN[spec]
    ref.clear()
    doc = ref.add(text)
    assert analyzer.terms(text) == ref.tokens(doc)


# --- the stored vectors of a real build ------------------------------------------------------------------


def test_stored_term_vectors_equal_fts5vocab_per_field(tmp_path: Path) -> None:
    names = sorted(p.name for p in DENDRON.glob("dendron.topic.links*.md"))
    names += ["changelog.release.2020-11-01.md", "dendron._ref.status.md"]
    vault = tmp_path / "vault"
    vault.mkdir()
    for name in names:
        shutil.copyfile(DENDRON / name, vault / name)
    # a word longer than a chunk is hard-cut between chunks: the note vector must not see the cut
    (vault / "hardcut.md").write_text("# Blob\n\nStart " + "x9" * 700 + " end of it, " * 80 + "\n", encoding="utf-8")
    names.append("hardcut.md")
    build_index(vault)
    conn = with_working(gen.connect_readonly(gen.resolve(gen.layout_for(vault))))
    ref = Reference(LANGUAGE_TOKENIZER, FTS_COLUMNS)  # FTS5's cuts; then each note's language analysis
    term_of = dict(conn.execute("SELECT id, term FROM terms"))
    texts = stored_texts(conn, [r[0] for r in conn.execute("SELECT id FROM notes")])
    paths = dict(conn.execute("SELECT id, rel_path FROM notes"))
    rows = [(paths[nid], *texts[nid][:3], tids, tf) for nid, tids, tf in note_term_rows(conn, None)]
    assert len(rows) == len(names)
    for rel, title, description, tags, tids, tf in rows:
        parsed = parse_note(rel, (vault / rel).read_bytes())
        body = parsed.body
        analysis = LanguageAnalysis(note_language(parsed.extra.get("lang"), title + "\n" + body, "en"))
        doc = ref.add(title, description, tags, "\n".join(headings(body)), body)  # the note's field texts
        ids = np.frombuffer(tids, "<i4")
        assert np.all(np.diff(ids) > 0)  # ascending term ids
        matrix = np.frombuffer(tf, "<u2").reshape(len(ids), len(FTS_COLUMNS))
        for col, name in enumerate(FTS_COLUMNS):
            stored = Counter({term_of[int(i)]: int(n) for i, n in zip(ids, matrix[:, col]) if n})
            tokens = ref.counts(doc, name)
            terms = analysis.terms_of(tokens)
            expected: Counter[str] = Counter()
            for tok, n in tokens.items():
                expected.update({t: n for t in terms[tok]})
            assert stored == expected, (rel, name)


# --- TermTable and TermVectors on hand-computed examples -----------------------------------------------------


def test_term_vectors_sum_words_of_one_stem_and_cap_frequencies() -> None:
    table = WordTable(n_fields=5)
    new, local = table.count(
        [
            ["Running", "", "", "", "runs ran RUN zebra"],  # run: title 1, body 2; ran; zebra
            ["", "", "", "", "zebra " * 70_000],
        ]
    )  # 70,000 times: capped at 65,535
    assert new == [b"ran", b"run", b"running", b"runs", b"zebra"]  # local ids 0..4 (new words, sorted)
    index = {"zebra": 7, "unrelated": 3}  # what the terms table already holds
    vectors = TermVectors(
        Analyzer(DEFAULT_TOKENIZER),
        n_fields=5,
        next_id=8,
        known=lambda terms: {t: index[t] for t in terms if t in index},
    )
    vectors.register("t", new)
    assert vectors.take_new_terms() == [(8, "ran"), (9, "run")]  # sorted, after the largest known id
    assert vectors.take_new_terms() == []
    packed = vectors.vectors([("t", v) for v in local])
    assert _decode(packed[0], 5) == {7: (0, 0, 0, 0, 1), 8: (0, 0, 0, 0, 1), 9: (1, 0, 0, 0, 2)}
    assert _decode(packed[1], 5) == {7: (0, 0, 0, 0, 65_535)}
    again_new, again = table.count([["", "", "", "", "ran zebra"]])
    assert again_new == []
    vectors.register("t", again_new)
    assert _decode(vectors.vectors([("t", again[0])])[0], 5) == {7: (0, 0, 0, 0, 1), 8: (0, 0, 0, 0, 1)}


def test_two_tables_with_different_numberings_map_to_the_same_index_ids() -> None:
    first, second = WordTable(n_fields=1), WordTable(n_fields=1)
    new_a, (a,) = first.count([["alpha beta"]])
    new_b, (b,) = second.count([["gamma beta Alpha"]])  # other local ids for alpha and beta
    vectors = TermVectors(Analyzer(DEFAULT_TOKENIZER), n_fields=1)
    vectors.register("first", new_a)
    vectors.register("second", new_b)
    packed = vectors.vectors([("first", a), ("second", b)])
    ids = {t: i for i, t in vectors.take_new_terms()}
    assert _decode(packed[0], 1) == {ids["alpha"]: (1,), ids["beta"]: (1,)}
    assert _decode(packed[1], 1) == {ids["alpha"]: (1,), ids["beta"]: (1,), ids["gamma"]: (1,)}


def test_words_of_several_tokens_or_none_are_expanded() -> None:
    table = WordTable(n_fields=1)
    new, local = table.count([["don\u2019t \u2263 \u2263 x"]])  # two tokens; a symbol FTS5 drops
    vectors = TermVectors(Analyzer(DEFAULT_TOKENIZER), n_fields=1)
    vectors.register("t", new)
    (packed,) = vectors.vectors([("t", v) for v in local])
    names = {i: t for i, t in vectors.take_new_terms()}
    assert {names[i]: tf for i, tf in _decode(packed, 1).items()} == {"don": (1,), "t": (1,), "x": (1,)}


def test_notes_without_words_get_empty_vectors() -> None:
    table = WordTable(n_fields=5)
    new, local = table.count([["", "", "", "", ""], ["", "", "", "", "... !!"]])
    assert new == [] and local == [LocalVector(b"", b""), LocalVector(b"", b"")]
    vectors = TermVectors(Analyzer(DEFAULT_TOKENIZER), n_fields=5)
    assert vectors.vectors([("t", v) for v in local]) == [(b"", b"", b""), (b"", b"", b"")]


# --- tokenizer specs -----------------------------------------------------------------------------------


def test_only_unicode61_tokenizers_are_accepted() -> None:
    for spec in (
        "porter unicode61 remove_diacritics 2",
        "unicode61",
        "porter",
        "porter unicode61",
        "unicode61 remove_diacritics 0",
    ):
        assert check_tokenizer(spec) == spec
    for spec in (
        "trigram",
        "ascii",
        "porter ascii",
        "unicode61 tokenchars '-'",
        "unicode61 separators x",
        "unicode61 remove_diacritics 3",
        "unicode61') ; DROP TABLE x; --",
        "",
    ):
        with pytest.raises(UsageError) as caught:
            check_tokenizer(spec)
        assert caught.value.reason == "usage"
        with pytest.raises(UsageError):
            Analyzer(spec)


def test_shared_pieces_and_a_weighted_group_of_documents() -> None:
    """A note (doc 0) and its chunks (docs 1-3, one without words) as count_pieces sees them:
    a stretch shared by the note body and a chunk is cut once and counted for both."""
    table = WordTable(n_fields=5)
    pieces = [
        ("Running", (0 * 5 + 0, 1 * 5 + 0)),  # title: note and chunk 0
        ("runs ran", (0 * 5 + 4, 1 * 5 + 4)),  # chunk 0's own stretch: also the note body
        ("... !!", (2 * 5 + 4,)),  # chunk 1: no words at all
        ("ran", (3 * 5 + 4,)),  # chunk 2 repeats the overlap ...
        ("zebra", (0 * 5 + 4, 3 * 5 + 4)),
    ]  # ... then its own stretch
    new, (note_vec, group) = table.count_pieces(4, pieces, groups=[(1, 4)], weights=(4, 3, 3, 8, 2))
    assert group.lengths and np.frombuffer(group.lengths, "<u4").tolist() == [3, 0, 2]  # words per chunk
    vectors = TermVectors(Analyzer(DEFAULT_TOKENIZER), n_fields=5)
    vectors.register("t", new)
    term = {t: i for i, t in vectors.take_new_terms()}
    assert _decode(vectors.vectors([("t", note_vec)])[0], 5) == {
        term["ran"]: (0, 0, 0, 0, 1),
        term["run"]: (1, 0, 0, 0, 1),
        term["zebra"]: (0, 0, 0, 0, 1),
    }
    ids, tf, lengths = vectors.vectors([("t", group)], columns=1)[0]
    assert np.frombuffer(lengths, "<u4").tolist() == [2, 0, 2]  # running + runs share the stem run
    chunk0 = dict(zip(np.frombuffer(ids, "<i4")[:2].tolist(), np.frombuffer(tf, "<u2")[:2].tolist()))
    assert chunk0 == {term["ran"]: 2, term["run"]: 4 + 2}  # title x4 + body x2, summed per stem
    chunk2 = dict(zip(np.frombuffer(ids, "<i4")[2:].tolist(), np.frombuffer(tf, "<u2")[2:].tolist()))
    assert chunk2 == {term["ran"]: 2, term["zebra"]: 2}
