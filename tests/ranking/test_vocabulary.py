"""The query vocabulary stored in the generation (core.ranking.expansion.vocabulary_arrays): a new
process loads what the build computed instead of sorting and splitting every term, and the query
analysis it gives is exactly the computed one's."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from conftest import note, with_working
from hypothesis import given, settings
from hypothesis import strategies as st

from core import generations as gen
from core.errors import IntegrityError
from core.ranking import expansion
from core.ranking import vocabulary as vocabulary_module
from core.ranking.expansion import VOCABULARY_ARRAYS, QueryAnalyzer, Vocabulary, vocabulary
from core.ranking.sparse import SPARSE_GROUP, compute_sparse, load_sparse

FILES = {
    "en.md": note("Worktrees", "git worktrees and the worktree command; removing items by force " * 5),
    "de.md": note(
        "Kontostand",
        "Die Konten und das Konto: die Dateisicherung der Graphansicht " * 5,
        lang="de",
        classification="secret",
    ),
    "fr.md": note("Tableaux", "Les tableaux sont des objets qui contiennent des valeurs " * 5, lang="fr"),
    "ja.md": note("東京タワー", "東京タワーは東京の電波塔です。東京 タワー " * 5, lang="ja"),
    "mixed.md": note("Mixed", "konten konto graph removed remove forcing worktreeadd"),
}
QUERIES = (
    "remove item force",  # known words
    "worktree",  # a known word: longer words it is a prefix of (quiet)
    "worktr",  # a prefix of words
    "konten",  # German variants (a shorter stem)
    "sicherung graphkonto",  # compound parts: suffix look-ups, a split
    "wroktree removd",  # typos
    "東",  # a one-character CJK word
    "東京タワー tableaux",
    "nothingatall xyzzy",
)


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def _connection(vault: Path) -> sqlite3.Connection:
    return gen.connect_readonly(gen.resolve(gen.layout_for(vault)))


def test_the_stored_vocabulary_is_exactly_the_computed_one(vault: Path) -> None:
    sp = load_sparse(_connection(vault))
    assert sp.vocabulary is not None and set(sp.vocabulary) == set(VOCABULARY_ARRAYS)
    stored = Vocabulary(sp.term_id, sp.df, sp.n_docs, sp.vocabulary)
    computed = Vocabulary(sp.term_id, sp.df, sp.n_docs)
    assert stored.sorted == computed.sorted and stored.reversed == computed.reversed
    assert stored.chars == computed.chars and stored.name == computed.name
    assert stored.base == computed.base and stored.exact == computed.exact
    assert any(len(ids) > 1 for ids in computed.base.values())  # a key in two languages: order matters
    assert computed.exact  # exact forms are there too
    for word in computed.sorted:
        assert stored.surfaces(word) == computed.surfaces(word)
        assert stored.is_exact(word) == computed.is_exact(word) == (word in computed.exact)
        assert stored.base_ids(word) == computed.base_ids(word) == computed.base.get(word, [])
    assert stored.surfaces("notaword") == [] and not stored.is_exact("notaword")
    every = {tid: term for term, tid in sp.term_id.items() if tid < sp.df.shape[0] and sp.df[tid] > 0}
    assert dict(stored.name.items()) == every and len(stored.name) == len(every)
    dead = [tid for tid in sp.term_id.values() if tid not in every] + [-1, sp.df.shape[0] + 5]
    assert all(tid not in stored.name for tid in dead)
    with pytest.raises(KeyError):
        stored.name[dead[-1]]


def test_the_vocabulary_is_what_the_build_computed_from_the_generation(vault: Path) -> None:
    """The same term dictionary and df (the rows) give the same vocabulary as the build stored."""
    conn = with_working(_connection(vault))
    sp, rows = load_sparse(conn), compute_sparse(conn)
    fresh = expansion.vocabulary_arrays(rows.term_id, rows.df)
    assert sp.vocabulary is not None
    for name in VOCABULARY_ARRAYS:
        assert sp.vocabulary[name].tobytes() == fresh[name].tobytes(), name


@pytest.mark.parametrize("query", QUERIES)
def test_a_query_is_analysed_alike_with_the_stored_and_the_computed_vocabulary(vault: Path, query: str) -> None:
    sp = load_sparse(_connection(vault))
    languages = ["de", "en", "fr", "ja"]
    stored = QueryAnalyzer(sp.term_id, Vocabulary(sp.term_id, sp.df, sp.n_docs, sp.vocabulary), languages)
    computed = QueryAnalyzer(sp.term_id, Vocabulary(sp.term_id, sp.df, sp.n_docs), languages)
    a, b = stored.analyse(query), computed.analyse(query)
    assert (a.terms, a.weights, a.cover, a.kinds, a.expansions, a.unmatched, a.quiet) == (
        b.terms,
        b.weights,
        b.cover,
        b.kinds,
        b.expansions,
        b.unmatched,
        b.quiet,
    )


def test_a_loaded_index_never_computes_its_vocabulary(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sp = load_sparse(_connection(vault))

    def refuse(*_: object) -> None:
        raise AssertionError("the vocabulary was computed, not loaded")

    monkeypatch.setattr(vocabulary_module, "_vocabulary_lists", refuse)
    monkeypatch.setattr(vocabulary_module, "_reversed_words", refuse)
    monkeypatch.setattr(vocabulary_module, "_letters", refuse)
    vocab = vocabulary(sp)
    QueryAnalyzer(sp.term_id, vocab, ["en", "de"]).analyse("wroktree sicherung 東")  # typo, suffix, CJK
    assert vocab.reversed and vocab.chars


def test_a_restricted_callers_vocabulary_is_the_stored_one_filtered_by_its_visible_df(vault: Path, monkeypatch) -> None:
    """A restricted caller's view (de.md hidden) keeps the generation's stored words and keeps a word,
    or a term of it, only while its visible df > 0: every look-up and every query analysis equal those of
    a vocabulary computed over the visible terms alone, and nothing is computed per visibility set."""
    view = load_sparse(_connection(vault)).restrict(["public"])
    assert view.n_stat == len(FILES) - 1 and view.seen is not None
    visible_terms = dict(view.term_id.items())  # the terms some visible note holds
    computed = Vocabulary(visible_terms, view.df, view.n_stat)
    assert "kontostand" not in computed.sorted and "worktre" in computed.sorted  # the control

    def refuse(*args, **kwargs):
        raise AssertionError("the vocabulary was computed, not loaded")

    monkeypatch.setattr(vocabulary_module, "_vocabulary_lists", refuse)
    stored = vocabulary(view)
    assert stored.starting("kontost") == [] and stored.known(["kontostand", "worktre"]) == ["worktre"]
    for prefix in ("", "k", "kont", "w", "gr", "ta", "東", "=", "d"):
        assert stored.starting(prefix) == computed.starting(prefix), prefix
    for word in stored.sorted:
        assert stored.surfaces(word) == computed.surfaces(word) and stored.base_ids(word) == computed.base_ids(word)
        assert stored.is_exact(word) == computed.is_exact(word) and stored.ending(word) == computed.ending(word)
    assert stored.base == computed.base and stored.exact == computed.exact and stored.name == computed.name
    for q in (*QUERIES, "kontost", "grap", "konto"):
        a = QueryAnalyzer(view.term_id, stored, ["en", "de"]).analyse(q)
        b = QueryAnalyzer(visible_terms, computed, ["en", "de"]).analyse(q)
        assert (a.terms, a.weights, a.expansions, a.unmatched) == (b.terms, b.weights, b.expansions, b.unmatched), q


def _writable_copy(vault: Path, tmp_path: Path) -> sqlite3.Connection:
    copy = tmp_path / "copy.db"
    shutil.copyfile(gen.resolve(gen.layout_for(vault)).parts[0].path, copy)
    copy.chmod(0o644)
    return with_working(sqlite3.connect(copy))


def test_a_sparse_group_without_its_vocabulary_is_an_integrity_error(vault: Path, tmp_path: Path) -> None:
    db = _writable_copy(vault, tmp_path)
    db.execute("DELETE FROM term_major WHERE name = ?", (f"{SPARSE_GROUP}/vocab_words",))
    with pytest.raises(IntegrityError):
        load_sparse(db)


def test_stored_vocabulary_arrays_that_disagree_are_an_integrity_error(vault: Path, tmp_path: Path) -> None:
    db = _writable_copy(vault, tmp_path)
    name = f"{SPARSE_GROUP}/vocab_exact"
    dtype, shape = db.execute("SELECT dtype, shape FROM term_major WHERE name = ?", (name,)).fetchone()
    spec = json.loads(shape)  # [n], or {"shape": [n], "dtype": ...} when stored narrower than its dtype
    spec = {**spec, "shape": [2]} if isinstance(spec, dict) else [2]
    db.execute(
        "UPDATE term_major SET data = substr(data, 1, ?), shape = ? WHERE name = ?",
        (2 * np.dtype(dtype).itemsize, json.dumps(spec), name),
    )
    sp = load_sparse(db)
    with pytest.raises(IntegrityError):
        vocabulary(sp)


# One word, two languages' base terms: ``en:immediat`` in one note, ``fr:immediat`` in 35. A cold
# build and a segmented generation of the same notes number the two in either order.
_TERMS = {"en:immediat": 1, "fr:immediat": 35, "fr:valeur": 40, "en:value": 30, "fr:tableau": 20}


def _numbered(order: list[str]) -> tuple[dict[str, int], np.ndarray]:
    return {t: i for i, t in enumerate(order)}, np.array([_TERMS[t] for t in order], dtype=np.int64)


@pytest.mark.parametrize("order", [sorted(_TERMS), sorted(_TERMS, reverse=True), sorted(_TERMS, key=lambda t: t[3:])])
def test_a_words_term_is_its_most_frequent_whatever_the_term_ids(order: list[str]) -> None:
    term_id, df = _numbered(order)
    vocab = Vocabulary(term_id, df, 60)
    name = {i: t for t, i in term_id.items()}
    assert name[vocab.surface("immediat")] == "fr:immediat"
    assert [(w, name[t], d) for w, t, d in vocab.best(["immediat", "tableau"], 5)] == [
        ("immediat", "fr:immediat", 35),
        ("tableau", "fr:tableau", 20),
    ]
    # a restricted caller who sees no French note: the English term is the only one it counts
    visible = {term_id["en:immediat"]: 1}
    assert name[vocab.surface("immediat", lambda t: visible.get(t, 0))] == "en:immediat"


@pytest.mark.parametrize("query", ["immediatvaleur", "immediattableau", "immediatt"])
def test_a_query_is_analysed_alike_whatever_the_term_ids(query: str) -> None:
    analyses = []
    for order in (sorted(_TERMS), sorted(_TERMS, reverse=True)):
        term_id, df = _numbered(order)
        a = QueryAnalyzer(term_id, Vocabulary(term_id, df, 60), ["fr", "en"]).analyse(query)
        analyses.append((a.terms, a.weights, a.kinds, a.expansions, a.unmatched))
    assert analyses[0] == analyses[1]


_word = st.sampled_from(["alpha", "beta", "gamma", "delta", "konto", "tableau", "x", "zeta", "immediat", "m"])
_term = st.one_of(
    _word.map(lambda w: "=" + w), st.tuples(st.sampled_from(["en:", "fr:", "de:", ""]), _word).map("".join)
)


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(_term, min_size=1, max_size=25, unique=True), split=st.integers(0, 25))
def test_appended_lists_are_the_lists_of_the_whole_dictionary(terms: list[str], split: int) -> None:
    """A segmented view's vocabulary (its base segment's words, the other segments' terms appended after its
    ids) spliced by ``appended_lists`` is exactly the vocabulary of the whole dictionary computed afresh."""
    term_id = {t: i for i, t in enumerate(terms)}
    df = np.ones(len(terms), dtype=np.int64)
    k = min(split, len(terms))
    base = {t: i for t, i in term_id.items() if i < k}
    prev = Vocabulary(base, df[:k], 10)
    added = {t: i for t, i in term_id.items() if i >= k}
    assert vocabulary_module.appended_lists(prev, added) == vocabulary_module._vocabulary_lists(term_id, df)


_any_word = st.text(alphabet="abcéßяж東京タワ", min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(base=st.lists(_any_word, min_size=1, max_size=30, unique=True), more=st.lists(_any_word, max_size=30))
def test_a_views_suffix_list_and_alphabet_are_the_whole_vocabularys(base: list[str], more: list[str]) -> None:
    """A segmented view's suffix list and typo alphabet (``appended_derived``: its base's stored ones with the
    words it lacks spliced in) are exactly those computed from every word of the view."""
    term_id = {w: i for i, w in enumerate(base)}
    stored = vocabulary_module.vocabulary_arrays(term_id, np.ones(len(base), dtype=np.int64))
    words = sorted(base)
    fresh = vocabulary_module.fresh_words(words, more)
    assert fresh == sorted(set(more) - set(base))
    reverse, chars = vocabulary_module.appended_derived(stored, fresh)
    every = sorted({*base, *more})
    assert reverse == vocabulary_module._reversed_words(every)
    assert chars == vocabulary_module._letters(every)
