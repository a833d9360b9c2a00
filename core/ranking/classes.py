"""Per-classification statistics of a generation: what a caller's BM25F N, document frequencies and
average field lengths are summed from (issue 29: statistics summed over (segment, class)).

Every note belongs to one class: its ``classification`` lowered as the filters' SQL lowers it
(``lower(coalesce(classification, 'public'))``, core.ranking.filters), so a caller's visible
classes are the stored names its ``classifications`` equal. Stored with the sparse arrays:

- ``row_class``: the class code of each row (the names' index, names sorted);
- per class its notes (``class_docs``) and exact field-length sums (``class_field_len``);
- per class the df of each of its terms, sparse (``class_df_ptr``; ``class_df_gaps``: the class's
  term ids ascending, each stored as its gap from the one before (the first as itself);
  ``class_df_counts``; both in the smallest unsigned type that holds them), for every class but
  the one with the most notes (the *majority*): its df is the total df minus the others'. A vault
  with one class stores no df of its own.

A caller's statistics are then sums over its visible classes: exact integers, the same whatever
the order, so its N, df and averages equal those of an index of its visible notes alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from core.errors import IntegrityError

CLASS_ARRAYS = ("class_names", "row_class", "class_docs", "class_field_len", "class_df_ptr", "class_df_gaps",
                "class_df_counts")  # fmt: skip


# The class of a segmented generation's tombstoned rows (core.ranking.segment_view): its statistics are the
# tombstones' exact ones and no caller selects it, so every caller's statistics leave the dead notes out. No
# note's classification is this name (core.vault.notes.read_classification reads one with a control
# character as unreadable).
DELETED = "\x00deleted"


@dataclass(frozen=True)
class ClassStats:
    """The per-class statistics of one sparse index (numbers and class names, no note text)."""

    names: tuple[str, ...]  # sorted class names
    row_class: np.ndarray  # uint8 / uint16 [n_docs]: each row's index into ``names``
    docs: np.ndarray  # int64 [classes]: notes per class
    field_len: np.ndarray  # int64 [classes, fields]: each class's exact field-length sums
    df_ptr: np.ndarray  # int64 [classes + 1]: class c's df at df_terms[df_ptr[c]:df_ptr[c+1]] (majority: empty)
    df_terms: np.ndarray  # int32: term ids, ascending within a class
    df_counts: np.ndarray  # unsigned: their df within the class

    @property
    def major(self) -> int:
        """The class with the most notes (the first of equals), whose df is derived; -1 when none."""
        return int(np.argmax(self.docs)) if self.docs.size else -1

    def select(self, visible: Iterable[str]) -> np.ndarray:
        """bool per class: is it one of ``visible`` (the caller's classifications, as the filters hold them)?
        ``DELETED`` never is."""
        wanted = set(visible) - {DELETED}
        return np.fromiter((name in wanted for name in self.names), dtype=bool, count=len(self.names))

    def rows(self, selected: np.ndarray) -> np.ndarray:
        """bool per row: is its class selected?"""
        return selected[self.row_class] if selected.size else np.zeros(self.row_class.shape[0], dtype=bool)

    def n_docs(self, selected: np.ndarray) -> int:
        return int(self.docs[selected].sum())

    def length_sums(self, selected: np.ndarray) -> np.ndarray:
        """int64 [fields]: the selected classes' field-length sums."""
        return self.field_len[selected].sum(axis=0, dtype=np.int64)

    def df(self, total: np.ndarray, selected: np.ndarray) -> np.ndarray:
        """int64 per term: its df over the selected classes, from the total df and the stored per-class df."""
        if selected.all():
            return total
        major = self.major
        if selected[major]:  # the total minus the hidden classes'
            out = np.array(total, dtype=np.int64)
            for c in np.flatnonzero(~selected):
                a, b = int(self.df_ptr[c]), int(self.df_ptr[c + 1])
                out[self.df_terms[a:b]] -= self.df_counts[a:b]
            return out
        out = np.zeros(total.shape[0], dtype=np.int64)
        for c in np.flatnonzero(selected):
            a, b = int(self.df_ptr[c]), int(self.df_ptr[c + 1])
            out[self.df_terms[a:b]] += self.df_counts[a:b]
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays stored with the sparse group (CLASS_ARRAYS)."""
        names = np.frombuffer(json.dumps(list(self.names), ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
        gaps = np.diff(self.df_terms.astype(np.int64), prepend=0)
        firsts = self.df_ptr[:-1][self.df_ptr[:-1] < self.df_ptr[1:]]  # each class's first term: itself
        gaps[firsts] = self.df_terms[firsts]
        return {
            "class_names": names,
            "row_class": self.row_class,
            "class_docs": self.docs,
            "class_field_len": self.field_len,
            "class_df_ptr": self.df_ptr,
            "class_df_gaps": _smallest(gaps),
            "class_df_counts": _smallest(self.df_counts),
        }

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays().values())


def _smallest(values: np.ndarray) -> np.ndarray:
    """Non-negative integers in the smallest unsigned type that holds them (uint8 at least)."""
    top = int(values.max()) if values.size else 0
    return values.astype(np.min_scalar_type(top) if top > 0 else np.uint8)


def _terms_of(gaps: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """int32 term ids from their per-class gaps (``ClassStats.arrays``): a running sum restarted per class."""
    total = np.cumsum(gaps, dtype=np.int64)
    starts = ptr[:-1][ptr[:-1] < ptr[1:]]
    before = np.zeros(total.shape[0], dtype=np.int64)
    if starts.size:  # subtract the running sum reached before each class's first term
        offset = np.where(starts > 0, total[np.maximum(starts - 1, 0)], 0)
        sizes = np.diff(np.append(starts, total.shape[0]))
        before = np.repeat(offset, sizes)
    return (total - before).astype(np.int32)


def class_stats_from(arrays: dict[str, np.ndarray], n_docs: int, n_fields: int, n_terms: int) -> ClassStats:
    """The ClassStats of stored arrays, checked against the index they belong to."""
    names = tuple(json.loads(arrays["class_names"].tobytes().decode("utf-8")))
    ptr = arrays["class_df_ptr"]
    if ptr.shape != (len(names) + 1,) or arrays["class_df_gaps"].shape[0] != int(ptr[-1]):
        raise IntegrityError(f"stored per-class document frequencies do not fit the {len(names)} classes")
    stats = ClassStats(
        names,
        arrays["row_class"],
        arrays["class_docs"],
        arrays["class_field_len"],
        ptr,
        _terms_of(arrays["class_df_gaps"], ptr),
        arrays["class_df_counts"],
    )
    c = len(names)
    if stats.row_class.shape != (n_docs,) or stats.docs.shape != (c,) or stats.field_len.shape != (c, n_fields):
        raise IntegrityError(f"stored class statistics do not cover the {n_docs} notes and {c} classes")
    if stats.row_class.size and int(stats.row_class.max()) >= c:
        raise IntegrityError(f"a stored row class is not one of the {c} classes")
    if int(stats.docs.sum()) != n_docs or np.bincount(stats.row_class, minlength=c).tolist() != stats.docs.tolist():
        raise IntegrityError(f"stored notes per class do not add up to the {n_docs} notes")
    ends = int(stats.df_ptr[-1]) if stats.df_ptr.size else -1
    if stats.df_ptr.shape != (c + 1,) or stats.df_terms.shape[0] != ends or stats.df_counts.shape[0] != ends:
        raise IntegrityError(f"stored per-class document frequencies do not fit the {c} classes")
    if ends and int(stats.df_terms.max()) >= n_terms:
        raise IntegrityError(f"stored per-class document frequencies name a term beyond the {n_terms} terms")
    return stats


class ClassBuilder:
    """Computes a ClassStats while the build fills the term-major postings a block of rows at a time."""

    def __init__(self, row_names: Sequence[str], field_len: np.ndarray) -> None:
        self.names = tuple(sorted(set(row_names)))
        code = {name: i for i, name in enumerate(self.names)}
        dtype = np.uint8 if len(self.names) <= 256 else np.uint16
        self.row_class = np.fromiter((code[n] for n in row_names), dtype=dtype, count=len(row_names))
        c = len(self.names)
        self.docs = np.bincount(self.row_class, minlength=c).astype(np.int64)
        self.field_len = np.zeros((c, field_len.shape[1]), dtype=np.int64)
        np.add.at(self.field_len, self.row_class.astype(np.intp), field_len.astype(np.int64))
        self.major = int(np.argmax(self.docs)) if c else -1
        self._terms: list[list[np.ndarray]] = [[] for _ in range(c)]

    def add(self, terms: np.ndarray, rows: np.ndarray) -> None:
        """The postings (term id, row) of a block of rows: each counts once in its row's class's df."""
        if len(self.names) <= 1:
            return
        cls = self.row_class[rows]
        minor = cls != self.major  # most postings are the majority's: they count in the total df only
        if not minor.any():
            return
        cls, terms = cls[minor], terms[minor]
        for c in np.flatnonzero(np.bincount(cls, minlength=len(self.names))).tolist():
            self._terms[c].append(terms[cls == c])

    def finish(self) -> ClassStats:
        ptr, terms, counts = [0], [], []
        for parts in self._terms:
            found, n = np.unique(np.concatenate(parts) if parts else np.zeros(0, np.int32), return_counts=True)
            terms.append(found.astype(np.int32))
            counts.append(n.astype(np.int32))
            ptr.append(ptr[-1] + found.shape[0])
        return ClassStats(
            self.names,
            self.row_class,
            self.docs,
            self.field_len,
            np.asarray(ptr, dtype=np.int64),
            np.concatenate(terms) if terms else np.zeros(0, np.int32),
            np.concatenate(counts) if counts else np.zeros(0, np.int32),
        )
