"""The query vocabulary (``core.ranking.expansion``): every analysed term's keys in sorted order, for
prefix, subword and typo expansion; stored in the generation by the build (``vocabulary_arrays``) and
read back, or computed from the term dictionary on first use."""

from __future__ import annotations

import bisect
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from core.errors import IntegrityError
from core.ranking.languages import has_cjk

# typo look-ups (Vocabulary.known) after which a process keeps the set of words
KNOWN_SET_AFTER = 8

VOCABULARY_ARRAYS = (
    "vocab_words",
    "vocab_reversed",
    "vocab_chars",
    "vocab_exact",
    "vocab_base_indptr",
    "vocab_base_ids",
)


def _vocabulary_lists(term_id: Mapping[str, int], df: np.ndarray) -> tuple[list[str], list[int], list[int], list[int]]:
    """(sorted words, exact term id of each or -1, CSR offsets and ids of each word's base terms in
    term-dictionary order) over the terms that occur in a note."""
    keys: dict[str, list[int]] = {}
    exact: dict[str, int] = {}
    alive = (df > 0).tolist()  # a list: indexing a numpy array per term costs more than the rest of the loop
    n = len(alive)
    for term, tid in term_id.items():
        if tid >= n or not alive[tid]:
            continue
        if term.startswith("="):
            exact[term[1:]] = tid
        else:
            keys.setdefault(term[3:] if term[2:3] == ":" else term, []).append(tid)
    words = sorted({*keys, *exact})
    base = [keys.get(w, []) for w in words]
    indptr = [0]
    for ids in base:
        indptr.append(indptr[-1] + len(ids))
    return words, [exact.get(w, -1) for w in words], indptr, [t for ids in base for t in ids]


def _key(term: str) -> str:
    """The vocabulary word of a term: an exact term without ``=``, a base term without its language."""
    if term.startswith("="):
        return term[1:]
    return term[3:] if term[2:3] == ":" else term


def appended_lists(prev: Vocabulary, added: Mapping[str, int]) -> tuple[list[str], list[int], list[int], list[int]]:
    """``_vocabulary_lists`` of ``prev``'s dictionary with the ``added`` terms (term -> a new id, above every id of
    ``prev``'s): a segmented generation's view (core.ranking.segment_view: its largest segment's words, the other
    segments' terms appended after its ids). A word keeps its ids ascending: ``prev``'s, then the added ones.
    The lists are spliced: a bisection per added term and list copies (at 100k notes a reader's switch to the
    next generation spent 0.05 s renumbering every word, when only a few are new)."""
    words, exact, ptr, ids = prev.sorted, prev._exact, prev._indptr, prev._ids
    n = len(words)
    fresh = fresh_words(words, added)
    pos = [bisect.bisect_left(words, f) for f in fresh]  # fresh word k goes before words[pos[k]]
    out_words: list[str] = []
    out_exact: list[int] = []
    last = 0
    for p, f in zip(pos, fresh):
        out_words += words[last:p]
        out_words.append(f)
        out_exact += exact[last:p]
        out_exact.append(-1)
        last = p
    out_words += words[last:]
    out_exact += exact[last:]
    extra: dict[int, list[int]] = {}
    for term, tid in added.items():
        i = bisect.bisect_left(out_words, _key(term))
        if term.startswith("="):
            out_exact[i] = tid
        else:
            extra.setdefault(i, []).append(tid)
    if not fresh and not extra:
        return out_words, out_exact, list(ptr), list(ids)
    fresh_at = [p + k for k, p in enumerate(pos)]  # each fresh word's index in the merged list
    counts = np.zeros(len(out_words), dtype=np.int64)
    old_at = np.arange(n, dtype=np.int64) + np.searchsorted(np.asarray(pos, dtype=np.int64), np.arange(n), "right")
    counts[old_at] = np.diff(np.asarray(ptr, dtype=np.int64))
    out_ids: list[int] = []
    last = 0
    for i in sorted(extra):
        counts[i] += len(extra[i])
        c = bisect.bisect_left(fresh_at, i)
        at = ptr[pos[c]] if c < len(fresh_at) and fresh_at[c] == i else ptr[i - c + 1]  # the end of its run
        out_ids += ids[last:at]
        out_ids += sorted(extra[i])
        last = at
    out_ids += ids[last:]
    return out_words, out_exact, [0, *np.cumsum(counts).tolist()], out_ids


def fresh_words(words: list[str], added: Iterable[str]) -> list[str]:
    """The vocabulary words of the ``added`` terms that the sorted ``words`` lack, sorted."""
    n = len(words)
    return sorted({k for k in map(_key, added) if (i := bisect.bisect_left(words, k)) >= n or words[i] != k})


def spliced(words: list[str], more: list[str]) -> list[str]:
    """``sorted(words + more)`` of two sorted lists without a common item: ``more`` spliced in, a bisection
    each (``words`` itself when ``more`` is empty: never changed by its readers)."""
    if not more:
        return words
    out: list[str] = []
    last = 0
    for m in more:
        p = bisect.bisect_left(words, m, last)
        out += words[last:p]
        out.append(m)
        last = p
    out += words[last:]
    return out


def appended_derived(stored: dict[str, np.ndarray], fresh: list[str]) -> tuple[list[str], set[str]]:
    """The suffix list and typo alphabet of ``stored``'s words with the words ``fresh`` (none of them one of
    its words) added: its stored ones (decoded once per stored arrays) with theirs merged in, equal to
    ``_reversed_words`` and ``_letters`` of every word (a reader's first query on each new generation of a
    100k vault spent 70 and 80 ms computing those again)."""
    reverse = _kept(stored, "reversed", lambda: _json_value(stored["vocab_reversed"]))
    chars = _kept(stored, "chars", lambda: frozenset(_json_value(stored["vocab_chars"])))
    return spliced(reverse, sorted(w[::-1] for w in fresh)), {*chars, *_letters(fresh)}


def _stored_lists(stored: dict[str, np.ndarray]) -> tuple[list[str], list[int], list[int], list[int]]:
    """The word lists of a stored vocabulary (``vocabulary_arrays``), decoded (read only by the Vocabularies
    that share them)."""
    return (
        _json_value(stored["vocab_words"]),
        stored["vocab_exact"].tolist(),
        stored["vocab_base_indptr"].tolist(),
        stored["vocab_base_ids"].tolist(),
    )


def _reversed_words(words: list[str]) -> list[str]:
    return sorted(w[::-1] for w in words)


def _letters(words: list[str]) -> set[str]:
    return {ch for w in words if not has_cjk(w) for ch in w}


def _json_bytes(value: object) -> np.ndarray:
    return np.frombuffer(json.dumps(value, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def _json_value(array: np.ndarray) -> Any:
    return json.loads(array.tobytes().decode("utf-8"))


def vocabulary_arrays(term_id: Mapping[str, int], df: np.ndarray) -> dict[str, np.ndarray]:
    """What a Vocabulary of (``term_id``, ``df``) holds, as the arrays the build stores beside the
    sparse postings (``core.ranking.sparse.store_sparse``): a new process then loads the vocabulary
    instead of sorting and splitting every term of the generation (VOCABULARY_ARRAYS)."""
    words, exact, indptr, ids = _vocabulary_lists(term_id, df)
    return {
        "vocab_words": _json_bytes(words),
        "vocab_reversed": _json_bytes(_reversed_words(words)),
        "vocab_chars": _json_bytes("".join(sorted(_letters(words)))),
        "vocab_exact": np.asarray(exact, dtype=np.int64),
        "vocab_base_indptr": np.asarray(indptr, dtype=np.int64),
        "vocab_base_ids": np.asarray(ids, dtype=np.int64),
    }


# What a vocabulary decodes from its stored arrays or its dictionary, kept per source object (immutable: a
# segment's stored arrays and term dictionary, cached per segment): a reader switching to the next generation of
# the same segments (core.ranking.segment_view) decodes nothing again. The few most recent sources are kept.
_KEPT: OrderedDict[tuple[int, str], tuple[object, Any]] = OrderedDict()
_KEPT_SIZE = 8  # a segment's lists, names, suffix list and letters, and the previous ones' while a reader switches
_KEPT_LOCK = threading.Lock()


def _kept(source: object, what: str, make: Callable[[], Any]) -> Any:
    """``make()``, kept for ``source`` (by identity: the entry holds ``source``, so its id is not reused)."""
    key = (id(source), what)
    with _KEPT_LOCK:
        found = _KEPT.get(key)
        if found is not None and found[0] is source:
            _KEPT.move_to_end(key)
            return found[1]
    value = make()
    with _KEPT_LOCK:
        _KEPT[key] = (source, value)
        while len(_KEPT) > _KEPT_SIZE:
            _KEPT.popitem(last=False)
    return value


def _reverse(term_id: Mapping[str, int], n: int) -> np.ndarray:
    """object [n]: each term id's term (None: an id no term names), ids at or beyond ``n`` left out."""
    names = np.full(n, None, dtype=object)
    ids = np.fromiter(term_id.values(), dtype=np.int64, count=len(term_id))
    keep = ids < n
    names[ids[keep]] = np.array(list(term_id), dtype=object)[keep]
    return names


def _all_names(term_id: Mapping[str, int], n: int) -> np.ndarray:
    """``_reverse`` of ``term_id``, the part of a view's dictionary that is a segment's own kept per segment."""
    base, extra = getattr(term_id, "base", None), getattr(term_id, "extra", None)
    if base is None or extra is None:
        return _kept(term_id, f"reverse:{n}", lambda: _reverse(term_id, n))
    first = n - len(extra)
    names = np.empty(n, dtype=object)
    names[:first] = _kept(base, f"reverse:{first}", lambda: _reverse(base, first))
    names[first:] = None
    for term, tid in extra.items():
        names[tid] = term
    return names


class _TermNames(Mapping[int, str]):
    """Term id -> term over the terms of ``term_id`` with ``df > 0``: one object array filled by numpy
    (a dict built term by term costs ~1 us a term, every process)."""

    def __init__(self, term_id: Mapping[str, int], df: np.ndarray) -> None:
        names = np.array(_all_names(term_id, df.shape[0]), dtype=object)  # a copy: the kept one is shared
        names[df <= 0] = None
        self._names = names

    def __getitem__(self, tid: int) -> str:  # an id out of range, or of a term in no note: KeyError
        term = self._names[tid] if 0 <= tid < self._names.shape[0] else None
        if term is None:
            raise KeyError(tid)
        return str(term)

    def __contains__(self, tid: object) -> bool:
        return bool(
            isinstance(tid, (int, np.integer)) and 0 <= tid < self._names.shape[0] and self._names[tid] is not None
        )

    def __iter__(self) -> Iterator[int]:
        return iter(np.flatnonzero(self._names != None).tolist())  # noqa: E711 (elementwise)

    def __len__(self) -> int:
        return int(np.count_nonzero(self._names != None))  # noqa: E711 (elementwise)


class Vocabulary:
    """The words of one generation, sorted forwards and backwards, for prefix, suffix and typo look-ups.

    A *key* is a base term without its language namespace, or an exact term without ``=``; each
    key maps to base term ids (an exact key to the base terms of its word are found by analysis).

    ``stored`` (``vocabulary_arrays`` of the same ``term_id`` and ``df``, as the build stored them)
    is used instead of computing; the suffix list, the typo alphabet and the id -> term map are
    built on first use only (most queries need none of them). ``filtered``: ``df`` is a restricted
    caller's (visible df, core.ranking.classes) and ``stored`` the whole generation's: a word is then
    a vocabulary word only while one of its terms has ``df`` > 0 (``live``), and a term id is one of
    a word's only while its ``df`` > 0, so no look-up surfaces a word only hidden notes hold.
    ``lists`` (what ``_vocabulary_lists`` gives: ``appended_lists`` of a segmented view's base, or the
    generation's own for a caller's view) stands in for ``stored`` the same way.
    """

    def __init__(
        self,
        term_id: Mapping[str, int],
        df: np.ndarray,
        n_docs: int,
        stored: dict[str, np.ndarray] | None = None,
        filtered: bool = False,
        lists: tuple[list[str], list[int], list[int], list[int]] | None = None,
        derived: Callable[[], tuple[list[str], set[str]]] | None = None,
    ) -> None:
        self.n_docs = n_docs
        self._derived = derived  # with ``lists``: their suffix list and alphabet (``appended_derived``)
        self.df = df
        self._term_id = term_id
        self._stored = stored
        self._filtered = filtered and (stored is not None or lists is not None)
        self._live: np.ndarray | None = None
        self._live_bytes = b""  # ``live`` a byte per word (``_index``)
        self._reversed: list[str] | None = None
        self._chars: set[str] | None = None
        self._name: _TermNames | None = None
        self._known_calls = 0
        self._known_set: frozenset[str] | None = None
        if lists is not None:  # ``appended_lists``: what _vocabulary_lists gives, from a view's base segment
            self.sorted, self._exact, self._indptr, self._ids = lists
        elif stored is None:
            self.sorted, self._exact, self._indptr, self._ids = _vocabulary_lists(term_id, df)
        else:  # decoded once per stored arrays (a segment's, shared by every generation that lists it)
            self.sorted, self._exact, self._indptr, self._ids = _kept(stored, "lists", lambda: _stored_lists(stored))
            w = len(self.sorted)
            if len(self._exact) != w or len(self._indptr) != w + 1 or self._indptr[-1] != len(self._ids):
                raise IntegrityError(f"stored vocabulary arrays disagree on its {w} words")

    @property
    def live(self) -> np.ndarray | None:
        """bool per word of ``sorted`` (``filtered`` only, else None): does one of its terms have df > 0?"""
        if self._filtered and self._live is None:
            ptr, exact = np.asarray(self._indptr, dtype=np.int64), np.asarray(self._exact, dtype=np.int64)
            held = np.concatenate(([0], np.cumsum(self.df[np.asarray(self._ids, dtype=np.int64)] > 0)))
            has_exact = (exact >= 0) & (self.df[np.maximum(exact, 0)] > 0)
            self._live = ((held[ptr[1:]] - held[ptr[:-1]]) > 0) | has_exact
            self._live_bytes = self._live.tobytes()
        return self._live

    def _alive(self, ids: list[int]) -> list[int]:
        """The term ids of ``ids`` the df counts in some note (all of them unless ``filtered``)."""
        return [t for t in ids if self.df[t] > 0] if self._filtered else ids

    @property
    def reversed(self) -> list[str]:
        """The words spelt backwards, sorted (suffix look-ups): only a word that is not in the
        vocabulary (or a one-character CJK word) looks up suffixes."""
        if self._reversed is None:
            found = self._stored
            if found:
                self._reversed = _json_value(found["vocab_reversed"])
            else:
                self._reversed = self._derived()[0] if self._derived else _reversed_words(self.sorted)
        return self._reversed

    @property
    def chars(self) -> set[str]:
        """The letters of the non-CJK words (the typo alphabet)."""
        if self._chars is None:
            found = self._stored
            if found:
                self._chars = set(_json_value(found["vocab_chars"]))
            else:
                self._chars = self._derived()[1] if self._derived else _letters(self.sorted)
        return self._chars

    @property
    def name(self) -> Mapping[int, str]:
        """Term id -> term, for the terms that occur in a note."""
        if self._name is None:
            self._name = _TermNames(self._term_id, self.df)
        return self._name

    @property
    def base(self) -> dict[str, list[int]]:
        """key -> its base term ids (``base_ids`` looks one up without building this)."""
        ptr = self._indptr
        found = {w: self._alive(self._ids[a:b]) for w, a, b in zip(self.sorted, ptr, ptr[1:]) if b > a}
        return {w: ids for w, ids in found.items() if ids}

    @property
    def exact(self) -> dict[str, int]:
        """exact key -> its term id (``is_exact`` looks one up without building this)."""
        return {w: e for w, e in zip(self.sorted, self._exact) if e >= 0 and self._alive([e])}

    def _index(self, word: str) -> int:
        """The position of ``word`` in ``sorted``, -1 when it is not a vocabulary word."""
        i = bisect.bisect_left(self.sorted, word)
        if i >= len(self.sorted) or self.sorted[i] != word:
            return -1
        return i if not self._filtered or (self.live is not None and self._live_bytes[i]) else -1

    def known(self, candidates: Iterable[str]) -> list[str]:
        """The candidates that are vocabulary words, in their order (typo edits: hundreds per word).

        One bisect each; a process that has looked up ``KNOWN_SET_AFTER`` batches builds the set of
        words once and uses it from then on (a server; a one-shot search does not pay for it)."""
        self._known_calls += 1
        if self._known_set is None and self._known_calls > KNOWN_SET_AFTER:
            live = self.live
            self._known_set = frozenset(self.sorted if live is None else np.asarray(self.sorted, dtype=object)[live])
        found = self._known_set
        if found is not None:
            return [c for c in candidates if c in found]
        if self._filtered:
            return [c for c in candidates if self._index(c) >= 0]
        words, n = self.sorted, len(self.sorted)
        return [c for c in candidates if (i := bisect.bisect_left(words, c)) < n and words[i] == c]

    def is_exact(self, key: str) -> bool:
        """Is ``key`` the surface form of an exact term (``=key``)?"""
        i = self._index(key)
        return i >= 0 and self._exact[i] >= 0 and bool(self._alive([self._exact[i]]))

    def base_ids(self, key: str) -> list[int]:
        """The base term ids of a vocabulary word (empty when it has none)."""
        i = self._index(key)
        return self._alive(self._ids[self._indptr[i] : self._indptr[i + 1]]) if i >= 0 else []

    def surfaces(self, key: str) -> list[int]:
        """Term ids a vocabulary word stands for: its exact term, else its base terms."""
        i = self._index(key)
        if i < 0:
            return []
        if self._exact[i] >= 0 and self._alive([self._exact[i]]):
            return [self._exact[i]]
        return self._alive(self._ids[self._indptr[i] : self._indptr[i + 1]])

    def surface(self, key: str, df: Callable[[int], int] | None = None) -> int | None:
        """The one term a vocabulary word stands for (None: not a word): its exact term, else the base term
        that ``df`` (default: every note's) counts in the most notes, the smaller term on a tie. Never the first
        by term id: ids follow the order a build met the terms in, and a merged or segmented generation
        numbers the same terms otherwise (the choice must be the same in every layout of the same notes)."""
        ids = self.surfaces(key)
        if len(ids) <= 1:
            return ids[0] if ids else None
        count = df or (lambda t: int(self.df[t]))
        name = self.name
        return min(ids, key=lambda t: (-count(t), name[t]))

    def _bounds(self, words: list[str], prefix: str) -> tuple[int, int]:
        return bisect.bisect_left(words, prefix), bisect.bisect_left(words, prefix + "\U0010ffff")

    def starting(self, prefix: str) -> list[str]:
        lo, hi = self._bounds(self.sorted, prefix)
        live = self.live
        if live is None:
            return self.sorted[lo:hi]
        return [self.sorted[i] for i in (np.flatnonzero(live[lo:hi]) + lo).tolist()]

    def ending(self, suffix: str) -> list[str]:
        lo, hi = self._bounds(self.reversed, suffix[::-1])
        found = [w[::-1] for w in self.reversed[lo:hi]]
        return [w for w in found if self._index(w) >= 0] if self._filtered else found

    def best(
        self, candidates: Sequence[str], limit: int, df: Callable[[int], int] | None = None
    ) -> list[tuple[str, int, int]]:
        """(word, term id, df) of the most frequent candidates (a word's ``surface`` term) that ``df``
        (default: every note's) finds in at least one note."""
        df = df or (lambda t: int(self.df[t]))
        found = [(w, t, d) for w in candidates if (t := self.surface(w, df)) is not None and (d := df(t)) > 0]
        found.sort(key=lambda wtd: (-wtd[2], not self.is_exact(wtd[0]), wtd[0]))  # equals: a surface form first
        return found[:limit]


_VOCAB: dict[int, tuple[weakref.ref, Vocabulary]] = {}
_VOCAB_LOCK = threading.Lock()


def vocabulary(sparse: Any) -> Vocabulary:
    """The Vocabulary of a SparseIndex, built on first use and kept while the index lives."""
    key = id(sparse)
    with _VOCAB_LOCK:
        found = _VOCAB.get(key)
        if found is not None and found[0]() is sparse:
            return found[1]
    terms = sparse.term_id
    restricted = getattr(sparse, "seen", None) is not None  # a caller's view: its df, the generation's words
    stored, every = getattr(sparse, "vocabulary", None), getattr(terms, "all", terms)
    # a caller's view of an index without stored arrays: the generation's words filtered by its df (as the
    # stored ones are) when a query built them, not all its terms sorted and split again per visible set
    given = getattr(sparse, "vocabulary_lists", None)  # a segmented generation's view (core.ranking.segment_view)
    lists = given() if given is not None else _whole_lists(every) if restricted and stored is None else None
    derived = getattr(given, "derived", None)  # the view's suffix list and alphabet, from its base's stored ones
    vocab = Vocabulary(every, sparse.df, sparse.n_stat, stored, restricted, lists=lists, derived=derived)
    with _VOCAB_LOCK:
        for k in [k for k, (ref, _) in _VOCAB.items() if ref() is None]:
            del _VOCAB[k]
        _VOCAB[key] = (weakref.ref(sparse), vocab)
    return vocab


def _whole_lists(term_id: Mapping[str, int]) -> tuple[list[str], list[int], list[int], list[int]] | None:
    """The word lists of the unrestricted Vocabulary built over this very dictionary, if one is kept."""
    with _VOCAB_LOCK:
        for ref, vocab in _VOCAB.values():
            if vocab._term_id is term_id and not vocab._filtered and vocab._stored is None and ref() is not None:
                return vocab.sorted, vocab._exact, vocab._indptr, vocab._ids
    return None
