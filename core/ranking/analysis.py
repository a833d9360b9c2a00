"""Text -> terms with the index's own FTS5 tokenizer, and per-note sparse term vectors.

Ranking statistics and query terms must use exactly the tokens FTS5 produces, or BM25
would score a different vocabulary than the one FTS5 matches. Running every document
through ``fts5vocab`` is slow (one Python row per token), so text is first cut into
*words* at characters that unicode61 always treats as separators (whitespace, ASCII
punctuation, common quotes and dashes), and each *distinct* word is then tokenised once
by a real FTS5 table with the configured tokenizer (case folding, diacritics, stemming,
and any further cuts: ``don’t`` -> ``don``, ``t``). Cutting only where FTS5 cuts too is
what makes the tokens of the words equal the tokens of the text; Python's ``\\w`` is not
such a cut (combining marks, private-use and newer characters differ), so it is not used
for terms. Only unicode61-based tokenizers are accepted (``check_tokenizer``): options
such as ``tokenchars`` or other tokenizers would move the cuts. Tests compare the result
with fts5vocab's per-document counts on real notes and on generated Unicode text.

Term vectors are made in two steps, so that the first can run in worker processes:

    WordTable    (any process) numbers the words it meets and turns a batch of notes'
                 field texts into ``LocalVector`` s: per note, its local word ids and a
                 [words, fields] frequency matrix, counted with numpy for the whole batch.
    TermVectors  (the builder) tokenises each word once, maps words to the index's term
                 ids, adds up words of one stem: the packed ``note_terms`` rows.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat

import numpy as np

from core.errors import UsageError
from core.index.tables import word_scratch
from core.ranking.languages import LanguageAnalysis
from core.ranking.word_cache import WordCache

# Lower-cased letter/digit runs: the words snippet highlighting looks at (not the index's terms).
# Term words: cut only at characters every unicode61 tokenizer treats as separators.
_TERM_WORD = re.compile(
    r"[^\s\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f\u00a1\u00ab\u00b7\u00bb\u00bf"
    r"\u2010-\u2027\u2030-\u205e]+"
)
# ASCII text is cut without a regex: a translate table folds A-Z to a-z (as unicode61 does) and
# turns every other byte that is not [a-z0-9] into a space, then bytes.split() cuts. Several
# times faster, and most vault text is ASCII.
_ASCII_FOLD = bytes(c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256))
_BATCH = 5000
# CJK letters (Unicode category Lo, no case, no diacritic to fold): CJK unified ideographs,
# hiragana and katakana letters (not their marks or the prolonged sound mark), Hangul syllables.
_CJK_LETTERS = re.compile("[\u4e00-\u9fff\u3041-\u3096\u30a1-\u30fa\uac00-\ud7a3]+")
_COLS = 16
_COL_NAMES = tuple(f"c{i}" for i in range(_COLS))
_COL_NO = {name: i for i, name in enumerate(_COL_NAMES)}
_TF_MAX = int(np.iinfo(np.uint16).max)


def term_words(text: str) -> list[bytes]:
    """The text's term words, in order, as UTF-8; ASCII text arrives lower-cased."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_FOLD).split()
    return [word.encode("utf-8") for word in _TERM_WORD.findall(text)]


def check_tokenizer(spec: str) -> str:
    """``spec`` if it is a unicode61 tokenizer this module can mirror, else a ``UsageError``.

    Accepted: ``[porter] unicode61 [remove_diacritics 0|1|2]`` (and ``porter`` alone, which
    wraps unicode61). Other tokenizers or unicode61 options would cut text elsewhere.
    """
    parts = spec.split()
    if parts[:1] == ["porter"]:
        parts = parts[1:] or ["unicode61"]
    ok = (
        parts[:1] == ["unicode61"]
        and len(parts) in (1, 3)
        and (len(parts) == 1 or (parts[1] == "remove_diacritics" and parts[2] in ("0", "1", "2")))
    )
    if not ok:
        raise UsageError(
            f"unsupported FTS5 tokenizer {spec!r}: use '[porter] unicode61 [remove_diacritics 0|1|2]'", tokenizer=spec
        )
    return spec


class Analyzer:
    """Maps text to FTS5 tokens for one tokenizer spec; caches word -> tokens."""

    def __init__(self, tokenizer: str) -> None:
        self.tokenizer = check_tokenizer(tokenizer)
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        # _COLS words per row (one per column): far fewer rows than one word per row.
        self._insert = word_scratch.create_word_tables(self._conn, _COL_NAMES, tokenizer)
        self._words = WordCache()
        self._lock = threading.Lock()
        # unicode61 without porter: ASCII letters fold to lower case, digits stay, and nothing else
        # is done to an ASCII letter/digit run (``remove_diacritics`` touches no ASCII letter)
        self._plain = self.tokenizer.split()[0] == "unicode61"
        # ... and without diacritic removal, a CJK letter is a token character FTS5 leaves as it is
        self._plain_cjk = self._plain and self.tokenizer.split()[1:] == ["remove_diacritics", "0"]

    def _tokenise(self, words: list[str]) -> list[tuple[int, str]]:
        """(index into ``words``, token) of every token, in word order then token order."""
        rows = [(i, *words[i * _COLS : (i + 1) * _COLS]) for i in range(-(-len(words) // _COLS))]
        rows[-1] += ("",) * (_COLS + 1 - len(rows[-1]))
        found = word_scratch.tokenise_rows(self._conn, self._insert, rows)
        return [(doc * _COLS + _COL_NO[col], term) for doc, col, term in found]

    def _map_new(self, words: list[str]) -> None:
        for start in range(0, len(words), _BATCH):
            batch = words[start : start + _BATCH]
            tokens = self._tokenise(batch)
            if [i for i, _ in tokens] == list(range(len(batch))):  # the usual case: one token per word
                self._words.map.update(zip(batch, ((term,) for _, term in tokens)))
                continue
            found: dict[int, list[str]] = {}
            for i, term in tokens:
                found.setdefault(i, []).append(term)
            self._words.map.update((wd, tuple(found.get(i, ()))) for i, wd in enumerate(batch))

    def map_words(self, words: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """word -> its FTS5 tokens (usually one; none for words FTS5 drops)."""
        wanted, cache = set(words), self._words.map
        if not cache.keys() >= wanted:  # not ``wanted.issubset(cache)``: that copies the whole map into a set
            with self._lock:
                cache = self._words.room(wanted)
                new = wanted.difference(cache)
                if self._plain:  # an ASCII letter/digit run is one token, case folded: no FTS5 round trip
                    folded = {w for w in new if w.isascii() and w.isalnum()}
                    cache.update((w, (w.lower(),)) for w in folded)
                    new -= folded
                if self._plain_cjk:  # ... and a run of Han, kana or Hangul letters is one token, itself
                    same = {w for w in new if _CJK_LETTERS.fullmatch(w)}
                    cache.update((w, (w,)) for w in same)
                    new -= same
                self._map_new(sorted(w for w in new if w.isascii()))  # one token each: _map_new's fast path
                self._map_new(sorted(w for w in new if not w.isascii()))
        return cache

    def count_terms(self, text: str) -> Counter[str]:
        """Term frequencies of one text."""
        words = _TERM_WORD.findall(text)
        mapping = self.map_words(words)
        return Counter(tok for w in words for tok in mapping[w])

    def terms(self, text: str) -> list[str]:
        """The text's tokens in order (duplicates kept), as a query sees them."""
        words = _TERM_WORD.findall(text)
        mapping = self.map_words(words)
        return [tok for w in words for tok in mapping[w]]


@dataclass(frozen=True)
class LocalVector:
    """One note's word frequencies in the numbering of the ``WordTable`` that counted them."""

    ids: bytes  # int32 local word ids, ascending (per document)
    tf: bytes  # uint32 [len(ids), n_fields] frequencies, or [len(ids), 1] for a weighted group
    lengths: bytes = b""  # a group of documents (a note's chunks): uint32 ids per document, in order


class WordTable:
    """Numbers the words one process meets during a build, and counts batches of notes by word.

    Needs no tokenizer, so worker processes can run it cheaply: the words of a whole batch
    are numbered with one dict lookup each and counted with numpy, grouped by (note, field,
    word). ``count`` reports the words numbered during each batch, in local-id order.
    """

    def __init__(self, n_fields: int) -> None:
        self.n_fields = n_fields
        self._word_no: dict[bytes, int] = {}

    def _numbers(self, words: list[bytes]) -> tuple[np.ndarray, list[bytes]]:
        numbers = np.fromiter(map(self._word_no.get, words, repeat(-1)), dtype=np.int64, count=len(words))
        unknown = np.flatnonzero(numbers < 0)
        new: list[bytes] = []
        if unknown.size:
            new = sorted({words[i] for i in unknown.tolist()})  # sorted: numbering does not depend on hashing
            self._word_no.update(zip(new, range(len(self._word_no), len(self._word_no) + len(new))))
            numbers[unknown] = [self._word_no[words[i]] for i in unknown.tolist()]
        return numbers, new

    def count(self, notes: Sequence[Sequence[str]]) -> tuple[list[bytes], list[LocalVector]]:
        """(words numbered meanwhile, one ``LocalVector`` per note) for the notes' field texts."""
        nf = self.n_fields
        return self.count_pieces(
            len(notes), [(text, (d * nf + f,)) for d, texts in enumerate(notes) for f, text in enumerate(texts)]
        )

    def count_pieces(
        self,
        n_docs: int,
        pieces: Sequence[tuple[str, Sequence[int]]],
        groups: Sequence[tuple[int, int]] = (),
        weights: Sequence[int] = (),
        tags: Sequence[bytes] = (),
    ) -> tuple[list[bytes], list[LocalVector]]:
        """Like ``count`` for ``n_docs`` documents whose fields are made of pieces of text: each
        piece is cut and numbered once and counts for every target (``doc * n_fields + field``)
        it names, e.g. a stretch of a note body that is also in one of its chunks.

        Each ``[first, end)`` range in ``groups`` (a note's chunks) comes back as ONE vector with
        ``lengths`` and one column per term: its per-field frequencies times ``weights``, summed.
        The vectors come in document order, a group in the place of its first document.
        ``tags[i]`` (if given and not empty) prefixes every word of piece i: its note's language.
        """
        words, sizes, targets, fanout = _cut_pieces(pieces, tags)
        numbers, new = self._numbers(words)
        span = max(len(self._word_no), 1)
        target, word = np.divmod(self._slot_words(numbers, sizes, targets, fanout, span), span)
        pairs, tf = _doc_word_frequencies(target, word, span, self.n_fields)
        return new, _local_vectors(n_docs, pairs, tf, span, groups, weights)

    @staticmethod
    def _slot_words(
        numbers: np.ndarray, sizes: list[int], targets: list[int], fanout: list[int], span: int
    ) -> np.ndarray:
        """``target * span + word number`` for every (target, word of the piece) pair."""
        size = np.asarray(sizes, dtype=np.int64)
        target = np.asarray(targets, dtype=np.int64)
        if len(target) == len(size):  # one target per piece
            return np.repeat(target, size) * span + numbers
        piece = np.repeat(np.arange(size.size), np.asarray(fanout, dtype=np.int64))
        length = size[piece]  # words of each (piece, target) pair
        pair = np.repeat(np.arange(piece.size), length)
        first = (np.cumsum(size) - size)[piece]  # the piece's first word in ``numbers``
        within = np.arange(pair.size) - np.repeat(np.cumsum(length) - length, length)
        return target[pair] * span + numbers[first[pair] + within]


def _cut_pieces(
    pieces: Sequence[tuple[str, Sequence[int]]], tags: Sequence[bytes]
) -> tuple[list[bytes], list[int], list[int], list[int]]:
    """(the words of every piece with words, in order; words per such piece; their targets, in
    order; targets per such piece). ``tags[i]`` (if given and not empty) prefixes piece i's words."""
    words: list[bytes] = []
    sizes: list[int] = []
    targets: list[int] = []
    fanout: list[int] = []
    for i, (text, piece_targets) in enumerate(pieces):
        found = term_words(text) if text else []
        if found and tags and tags[i]:
            found = [tags[i] + w for w in found]
        if found:
            words += found
            sizes.append(len(found))
            targets += piece_targets
            fanout.append(len(piece_targets))
    return words, sizes, targets, fanout


def _doc_word_frequencies(target: np.ndarray, word: np.ndarray, span: int, nf: int) -> tuple[np.ndarray, np.ndarray]:
    """(``doc * span + word`` of each distinct (doc, word) pair, ascending; its uint32 frequency per
    field [pairs, nf]) of the (target, word number) pairs, a target being ``doc * nf + field``."""
    doc, field = np.divmod(target, nf)
    # one sort, by (doc, word, field): a (doc, word) pair's fields are then neighbours
    keys, counts = np.unique((doc * span + word) * nf + field, return_counts=True)
    doc_word, field = np.divmod(keys, nf)
    first = np.flatnonzero(np.diff(doc_word, prepend=-1)) if keys.size else np.zeros(0, np.int64)
    row = np.cumsum(np.diff(doc_word, prepend=-1) != 0) - 1
    pairs = doc_word[first]
    tf = np.zeros((pairs.size, nf), dtype="<u4")
    tf[row, field] = counts
    return pairs, tf


def _local_vectors(
    n_docs: int, pairs: np.ndarray, tf: np.ndarray, span: int, groups: Sequence[tuple[int, int]], weights: Sequence[int]
) -> list[LocalVector]:
    """One ``LocalVector`` per document, or per ``[first, end)`` group in the place of its first
    document (its per-field frequencies times ``weights``, summed), from ``_doc_word_frequencies``."""
    nf = tf.shape[1]
    id_bytes, tf_bytes = (pairs % span).astype("<i4").tobytes(), tf.tobytes()
    w_bytes = (tf @ np.asarray(weights, dtype=np.uint32)).astype("<u4").tobytes() if groups else b""
    bounds_arr = np.searchsorted(pairs // span, np.arange(n_docs + 1))
    per_doc = np.diff(bounds_arr).astype("<u4").tobytes()
    bounds = bounds_arr.tolist()
    group_end = dict(groups)
    out: list[LocalVector] = []
    d, width = 0, 4 * nf
    while d < n_docs:
        a = bounds[d]
        if d in group_end:
            end = group_end[d]
            b = bounds[end]
            out.append(LocalVector(id_bytes[4 * a : 4 * b], w_bytes[4 * a : 4 * b], per_doc[4 * d : 4 * end]))
            d = end
        else:
            b = bounds[d + 1]
            out.append(LocalVector(id_bytes[4 * a : 4 * b], tf_bytes[width * a : width * b]))
            d += 1
    return out


class _Ints:
    """An append-only int64 column: appended as Python ints, read as one numpy array that is
    extended by the new tail only (not rebuilt from the whole list on every read)."""

    def __init__(self) -> None:
        self._done = np.zeros(0, dtype=np.int64)
        self._tail: list[int] = []

    def __len__(self) -> int:
        return self._done.size + len(self._tail)

    def extend(self, values: Iterable[int]) -> None:
        self._tail.extend(values)

    def array(self) -> np.ndarray:
        if self._tail:
            self._done = np.concatenate((self._done, np.asarray(self._tail, dtype=np.int64)))
            self._tail = []
        return self._done


class TermVectors:
    """``LocalVector`` s from any number of ``WordTable`` s -> packed ``note_terms`` rows.

    ``register`` must see each table's newly numbered words in the order the table reported
    them; it tokenises the words this builder has not seen (one FTS5 round trip). A word maps
    to a run of index term ids (usually one; none for a word FTS5 drops), and words with one
    stem add up. Terms never seen before get the next ids, in sorted order within a batch, so
    ids do not depend on which process counted what. A row is the ascending int32 term ids and
    the uint16 matrix ``[n_terms, n_fields]`` (capped at 65535), both little-endian bytes.
    """

    def __init__(
        self,
        analyzer: Analyzer | LanguageAnalyzer,
        n_fields: int,
        *,
        next_id: int = 1,
        known: Callable[[list[str]], dict[str, int]] | None = None,
    ) -> None:
        """``known(terms)`` returns the ids the index already has for some of ``terms``; terms it
        does not know get ids from ``next_id`` on (only the terms met are ever looked up). None:
        the index has no terms yet."""
        self.analyzer = analyzer
        self.n_fields = n_fields
        self._known = known
        self._term_ids: dict[str, int] = {}
        self._next_term = next_id
        self._new_terms: list[tuple[int, str]] = []
        self._word_no: dict[bytes, int] = {}  # word -> global word number
        self._starts, self._lens, self._flat = _Ints(), _Ints(), _Ints()  # word number -> its run in _flat
        self._local: dict[object, _Ints] = {}  # table -> global word number of each local id

    def _learn(self, words: list[bytes]) -> None:
        if not words:
            return
        texts = [w.decode("utf-8") for w in words]
        mapping = self.analyzer.map_words(texts)
        ids = self._term_ids
        unseen = {t for w in texts for t in mapping[w]}.difference(ids)
        found = self._known(sorted(unseen)) if self._known is not None else {}
        ids.update(found)
        for term in sorted(unseen.difference(found)):
            ids[term] = self._next_term
            self._new_terms.append((self._next_term, term))
            self._next_term += 1
        tokens = [mapping[w] for w in texts]
        lens = [len(t) for t in tokens]
        self._word_no.update(zip(words, range(len(self._lens), len(self._lens) + len(words))))
        self._starts.extend(accumulate(lens[:-1], initial=len(self._flat)))
        self._lens.extend(lens)
        self._flat.extend(ids[t] for toks in tokens for t in toks)

    def register(self, table: object, new_words: Sequence[bytes]) -> None:
        """Record the words ``table`` numbered in a batch (its next local ids, in order)."""
        self._learn(sorted(set(new_words).difference(self._word_no)))
        self._local.setdefault(table, _Ints()).extend(map(self._word_no.__getitem__, new_words))

    def take_new_terms(self) -> list[tuple[int, str]]:
        """(id, term) of the terms assigned since the last call, for the ``terms`` table."""
        out, self._new_terms = self._new_terms, []
        return out

    def _global_words(self, tables: list[object], local: np.ndarray, lengths: list[int]) -> np.ndarray:
        distinct = list(dict.fromkeys(tables))
        if len(distinct) == 1:
            return self._local.get(distinct[0], _Ints()).array()[local]
        owner = np.repeat(np.array([distinct.index(t) for t in tables], dtype=np.int64), lengths)
        out = np.empty(local.size, dtype=np.int64)
        for k, table in enumerate(distinct):
            mask = owner == k
            out[mask] = self._local.get(table, _Ints()).array()[local[mask]]
        return out

    def vectors(
        self, notes: Sequence[tuple[object, LocalVector]], columns: int | None = None
    ) -> list[tuple[bytes, bytes, bytes]]:
        """(term_ids bytes, tf bytes, lengths) of each (table, local vector), in order: tf is the
        uint16 matrix ``[n_terms, columns]``, columns = n_fields, or 1 for weighted chunk groups;
        a group's documents (its ``lengths``) are vectors of their own, packed one after another."""
        columns = self.n_fields if columns is None else columns
        lengths = [len(v.ids) // 4 for _, v in notes]
        words = self._global_words(
            [t for t, _ in notes], np.frombuffer(b"".join(v.ids for _, v in notes), "<i4"), lengths
        )
        tf = np.frombuffer(b"".join(v.tf for _, v in notes), dtype="<u4").reshape(-1, columns)
        grouped = bool(notes) and bool(notes[0][1].lengths)
        if grouped:  # every item is a group of documents: postings per document, documents per item
            doc_len = np.frombuffer(b"".join(v.lengths for _, v in notes), dtype="<u4").astype(np.int64)
            docs_per_item = [len(v.lengths) // 4 for _, v in notes]
        else:
            doc_len, docs_per_item = np.asarray(lengths, dtype=np.int64), [1] * len(notes)
        n_docs = int(doc_len.shape[0])
        note = np.repeat(np.arange(n_docs, dtype=np.int64), doc_len)
        n_ids, pos = self._lens.array()[words], self._starts.array()[words]
        if not np.all(n_ids == 1):  # words of zero or several tokens: one entry per token
            rep = np.repeat(np.arange(words.size), n_ids)
            pos = pos[rep] + np.arange(rep.size) - np.repeat(np.cumsum(n_ids) - n_ids, n_ids)
            note, tf = note[rep], tf[rep]
        span = self._next_term
        keys, row = np.unique(note * span + self._flat.array()[pos], return_inverse=True)
        summed = np.stack([np.bincount(row, weights=tf[:, f], minlength=keys.size) for f in range(columns)], axis=1)
        tf_bytes = np.minimum(summed, _TF_MAX).astype("<u2").tobytes()
        id_bytes = (keys % span).astype("<i4").tobytes()
        bounds_arr = np.searchsorted(keys // span, np.arange(n_docs + 1))
        new_len = np.diff(bounds_arr).astype("<u4").tobytes() if grouped else b""
        bounds, width = bounds_arr.tolist(), 2 * columns
        out, d = [], 0
        for k in docs_per_item:
            a, b = bounds[d], bounds[d + k]
            out.append((id_bytes[4 * a : 4 * b], tf_bytes[width * a : width * b], new_len[4 * d : 4 * (d + k)]))
            d += k
        return out


_analyzers: dict[str, Analyzer] = {}
_ANALYZERS_LOCK = threading.RLock()  # both maps, shared by the request threads (re-entered by LanguageAnalyzer)


def analyzer_for(tokenizer: str) -> Analyzer:
    """One shared analyzer per tokenizer spec in this process."""
    with _ANALYZERS_LOCK:
        if tokenizer not in _analyzers:
            _analyzers[tokenizer] = Analyzer(tokenizer)
        return _analyzers[tokenizer]


LANGUAGE_TOKENIZER = "unicode61 remove_diacritics 0"  # the cuts and case folding under every language's terms
LANGUAGE_TAG = b"\x00"  # a word of a note in another language than the default: b"<lang>\x00<word>"


class LanguageAnalyzer:
    """Words -> index terms by language (``core.ranking.languages``): the ``map_words`` that
    ``TermVectors`` uses. A word is cut and case folded by FTS5 (``LANGUAGE_TOKENIZER``), then
    each token is analysed by the language of its note: ``default`` for an untagged word, else the
    language named by its tag (``tag_words``). Words that no term survives map to ``()``."""

    def __init__(self, default: str) -> None:
        self.default = default
        self.base = analyzer_for(LANGUAGE_TOKENIZER)
        self._words = WordCache()
        self._lock = threading.Lock()

    def map_words(self, words: Iterable[str]) -> dict[str, tuple[str, ...]]:
        wanted, cache = set(words), self._words.map
        if not cache.keys() >= wanted:  # O(words asked), as in ``Analyzer.map_words``
            with self._lock:
                cache = self._words.room(wanted)
                by_lang: dict[str, list[str]] = {}
                for word in wanted.difference(cache):
                    by_lang.setdefault(word.rpartition("\x00")[0] or self.default, []).append(word)
                for lang, group in by_lang.items():
                    untagged = {w: w.rpartition("\x00")[2] for w in group}
                    tokens = self.base.map_words(untagged.values())
                    terms = LanguageAnalysis(lang).terms_of({t for p in untagged.values() for t in tokens[p]})
                    for w, p in untagged.items():
                        cache[w] = tuple(term for tok in tokens[p] for term in terms[tok])
        return cache

    def terms(self, text: str, language: str | None = None) -> list[str]:
        """The index terms of a text of a note in ``language`` (default: the vault default), in order."""
        tag = language_tag(language or self.default, self.default).decode("ascii")
        words = [tag + w for w in _TERM_WORD.findall(text)]
        mapping = self.map_words(words)
        return [t for w in words for t in mapping[w]]


def language_tag(language: str, default: str) -> bytes:
    """The prefix of the words of a note in ``language`` (none for the default; see ``LanguageAnalyzer``)."""
    return b"" if language == default else language.encode("ascii") + LANGUAGE_TAG


_language_analyzers: dict[str, LanguageAnalyzer] = {}


def language_analyzer_for(default: str) -> LanguageAnalyzer:
    """One shared ``LanguageAnalyzer`` per vault default language in this process."""
    with _ANALYZERS_LOCK:
        if default not in _language_analyzers:
            _language_analyzers[default] = LanguageAnalyzer(default)
        return _language_analyzers[default]
