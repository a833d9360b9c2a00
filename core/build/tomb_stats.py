"""A tombstone's exact statistics in O(dead note), not O(segment postings) (issue 29).

A tombstone stores ALL its segment's dead ids and their exact per-class statistics (notes, field-length
sums, df of the terms they hold: ``core.index.tables.segments.create_tombstone``). Written after an edit,
it is cumulative: the segment's previous tombstone already holds the statistics of the ids it lists, so
the new one is those plus the NEWLY dead notes' contributions (``tombstone_sums``).

A newly dead note's contribution is found without scanning the segment's postings:

- candidate terms: the note's stored texts (``note_text``: the field texts its term vector was counted
  from, ``core.build.ingest.field_texts``) cut into words and analysed in the note's language (as the
  build chose it: frontmatter, else detected), else in every language of the segment (meta
  ``languages`` and the default), their ids looked up in the segment's stored query vocabulary (sorted
  keys: a bisect each, where building the dictionary of every term costs 0.19 s at 6k multilingual notes);
- verified: each candidate's posting run (``indptr[t]:indptr[t+1]`` of ``docs``, ascending rows) is
  searched for the note's row, a few 16 KiB pieces read (``core.ranking.stored``); a term whose run
  holds the row is one the note holds, with its stored per-field counts (``field_mask``, ``body_tf``,
  its side values). A note's stored ``field_len`` row is the sum of the counts of the terms it holds
  (``core.ranking.sparse_rows``), each at least 1 in some field: confirmed sums equal to that row prove
  no term is missing. The per-class df then follows.

A note that does not verify (its texts analysed to other terms than its vector holds), and one whose
candidates' runs would read as many pieces as the whole ``docs`` array (a long note in a small segment:
``_Segment.cheaper_whole``), is counted from the whole array (its postings found as
``core.ranking.segments.dead_counts`` finds them: exact), and ``TombstoneSums.how`` says so and how many
(as it does for a previous tombstone without statistics, or one that does not fit: then every id is).
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import IntegrityError, UsageError
from core.index.tables import segments as seg
from core.index.tables.meta import get_meta
from core.index.tables.notes import note_extra
from core.index.tables.notes_fts import FTS_COLUMNS, stored_texts
from core.ranking import bm25f, stored
from core.ranking.analysis import language_analyzer_for, language_tag, term_words
from core.ranking.classes import CLASS_ARRAYS, class_stats_from
from core.ranking.languages import note_language
from core.ranking.segments import dead_counts
from core.ranking.sparse import SPARSE_GROUP

VERIFIED = "verified"  # every newly dead note counted from its own postings
WHOLE_ROWS = "whole_arrays_notes"  # notes that did not verify: their postings found in the whole docs array
CHEAPER = "whole_arrays_cheaper"  # notes whose candidates' runs would read as much: the same
WHOLE_OLD = "whole_arrays_old_tombstone"  # the previous tombstone stores no statistics: every id counted whole
WHOLE_UNFIT = "whole_arrays_unfit_tombstone"  # the previous one lists ids not dead now, or other classes
# the query vocabulary (core.ranking.vocabulary): sorted keys, a bisect each (the dictionary is not built)
_VOCAB = ("vocab_words", "vocab_exact", "vocab_base_indptr", "vocab_base_ids")
_WHOLE = ("note_ids", "indptr", "docs", "field_len", "df", *CLASS_ARRAYS)  # what dead_counts reads
_FEW = ("note_ids", "indptr", "side_ptr", "field_len", "class_names", "row_class", *_VOCAB)
_PIECED = ("docs", "field_mask", "body_tf", "side_tf")  # read a piece at a time
ClassRows = list[tuple[str, int, str]]
DfRows = list[tuple[str, int, int]]


@dataclass
class TombstoneSums:
    """The dead notes' exact statistics per class of the segment, and how they were counted."""

    names: tuple[str, ...]
    docs: np.ndarray  # int64 [classes]
    field_len: np.ndarray  # int64 [classes, fields]
    df: dict[tuple[int, int], int] = field(default_factory=dict)  # (class, term id) -> dead notes holding it
    how: list[str] = field(default_factory=list)  # VERIFIED, or why (some) ids were counted from the whole arrays
    whole: int = 0  # how many of the ids were counted from the whole arrays

    def add_df(self, c: int, terms: Sequence[int] | np.ndarray, counts: Sequence[int] | np.ndarray) -> None:
        for t, n in zip(np.asarray(terms).tolist(), np.asarray(counts).tolist(), strict=True):
            if n:
                self.df[(c, t)] = self.df.get((c, t), 0) + n

    def rows(self) -> tuple[ClassRows, DfRows]:
        """(classes rows, df rows) of ``seg.create_tombstone``: a row per class, df rows by class then term."""
        classes = [
            (name, int(self.docs[c]), json.dumps(self.field_len[c].tolist())) for c, name in enumerate(self.names)
        ]
        df = [(self.names[c], t, n) for (c, t), n in sorted(self.df.items()) if n]
        return classes, df


def _uri(path: Path) -> str:
    return f"file:{path}?mode=ro&immutable=1"


def _rows_of(note_ids: np.ndarray, ids: Sequence[int], segment: Path) -> np.ndarray:
    """The rows of ``ids`` in ``note_ids`` (in the order of ``ids``); an id the segment lacks is a UsageError."""
    order = np.argsort(note_ids, kind="stable")
    at = np.searchsorted(note_ids, np.asarray(ids, dtype=np.int64), sorter=order) if note_ids.size else None
    wanted = np.asarray(ids, dtype=np.int64)
    found = np.zeros(wanted.shape[0], dtype=bool) if at is None else at < note_ids.shape[0]
    rows = np.full(wanted.shape[0], -1, dtype=np.int64)
    if at is not None:
        rows[found] = order[at[found]]
        found[found] = note_ids[rows[found]] == wanted[found]
    if not found.all():
        missing = int((~found).sum())
        raise UsageError(
            f"a tombstone lists only notes of its segment: {missing} of {len(ids)} ids are not in {segment}",
            path=str(segment),
            expected=len(ids),
            actual=len(ids) - missing,
        )
    return rows


def whole_sums(segment: Path, ids: Sequence[int], how: str = "") -> TombstoneSums:
    """The statistics of ``ids`` counted from the segment's whole arrays (``dead_counts``: the old way)."""
    conn = sqlite3.connect(_uri(segment), uri=True)
    try:
        arrays = stored.load_group(conn, SPARSE_GROUP, _WHOLE, only=True)
    finally:
        conn.close()
    if arrays is None:
        raise IntegrityError(f"segment {segment} holds no term-major arrays", path=str(segment))
    n_docs, fields, n_terms = int(arrays["note_ids"].shape[0]), int(arrays["field_len"].shape[1]), arrays["df"].shape[0]
    stats = class_stats_from(arrays, n_docs, fields, n_terms)
    rows = _rows_of(np.asarray(arrays["note_ids"], dtype=np.int64), ids, segment)
    counted = dead_counts(stats, arrays["field_len"], arrays["indptr"], arrays["docs"], n_terms, rows)
    out = TombstoneSums(stats.names, counted.docs, counted.field_len, how=[how] if how else [], whole=len(ids))
    for c in range(len(stats.names)):
        terms = np.flatnonzero(counted.df[c])
        out.add_df(c, terms, counted.df[c][terms])
    return out


class _Segment:
    """The arrays of a segment a note's verification reads: the small ones whole, the postings by piece."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn, self.path = conn, path
        arrays = stored.load_group(conn, SPARSE_GROUP, (*_FEW, *_PIECED), reader=stored.Reader(conn), only=True)
        if arrays is None:
            raise IntegrityError(f"segment {path} holds no term-major arrays", path=str(path))
        self.a: dict[str, Any] = arrays
        self.indptr = np.asarray(arrays["indptr"], dtype=np.int64)
        self.side_ptr = np.asarray(arrays["side_ptr"], dtype=np.int64)
        self.field_len = np.asarray(arrays["field_len"], dtype=np.int64)
        self.names = tuple(json.loads(arrays["class_names"].tobytes().decode("utf-8")))
        self.row_class = np.asarray(arrays["row_class"], dtype=np.int64)
        n = self.field_len.shape[0]
        top = int(self.row_class.max()) if n else -1
        if self.row_class.shape != (n,) or self.field_len.shape[1] != len(FTS_COLUMNS) or top >= len(self.names):
            raise IntegrityError(f"segment {path}: stored class rows or field lengths do not fit its {n} notes")
        self.words: list[str] = json.loads(arrays["vocab_words"].tobytes().decode("utf-8"))
        self.exact, self.base_ptr, self.base_ids = (arrays[k] for k in _VOCAB[1:])
        meta = get_meta(conn)
        self.default = str((meta.get("settings") or {}).get("language") or "en")
        self.languages = sorted({self.default, *(meta.get("languages") or ())})

    def texts(self, note_id: int) -> tuple[str, ...]:
        return stored_texts(self.conn, [note_id]).get(note_id) or ("",) * len(FTS_COLUMNS)

    def language(self, note_id: int, texts: tuple[str, ...]) -> str:
        """The language the build analysed the note in (``core.build.ingest.prepare_notes``: frontmatter, else
        detected from its names and body, else the default)."""
        extra = note_extra(self.conn, note_id)
        return note_language(extra.get("lang") or extra.get("language"), texts[0] + "\n" + texts[-1], self.default)

    def candidates(self, texts: tuple[str, ...], languages: Sequence[str]) -> np.ndarray:
        """Term ids a note of ``texts`` may hold: their words analysed in each of ``languages``."""
        words = sorted({w for text in texts for w in term_words(text)})
        analyzer = language_analyzer_for(self.default)
        found: set[str] = set()
        for lang in languages:
            tagged = [(language_tag(lang, self.default) + w).decode("utf-8") for w in words]
            mapping = analyzer.map_words(tagged)
            found.update(t for w in tagged for t in mapping[w])
        n_terms = self.indptr.shape[0] - 1
        ids = {i for t in found for i in self.term_ids(t)}
        return np.asarray(sorted(i for i in ids if 0 <= i < n_terms), dtype=np.int64)

    def term_ids(self, term: str) -> list[int]:
        """The ids the vocabulary gives ``term``'s key: its exact term (``=word``), else the key's base
        terms in every language (more than the term itself at times: each candidate is verified)."""
        key = term[1:] if term.startswith("=") else term[3:] if term[2:3] == ":" else term
        i = bisect.bisect_left(self.words, key)
        if i >= len(self.words) or self.words[i] != key:
            return []
        if term.startswith("="):
            return [int(self.exact[i])] if int(self.exact[i]) >= 0 else []
        return self.base_ids[int(self.base_ptr[i]) : int(self.base_ptr[i + 1])].tolist()

    def find(self, a: int, b: int, row: int) -> int:
        """The position of ``row`` in the ascending run ``docs[a:b]``, or -1: searched a piece at a time, each
        step reading one piece of the run's rest; the steps alternate between the piece where ``row`` would
        lie were the rest's rows spread evenly between the rows known around it (a term's postings mostly
        are: one piece, where bisecting read log2 of the run's pieces) and the middle piece (at most twice
        the bisection's steps, whatever the rows). An array stored whole: searched as it is."""
        docs = self.a["docs"]
        per = getattr(docs, "per_piece", None) or b + 1  # stored whole: one step
        below, above = -1, self.field_len.shape[0]  # the rows just outside docs[a:b] (or the segment's bounds)
        spread = True
        while a < b:
            at = a + (b - a) * (row - below) // (above - below) if spread and above > below + 1 else (a + b - 1) // 2
            k, spread = min(max(at, a), b - 1) // per, not spread
            lo, hi = max(a, k * per), min(b, (k + 1) * per)
            run = np.asarray(docs[lo:hi])  # within one piece: a slice (an index would count as a gather)
            if row < int(run[0]):
                b, above = lo, int(run[0])
            elif row > int(run[-1]):
                a, below = hi, int(run[-1])
            else:
                at = int(np.searchsorted(run, row))
                return lo + at if int(run[at]) == row else -1
        return -1

    def posting_tf(self, term: int, j: int) -> np.ndarray:
        """int64 [fields]: the stored counts of posting ``j`` (of ``term``)."""
        mask = np.asarray(self.a["field_mask"][j : j + 1])
        body = np.asarray(self.a["body_tf"][j : j + 1])
        sides = int(bm25f.side_counts(mask)[0])
        values = np.zeros(0, dtype=np.uint16)
        if sides:  # its side values follow those of the term's earlier postings
            start = int(self.indptr[term])
            before = int(bm25f.side_counts(np.asarray(self.a["field_mask"][start:j])).sum()) if j > start else 0
            at = int(self.side_ptr[term]) + before
            values = np.asarray(self.a["side_tf"][at : at + sides])
        return bm25f.posting_tf(mask, body, values)[0].astype(np.int64)

    def held_terms(self, note_id: int, row: int) -> tuple[np.ndarray, str]:
        """(the term ids the note at ``row`` holds, how they were found): its words analysed in its own
        language, else in every language of the segment too, verified against its field lengths
        (VERIFIED); else, or when reading the candidates' runs would cost more pieces than the whole
        ``docs`` (CHEAPER), its postings found in the whole array (WHOLE_ROWS: none verified)."""
        texts = self.texts(note_id)
        own = self.language(note_id, texts)
        every = sorted({own, *self.languages})
        for languages in ([own], every) if every != [own] else ([own],):
            candidates = self.candidates(texts, languages)
            if self.cheaper_whole(candidates):
                return self.scanned(row), CHEAPER
            held = self.verified(candidates, row)
            if held is not None:
                return held, VERIFIED
        return self.scanned(row), WHOLE_ROWS

    def cheaper_whole(self, candidates: np.ndarray) -> bool:
        """Would finding the candidates' postings read as many pieces as the whole ``docs`` array (a long note
        in a small segment)? A run of a piece or two reads those, a longer one a piece per bisection step,
        and a term the note holds about one piece of its counts more. (``docs`` stored whole: never.)"""
        per = getattr(self.a["docs"], "per_piece", None)
        if per is None or not candidates.size:
            return False
        total = -(-int(self.indptr[-1]) // per)
        a, b = self.indptr[candidates], self.indptr[candidates + 1]
        short = (b - a) <= 2 * per
        firsts, lasts = a[short] // per, np.maximum(b[short] - 1, a[short]) // per
        spans = np.sort(np.concatenate([firsts, lasts]))  # (np.unique imports numpy.ma: 0.1 s of a new process)
        pieces = int(np.count_nonzero(np.diff(spans))) + int(spans.size > 0)
        steps = np.log2(np.maximum((b[~short] - a[~short]) / per, 1.0)).sum() + int((~short).sum())
        return pieces + steps + candidates.shape[0] >= total

    def scanned(self, row: int) -> np.ndarray:
        """The term ids the note at ``row`` holds, from the whole ``docs`` array (read once, then kept):
        exact as ``dead_counts`` counts them."""
        docs = np.asarray(self.a["docs"])
        hit = np.flatnonzero(docs == row)
        return np.searchsorted(self.indptr, hit, side="right") - 1

    def verified(self, candidates: np.ndarray, row: int) -> np.ndarray | None:
        """The candidates the note at ``row`` holds, when they are all it holds (their stored counts sum to
        its field lengths); else None."""
        total = np.zeros(len(FTS_COLUMNS), dtype=np.int64)
        held = []
        for t in candidates.tolist():
            j = self.find(int(self.indptr[t]), int(self.indptr[t + 1]), row)
            if j >= 0:
                held.append(t)
                total += self.posting_tf(t, j)
        return np.asarray(held, dtype=np.int64) if np.array_equal(total, self.field_len[row]) else None


def _previous(previous: Path | None, ids: Sequence[int]) -> tuple[list[int], tuple[ClassRows, DfRows] | None, str]:
    """(the previous tombstone's ids, its statistics, why it cannot be built on: '' when it can)."""
    if previous is None:
        return [], ([], []), ""
    conn = sqlite3.connect(_uri(previous), uri=True)
    try:
        old_ids, stats = seg.dead_note_ids(conn), seg.dead_statistics(conn)
    finally:
        conn.close()
    if stats is None:
        return old_ids, None, WHOLE_OLD
    if not set(old_ids).issubset(ids):
        return old_ids, None, WHOLE_UNFIT
    return old_ids, stats, ""


def _start(names: tuple[str, ...], stats: tuple[ClassRows, DfRows]) -> TombstoneSums | None:
    """Sums holding a previous tombstone's statistics; None when its classes are not the segment's."""
    classes, df = stats
    out = TombstoneSums(names, np.zeros(len(names), np.int64), np.zeros((len(names), len(FTS_COLUMNS)), np.int64))
    if classes and [c for c, _, _ in classes] != list(names):
        return None
    code = {name: c for c, name in enumerate(names)}
    for c, (_, docs, lengths) in enumerate(classes):
        out.docs[c], out.field_len[c] = docs, json.loads(lengths)
    for name, term, n in df:
        if name not in code:
            return None
        out.df[(code[name], term)] = n
    return out


def tombstone_sums(segment: Path, ids: Sequence[int], previous: Path | None = None) -> TombstoneSums:
    """The exact statistics of ALL the dead ``ids`` of ``segment``: ``previous`` (the segment's tombstone
    so far, if any) plus the newly dead notes' contributions, each verified from its own postings."""
    old_ids, stats, why = _previous(previous, ids)
    if stats is None:
        return whole_sums(segment, ids, why)
    new = sorted(set(ids).difference(old_ids))
    conn = sqlite3.connect(_uri(segment), uri=True)
    try:
        view = _Segment(conn, segment)
        out = _start(view.names, stats)
        if out is None:
            conn.close()
            return whole_sums(segment, ids, WHOLE_UNFIT)
        rows = _rows_of(np.asarray(view.a["note_ids"], dtype=np.int64), new, segment)
        counts: dict[str, int] = {}
        for nid, row in zip(new, rows.tolist(), strict=True):
            held, how = view.held_terms(nid, row)
            counts[how] = counts.get(how, 0) + 1
            c = int(view.row_class[row])
            out.docs[c] += 1
            out.field_len[c] += view.field_len[row]
            out.add_df(c, held, np.ones(held.shape[0], dtype=np.int64))
    finally:
        conn.close()
    out.how = [VERIFIED] if set(counts) <= {VERIFIED} else [f"{k}:{n}" for k, n in sorted(counts.items())]
    out.whole = sum(n for k, n in counts.items() if k != VERIFIED)
    return out
