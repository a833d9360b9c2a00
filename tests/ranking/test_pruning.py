"""fts's pruned run (core.ranking.pruning, ``lexical._pruned_ranking``) answers exactly what scoring every
posting answers: the same notes, scores, order, match counts and labels, for every caller, filter and
generation layout; and when it cannot prove that, the whole run answers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.build.builder import build_index
from core.modes import lexical
from core.ranking import pruning
from core.searcher import search_vault
from tests.conftest import write_vault
from tests.paths import POWERSHELL

NOTES = 160
_WORDS = re.compile(r"[A-Za-z][A-Za-z-]{2,}")


def _corpus() -> dict[str, str]:
    """NOTES PowerShell reference pages (real prose, shared vocabulary), a third of them secret, some tagged."""
    files = sorted(POWERSHELL.rglob("*.md"))[:NOTES]
    out = {}
    for i, path in enumerate(files):
        body = path.read_text(encoding="utf-8").split("\n---\n", 1)[-1]
        level = "secret" if i % 3 == 0 else "public"
        tags = "[cmdlet]" if i % 4 == 0 else "[]"
        out[f"d{i % 5}/{path.stem}-{i}.md"] = (
            f"---\ntitle: {path.stem.replace('-', ' ')}\nclassification: {level}\ntags: {tags}\n---\n{body}"
        )
    return out


@pytest.fixture(scope="module")
def vaults(tmp_path_factory) -> dict[str, Path]:
    """The corpus built cold, and a copy edited after its build (a segmented generation: segments + tombstone)."""
    files = _corpus()
    cold = write_vault(tmp_path_factory.mktemp("cold"), files)
    build_index(cold)
    edited = write_vault(tmp_path_factory.mktemp("edited"), files)
    build_index(edited)
    for name in sorted(files)[::17]:
        (edited / name).write_text(files[name] + "\nAn object of the variable to remove from the environment.\n")
    (edited / sorted(files)[5]).unlink()
    build_index(edited)
    return {"cold": cold, "segmented": edited}


@pytest.fixture(scope="module")
def words(vaults) -> list[str]:
    found: dict[str, int] = {}
    for path in sorted(vaults["cold"].rglob("*.md"))[:60]:
        for w in _WORDS.findall(path.read_text(encoding="utf-8")):
            found[w] = found.get(w, 0) + 1
    return sorted(found, key=lambda w: (-found[w], w))[:400]


@pytest.fixture
def eager(monkeypatch) -> list[bool]:
    """Every term long enough to be partial (the corpus is small), each pruned attempt's outcome recorded."""
    monkeypatch.setattr(pruning, "MIN_PARTIAL_POSTINGS", 1)
    monkeypatch.setattr(pruning, "MIN_SKIPPED_POSTINGS", 1)
    outcomes: list[bool] = []
    real = pruning.proven

    def spy(*args, **kw) -> bool:
        outcomes.append(real(*args, **kw))
        return outcomes[-1]

    monkeypatch.setattr(pruning, "proven", spy)
    return outcomes


def _answer(vault: Path, query: str, **kw) -> list[tuple]:
    res = search_vault(vault, query, mode="fts", limit=kw.pop("limit", 10), freshness=False, **kw)
    return [(r.rel_path, r.score, r.score_source, r.match_count, r.snippet) for r in res.hits]


def _whole(monkeypatch, vault: Path, query: str, **kw) -> list[tuple]:
    with monkeypatch.context() as m:
        m.setattr(lexical, "_pruned_ranking", lambda *a, **k: None)
        return _answer(vault, query, **kw)


QUERIES = [
    "Remove an environment variable",
    "the object of the command",
    "Get-ChildItem parameter",
    "how to convert an object to CSV",
    "remove the item from the list",
    'the "pipeline input" of the cmdlet',
    "type",
    "Specifies the path",
]


@pytest.mark.parametrize("layout", ["cold", "segmented"])
@pytest.mark.parametrize(
    "kw",
    [{}, {"classifications": ("public",)}, {"tags_any": ["cmdlet"]}, {"path_prefixes": ["d1/"]}, {"limit": 3}],
    ids=["all", "restricted", "tagged", "folder", "top3"],
)
def test_pruned_equals_whole(vaults, eager, monkeypatch, layout, kw) -> None:
    vault = vaults[layout]
    for query in QUERIES:
        assert _answer(vault, query, **kw) == _whole(monkeypatch, vault, query, **kw), query
    assert any(eager), "no query was answered by a pruned run: the test proves nothing"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_pruned_equals_whole_for_any_query(vaults, words, eager, monkeypatch, data) -> None:
    """Any query of the corpus's own words (common and rare: the lists pruning skips and those it keeps)."""
    picked = data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=7), label="words")
    vault = vaults[data.draw(st.sampled_from(["cold", "segmented"]), label="layout")]
    kw = data.draw(st.sampled_from([{}, {"classifications": ("public",)}]), label="caller")
    query = " ".join(picked)
    assert _answer(vault, query, **kw) == _whole(monkeypatch, vault, query, **kw)


def test_an_unproven_run_is_answered_whole(vaults, eager, monkeypatch) -> None:
    """Every term partial: the outside notes' bound passes the k-th best score, the pruned run is refused,
    and the answer is the whole run's."""
    monkeypatch.setattr(pruning, "PARTIAL_SHARES", (1.0,))
    query = "the object of the command"
    assert _answer(vaults["cold"], query) == _whole(monkeypatch, vaults["cold"], query)
    assert eager and not any(eager)


def test_a_wrong_bound_would_show(vaults, eager, monkeypatch) -> None:
    """The equality tests can fail: with the bound claimed zero (every pruned run accepted), some query's
    answer differs from the whole run's."""
    monkeypatch.setattr(pruning, "PARTIAL_SHARES", (1.0,))
    monkeypatch.setattr(pruning, "outside_bound", lambda *a, **k: 0.0)
    monkeypatch.setattr(pruning, "proven", lambda s, outside, top, best, kth: kth is not None)
    differ = [q for q in QUERIES if _answer(vaults["cold"], q) != _whole(monkeypatch, vaults["cold"], q)]
    assert differ


def test_choose_partial_takes_the_smallest_bounds_within_both_shares() -> None:
    bounds = np.array([5.0, 0.1, 0.2, 3.0, 0.05])
    cover = np.array([5.0, 0.1, 0.2, 3.0, 0.05])
    lengths = np.array([10, 900, 800, 50, 1000])
    whole = np.array([False, False, False, False, False])
    got = pruning.choose_partial(bounds, cover, lengths, whole, 0.05, min_postings=100, skipped=0)
    assert got.tolist() == [False, True, True, False, True]  # 0.35 <= 0.05 * 8.35; the 3.0 would pass it
    low_cover = np.array([5.0, 3.0, 0.2, 3.0, 0.05])  # the same bounds, but the 0.1 holds much of the idf mass
    got = pruning.choose_partial(bounds, low_cover, lengths, whole, 0.05, min_postings=100, skipped=0)
    assert got.tolist() == [False, False, False, False, True]  # the smallest bounds only, up to the first too heavy
    whole[1] = True  # a bonus reads all its notes
    got = pruning.choose_partial(bounds, cover, lengths, whole, 0.05, min_postings=100, skipped=0)
    assert got.tolist() == [False, False, True, False, True]
    got = pruning.choose_partial(bounds, cover, lengths, whole, 1.0, min_postings=850, skipped=0)
    assert got.tolist() == [False, False, False, False, True]  # shorter lists are scored whole
    kw = {"min_postings": 100}
    assert pruning.choose_partial(bounds, cover, lengths, whole, 1.0, skipped=1800, **kw).tolist() == [0, 0, 1, 0, 1]
    assert not pruning.choose_partial(bounds, cover, lengths, whole, 1.0, skipped=1801, **kw).any()  # too few
    assert not pruning.choose_partial(bounds * 0, cover, lengths, whole, 1.0, skipped=0).any()


def test_outside_bound_counts_every_bonus_an_outside_note_could_earn() -> None:
    s = pruning.split(np.array([True, False]), np.array([0.5, 4.0]), np.array([1.0, 3.0]), np.array([1.0, 1.0]))
    assert (s.bm25, s.cover, s.name_share) == (0.5, 0.25, 1.0)
    plain = pruning.outside_bound(s, top=10.0, coverage_weights=1.6, name_weight=2.5, name_floor=1.2, name_need=2.0)
    assert plain == pytest.approx((0.5 + 1.6 * 0.25**2 * 10.0) * (1 + pruning.BOUND_SLACK))
    named = pruning.outside_bound(s, top=10.0, coverage_weights=1.6, name_weight=2.5, name_floor=1.2, name_need=0.5)
    assert named == pytest.approx((0.5 + (1.6 * 0.25**2 + 2.5) * 10.0) * (1 + pruning.BOUND_SLACK))
    assert pruning.proven(s, plain, top=10.0, best=20.0, kth=plain * 1.01)
    assert not pruning.proven(s, plain, top=10.0, best=20.0, kth=plain)  # a tie at the k-th could rank
    assert not pruning.proven(s, plain, top=0.5, best=20.0, kth=20.0)  # an outside note may hold the best BM25F
    assert not pruning.proven(s, plain, top=10.0, best=20.0, kth=None)  # fewer than k candidates
    assert pruning.kth_best(np.array([3.0, 9.0, 1.0, 7.0]), np.array([0, 2, 3]), 2) == 3.0
    assert pruning.kth_best(np.array([3.0]), np.array([0]), 2) is None


def test_a_note_a_bonus_names_is_scored_though_it_holds_no_whole_term(vaults, eager, monkeypatch) -> None:
    """A bonus may name a note that holds the query's common words only (no term scored whole): the pruned
    run scores it as a candidate, so it ranks where the whole run puts it (first, with a large bonus)."""
    vault, query = vaults["cold"], "the object of the command"
    last = search_vault(vault, query, mode="fts", limit=1000, freshness=False, passages=False).hits[-1]
    monkeypatch.setattr(lexical, "PASSAGE_BONUS", 5.0)
    monkeypatch.setattr(
        lexical, "_passage_rows", lambda ctx, sp: sp.rows_of(np.asarray([_note_id(vault, last.rel_path)]))
    )
    got = _answer(vault, query)
    assert got == _whole(monkeypatch, vault, query)
    assert got[0][0] == last.rel_path and any(eager)


def _note_id(vault: Path, rel_path: str) -> int:
    from core import generations as gen
    from core.index.tables import notes

    resolved = gen.resolve(gen.layout_for(vault.resolve()))
    conn = gen.connect_readonly(resolved)
    try:
        return notes.note_ids_by_path(conn)[rel_path]
    finally:
        conn.close()


@pytest.mark.parametrize("layout", ["cold", "segmented"])
def test_a_long_lived_process_reads_the_arrays_a_pruned_run_slices_whole(vaults, eager, monkeypatch, layout) -> None:
    """A pruned run reads its terms' runs as slices; they count as gathers, so a process that keeps searching
    reads the postings arrays whole once (core.ranking.stored), not the same pieces again on every query."""
    from core.ranking import stored
    from tests.conftest import clear_loaded_process_caches

    clear_loaded_process_caches()  # arrays loaded afresh, their gathers counted from 0
    monkeypatch.setattr(stored, "WHOLE_AFTER_GATHERS", 3)
    whole: list[str] = []
    real = stored.StoredArray.__array__

    def spy(self, *args, **kw):
        whole.append(self._name)
        return real(self, *args, **kw)

    monkeypatch.setattr(stored.StoredArray, "__array__", spy)
    for query in QUERIES[:2] * 4:
        _answer(vaults[layout], query)
    assert any(eager)
    assert {"docs", "field_mask", "body_tf"} <= {name.rsplit("/", 1)[-1].rsplit(":", 1)[-1] for name in whole}, whole
