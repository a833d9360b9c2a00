"""Zero trace in the numbers: a restricted caller's results are those of the vault without the notes
it may not see (statistics, bonus maxima, supersession), in every mode; and the cost is cached."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.build.builder import build_index
from core.build.embed import embed_index
from core.errors import DenseIncompleteError
from core.ranking.visibility import VISIBILITY_CACHE
from core.searcher import search_vault
from tests.conftest import note, write_vault
from tests.minilm_fixture import FP32, PAIR, cached_model_dirs, fixture_root

LEXICAL = ("fts", "vector", "hybrid", "graph_assisted")
PUBLIC = ("public",)

VISIBLE = {
    "pub/a.md": note("Quasar log", "quasar observations tonight. See [[pub-c]].", classification="public"),
    "pub/d.md": note("Catalogue", "a catalogue of the northern sky, one quasar among many galaxies"),
    "pub/pub-c.md": note("Telescope", "telescope maintenance schedule and the quasar mount", classification="public"),
    "pub/pub-b.md": note("Garden", "plain note about gardening and the old shed", classification="public"),
}
HIDDEN = {
    "sec/h1.md": note("Quasar quasar", "quasar quasar quasar budget. See [[pub-b]].", classification="secret"),
    "sec/h2.md": note("Quasar-Relay", "quasar relay: quasar-relay wiring of the quasar", classification="lan"),
    "sec/h3.md": note("Old", "superseded telescope note", classification="secret", supersedes="[[pub-c]]"),
}


def comparable(results) -> dict:
    """What a caller sees, minus the index identity (the two vaults are different indexes)."""
    d = results.to_dict()
    d.pop("index")
    for key in ("checked_at", "scan_age_seconds", "reused_scan"):  # when it looked, not what it saw
        d["freshness"].pop(key, None)
    for r in d["results"]:
        for key in ("index_age_seconds", "index_generation_id", "index_source_snapshot_hash"):
            r.pop(key)
        # where the copy lies and when its files were written (two vaults made one after the other)
        r.pop("obsidian_uri")
        r["dates"].pop("mtime")
        if r["date_field"] == "mtime":
            r.pop("date")
    return d


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """(vault with hidden notes, the same vault without them), both built."""
    with_hidden = write_vault(tmp_path_factory.mktemp("with"), {**VISIBLE, **HIDDEN})
    without = write_vault(tmp_path_factory.mktemp("without"), VISIBLE)
    build_index(with_hidden)
    build_index(without)
    return with_hidden, without


@pytest.mark.parametrize("mode", LEXICAL)
@pytest.mark.parametrize("query", ["quasar", "quasar-relay", "telescope quasar", "quasar relay wiring", ""])
def test_restricted_results_are_identical_with_or_without_hidden_notes(pair, mode, query):
    with_hidden, without = pair
    a = search_vault(with_hidden, query, mode=mode, limit=20, classifications=PUBLIC)
    b = search_vault(without, query, mode=mode, limit=20, classifications=PUBLIC)
    assert comparable(a) == comparable(b)


@pytest.mark.parametrize("query", ["quasar", "quasar OR telescope", "quas*", "title:quasar"])
def test_raw_fts_scores_use_the_callers_statistics(pair, query):
    with_hidden, without = pair
    a = search_vault(with_hidden, query, mode="fts", raw=True, limit=20, classifications=PUBLIC)
    b = search_vault(without, query, mode="fts", raw=True, limit=20, classifications=PUBLIC)
    assert comparable(a) == comparable(b) and len(a) > 0


def test_the_issue_case_hidden_quasar_notes_no_longer_lower_a_public_fts_score(pair):
    """Issue 11: 0.074 with the hidden notes, 0.207 without: BM25F's df/N/avg counted hidden notes."""
    with_hidden, without = pair
    unrestricted = search_vault(with_hidden, "quasar", mode="fts", limit=20)
    restricted = search_vault(with_hidden, "quasar", mode="fts", limit=20, classifications=PUBLIC)
    alone = search_vault(without, "quasar", mode="fts", limit=20)
    score = {r.rel_path: r.score for r in restricted}
    assert score == {r.rel_path: r.score for r in alone}
    assert score["pub/a.md"] != {r.rel_path: r.score for r in unrestricted}["pub/a.md"]  # the control


def test_identifier_bonus_maximum_is_over_visible_notes(pair):
    with_hidden, without = pair
    a = search_vault(with_hidden, "quasar-relay", mode="fts", classifications=PUBLIC)
    b = search_vault(without, "quasar-relay", mode="fts")
    assert [(r.rel_path, r.score) for r in a] == [(r.rel_path, r.score) for r in b]


def test_a_hidden_notes_supersedes_does_not_hide_a_visible_note(pair):
    with_hidden, _ = pair
    restricted = {r.rel_path for r in search_vault(with_hidden, "telescope", mode="fts", classifications=PUBLIC)}
    assert "pub/pub-c.md" in restricted
    unrestricted = {r.rel_path for r in search_vault(with_hidden, "telescope", mode="fts")}
    assert "pub/pub-c.md" not in unrestricted  # the control: to a caller who sees sec/h3.md it is superseded


def test_visible_statistics_are_loaded_once_per_generation_and_visible_set(pair):
    with_hidden, without = pair
    VISIBILITY_CACHE.clear()
    search_vault(with_hidden, "quasar", mode="fts", classifications=PUBLIC)
    first = VISIBILITY_CACHE.loads
    assert first > 0  # the visible notes' SparseIndex (and supersession) for (generation, {public})
    for q in ("telescope", "garden", "quasar"):
        search_vault(with_hidden, q, mode="fts", classifications=PUBLIC)
    assert VISIBILITY_CACHE.loads == first  # cached, not reloaded per query
    search_vault(with_hidden, "quasar", mode="fts", classifications=("public", "lan"))
    second = VISIBILITY_CACHE.loads
    assert second > first  # another visible set, its own statistics
    search_vault(without, "quasar", mode="fts", classifications=PUBLIC)  # nothing hidden there
    search_vault(with_hidden, "quasar", mode="fts")  # unrestricted
    assert VISIBILITY_CACHE.loads == second


# ---------------------------------------------------------------- the dense modes (MiniLM fixture)


@pytest.fixture(scope="module")
def embedded_pair(pair, request, tmp_path_factory) -> tuple[Path, Path, dict]:
    dirs = cached_model_dirs(fixture_root(request, tmp_path_factory))
    with_hidden, without = pair
    for vault in pair:
        embed_index(vault, model=dirs[FP32])
    return with_hidden, without, {"reranker": str(dirs[PAIR])}


@pytest.mark.parametrize("mode", ["semantic", "reranked", "auto"])
@pytest.mark.parametrize("query", ["quasar", "looking at distant galaxies"])
def test_dense_modes_are_identical_with_or_without_hidden_notes(embedded_pair, mode, query):
    with_hidden, without, options = embedded_pair
    a = search_vault(with_hidden, query, mode=mode, limit=20, classifications=PUBLIC, options=options)
    b = search_vault(without, query, mode=mode, limit=20, classifications=PUBLIC, options=options)
    assert a.actual_mode == b.actual_mode != "fts"
    assert comparable(a) == comparable(b)


# ---------------------------------------------------------------- property: random vaults, random hidden subset

WORDS = ["quasar", "nebula", "orbit", "comet", "garden", "shed", "relay", "budget", "alpha-beta", "Pulsar"]


@st.composite
def vaults(draw) -> tuple[dict[str, str], set[str]]:
    n = draw(st.integers(2, 7))
    files: dict[str, str] = {}
    hidden: set[str] = set()
    for _ in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
        title = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))
        secret = draw(st.booleans())
        link = f" See [[n{draw(st.integers(0, n - 1))}]]." if draw(st.booleans()) else ""
        front = {"classification": "secret"} if secret else {}
        if draw(st.integers(0, 5)) == 0:
            front["supersedes"] = f"[[n{draw(st.integers(0, n - 1))}]]"
        # stems repeat across folders, so a hidden note can share a visible note's name (link capture)
        folder = draw(st.sampled_from(["", "a/", "b/", "c/"]))
        rel = f"{folder}n{draw(st.integers(0, n - 1))}.md"
        if rel in files:
            continue
        if draw(st.integers(0, 3)) == 0:
            front["aliases"] = f"[n{draw(st.integers(0, n - 1))}]"
        files[rel] = note(title, " ".join(words) + link, **front)
        if secret:
            hidden.add(rel)
    return files, hidden


def _check_property(
    tmp_path_factory, files: dict[str, str], hidden: set[str], queries: list[str], visible=PUBLIC
) -> None:
    with_hidden = write_vault(tmp_path_factory.mktemp("p"), files)
    without = write_vault(tmp_path_factory.mktemp("q"), {k: v for k, v in files.items() if k not in hidden})
    build_index(with_hidden)
    build_index(without)
    for mode in LEXICAL:
        for query in queries:
            a = search_vault(with_hidden, query, mode=mode, limit=10, classifications=visible)
            b = search_vault(without, query, mode=mode, limit=10, classifications=visible)
            assert comparable(a) == comparable(b), (mode, query, visible)
    for query in [q for q in queries if q.strip()]:
        raw = f"{query.split()[0].split('-')[0]}* OR ({query.replace('-', ' ')})"
        a = search_vault(with_hidden, raw, mode="fts", raw=True, limit=10, classifications=visible)
        b = search_vault(without, raw, mode="fts", raw=True, limit=10, classifications=visible)
        assert comparable(a) == comparable(b), ("raw", raw, visible)


QUERIES = st.lists(st.sampled_from([*WORDS, "quasar orbit", "alpha-beta garden", ""]), min_size=1, max_size=3)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vault=vaults(), queries=QUERIES)
def test_property_hidden_notes_change_nothing_a_restricted_caller_sees(tmp_path_factory, vault, queries):
    _check_property(tmp_path_factory, *vault, queries)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vault=vaults(), queries=QUERIES)
def test_property_hidden_notes_change_nothing_many_vaults(tmp_path_factory, vault, queries):
    _check_property(tmp_path_factory, *vault, queries)


# ---------------------------------------------------------------- property: random classes, random visible set
# (statistics summed over the visible classes, core.ranking.classes, on the generation's own arrays)

CLASSES = (None, "public", "secret", "lan", "Team")  # None: no classification (public); "Team" is the class team
# words, prefixes (quas, nebu, orbi) and typos (quasra, nebual, commet): the expansions must agree too
CLASS_WORDS = ["quasar", "quasars", "nebula", "nebulae", "orbit", "orbital", "comet", "garden", "alpha-beta"]
CLASS_QUERIES = st.lists(
    st.sampled_from([*CLASS_WORDS, "quas", "nebu", "orbi", "quasra", "nebual", "commet", "quasar orbit", ""]),
    min_size=1,
    max_size=3,
)
VISIBLE_SETS = st.lists(st.sampled_from(["public", "secret", "lan", "team", "TEAM"]), max_size=3, unique=True)


@st.composite
def classified_vaults(draw) -> tuple[dict[str, str], dict[str, str]]:
    """(files, each file's class as the filters see it): random notes, headings, links and classifications."""
    n = draw(st.integers(2, 8))
    files: dict[str, str] = {}
    classes: dict[str, str] = {}
    for i in range(n):
        words = draw(st.lists(st.sampled_from(CLASS_WORDS), min_size=1, max_size=12))
        title = " ".join(draw(st.lists(st.sampled_from(CLASS_WORDS), min_size=1, max_size=3)))
        cls = draw(st.sampled_from(CLASSES))
        link = f" See [[n{draw(st.integers(0, n - 1))}]]." if draw(st.booleans()) else ""
        heading = f"\n\n## {draw(st.sampled_from(CLASS_WORDS))}\n\nmore text" if draw(st.booleans()) else ""
        rel = f"{draw(st.sampled_from(['', 'a/', 'b/']))}n{i}.md"
        files[rel] = note(title, " ".join(words) + link + heading, **({"classification": cls} if cls else {}))
        classes[rel] = (cls or "public").lower()
    return files, classes


def _check_classes(tmp_path_factory, vault, visible: list[str], queries: list[str]) -> None:
    files, classes = vault
    seen = {c.lower() for c in visible}
    _check_property(tmp_path_factory, files, {k for k in files if classes[k] not in seen}, queries, visible)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vault=classified_vaults(), visible=VISIBLE_SETS, queries=CLASS_QUERIES)
def test_property_any_classes_any_visible_set_equal_a_cold_index_without_the_hidden_notes(
    tmp_path_factory, vault, visible, queries
):
    _check_classes(tmp_path_factory, vault, visible, queries)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vault=classified_vaults(), visible=VISIBLE_SETS, queries=CLASS_QUERIES)
def test_property_any_classes_many_vaults(tmp_path_factory, vault, visible, queries):
    _check_classes(tmp_path_factory, vault, visible, queries)


def test_a_hidden_note_with_the_same_name_does_not_capture_a_visible_notes_link(tmp_path):
    """[[plans]] resolves to the root plans.md (path rule) when it exists; for a caller who may not see
    it the link must reach the visible pub/x/plans.md, as in the vault without the hidden note."""
    files = {
        "pub/a.md": note("A", "quokka see [[plans]]"),
        "pub/x/plans.md": note("Plans", "visible plans text"),
        "plans.md": note("Secret", "hidden plans", classification="secret"),
    }
    full = write_vault(tmp_path / "full", files)
    bare = write_vault(tmp_path / "bare", {k: v for k, v in files.items() if k != "plans.md"})
    build_index(full)
    build_index(bare)
    a = search_vault(full, "quokka", mode="graph_assisted", classifications=PUBLIC)
    b = search_vault(bare, "quokka", mode="graph_assisted", classifications=PUBLIC)
    assert comparable(a) == comparable(b)
    assert [r.rel_path for r in a] == ["pub/a.md", "pub/x/plans.md"]


def test_a_hidden_namesake_does_not_capture_a_visible_notes_supersedes(tmp_path):
    files = {
        "pub/new.md": note("New plans", "quokka plans, the current ones", supersedes="[[plans]]"),
        "pub/x/plans.md": note("Plans", "quokka plans, the old ones"),
        "plans.md": note("Secret", "hidden plans", classification="secret"),
    }
    full = write_vault(tmp_path / "full", files)
    bare = write_vault(tmp_path / "bare", {k: v for k, v in files.items() if k != "plans.md"})
    build_index(full)
    build_index(bare)
    for mode in ("fts", "graph_assisted"):
        for query in ("quokka plans", ""):
            a = search_vault(full, query, mode=mode, classifications=PUBLIC)
            b = search_vault(bare, query, mode=mode, classifications=PUBLIC)
            assert comparable(a) == comparable(b)
            assert [r.rel_path for r in a] == ["pub/new.md"]  # pub/x/plans.md is superseded, as without plans.md


def test_dense_readiness_counts_only_the_callers_notes(tmp_path, request, tmp_path_factory):
    """Vectors missing only on hidden notes must not make a restricted caller's dense modes fail
    (dense_incomplete): the vault without those notes is fully embedded."""
    dirs = cached_model_dirs(fixture_root(request, tmp_path_factory))
    visible = {
        f"pub/n{i}.md": note(f"Note {i}", f"the telescope and the quasar, part {i}", updated=f"2024-05-0{i + 1}")
        for i in range(3)
    }
    hidden = {"sec/old.md": note("Old", "an old secret quasar note", classification="secret", updated="2001-01-01")}
    full = write_vault(tmp_path / "full", {**visible, **hidden})
    bare = write_vault(tmp_path / "bare", visible)
    build_index(full)
    build_index(bare)
    embed_index(full, model=dirs[FP32], limit=3)  # newest first: every visible chunk, not the hidden one
    embed_index(bare, model=dirs[FP32])
    a = search_vault(full, "quasar", mode="semantic", classifications=PUBLIC)
    b = search_vault(bare, "quasar", mode="semantic", classifications=PUBLIC)
    assert a.actual_mode == "semantic" and comparable(a) == comparable(b)
    with pytest.raises(DenseIncompleteError):  # the control: a caller who sees the hidden note
        search_vault(full, "quasar", mode="semantic")


def test_a_legacy_in_place_index_gives_the_same_zero_trace(tmp_path):
    full = write_vault(tmp_path / "full", {**VISIBLE, **HIDDEN})
    bare = write_vault(tmp_path / "bare", VISIBLE)
    build_index(full, in_place=True)
    build_index(bare, in_place=True)
    for mode in LEXICAL:
        a = search_vault(full, "quasar telescope", mode=mode, limit=20, classifications=PUBLIC)
        b = search_vault(bare, "quasar telescope", mode=mode, limit=20, classifications=PUBLIC)
        assert a.index.kind == "legacy_db" and comparable(a) == comparable(b), mode


def test_a_restricted_search_resolves_only_the_supersedes_links_and_none_without_one(tmp_path, monkeypatch):
    """A restricted caller's supersession (its filter mask) comes from its visible notes' ``supersedes`` links
    resolved among its visible notes: the answer every link's resolution gives (a hidden namesake captures
    none), without resolving the other links; a vault whose visible notes have no such link reads no name."""
    from core.index.layout import layout_for
    from core.index.verify import connect_readonly, resolve
    from core.ranking import visibility
    from core.ranking.filters import Filters

    files = {
        "pub/new.md": note("New plans", "quokka plans [[pub-b]] [[plans]]", supersedes="[[plans]]"),
        "pub/x/plans.md": note("Plans", "quokka plans, the old ones"),
        "plans.md": note("Secret", "hidden plans", classification="secret", supersedes="[[pub-b]]"),
        "pub/pub-b.md": note("B", "quokka b"),
    }
    vault = write_vault(tmp_path / "v", files)
    build_index(vault)
    conn = connect_readonly(resolve(layout_for(vault)))
    visible = Filters(classifications=PUBLIC).visible_classification_clause()
    every = sorted({d for _, d, k in visibility.visible_edges(conn, visible) if k == "supersedes"})
    assert visibility.visible_superseded(conn, visible) == every and len(every) == 1  # pub/x/plans.md only
    quiet = write_vault(tmp_path / "quiet", {k: v.replace("supersedes", "related") for k, v in files.items()})
    build_index(quiet)
    VISIBILITY_CACHE.clear()

    def refuse(*_: object) -> None:
        raise AssertionError("a note name was read for a restricted caller without a supersedes link")

    monkeypatch.setattr(visibility, "visible_names", refuse)
    assert [r.rel_path for r in search_vault(quiet, "quokka", mode="fts", classifications=PUBLIC)]
