"""The note-level sparse index: BM25F weights against a plain Python reference, and the
block-wise loader (core.ranking.postings) against itself in tiny blocks."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import note, with_working
from hypothesis import given, settings
from hypothesis import strategies as st

import core.ranking.postings
import core.ranking.sparse
import core.ranking.sparse_rows
from core import generations as gen
from core.index.tables.notes_fts import FTS_COLUMNS
from core.ranking.analysis import language_analyzer_for
from core.ranking.postings import TermMajor, distinct, stable_order
from core.ranking.sparse import RankParams, bm25_scores, load_sparse, name_match
from core.vault.chunking import headings
from core.vault.notes import names_text, parse_note

FILES = {
    "garden.md": note(
        "Garden soil",
        "# Compost\nCompost heaps feed the garden soil.\n\n## Worms\nWorms turn soil.",
        description="Notes on soil",
        tags=["garden", "soil"],
    ),
    "kitchen.md": note("Kitchen", "Knives, compost bins and soil from the garden.\n" + "Filler words here. " * 40),
    "worms.md": note("Worms", "# Worms\nWorms and more worms in the compost.", tags=["compost"]),
    "___.md": "---\ndescription: '!!!'\n---\n\n... !!! ...\n",  # no term in any field: a note without postings
}
QUERIES = ["compost", "garden soil", "worms compost knives", "filler", "soil notes"]
PARAMS = RankParams(
    heading_coverage_weight=0.0, title_heading_coverage_weight=0.0, name_match_weight=0.0
)  # BM25F alone


@pytest.fixture(scope="module")
def built(make_vault):
    """(vault, read-only connection to its active generation)."""
    root = make_vault(FILES, name="sparse")
    return root, with_working(gen.connect_readonly(gen.resolve(gen.layout_for(root))))


@pytest.fixture(scope="module")
def conn(built):
    return built[1]


def reference_bm25f(vault: Path, conn, query: str) -> dict[str, float]:
    """BM25F of each matching note, from the note files with dicts and loops."""
    analyzer = language_analyzer_for("en")
    fields: dict[str, list[Counter[str]]] = {}
    for rel in FILES:
        parsed = parse_note(rel, (vault / rel).read_bytes())
        texts = [
            names_text(parsed),
            parsed.description or "",
            " ".join(parsed.tags),
            "\n".join(headings(parsed.body)),
            parsed.body,
        ]
        fields[rel] = [Counter(analyzer.terms(text)) for text in texts]
    n = len(fields)
    avg = [sum(sum(f[i].values()) for f in fields.values()) / n for i in range(len(FTS_COLUMNS))]
    df = Counter(t for f in fields.values() for t in set().union(*f))
    out = {}
    for rel, per_field in fields.items():
        score = 0.0
        for term in set(analyzer.terms(query)):
            pseudo = sum(
                w * f[term] / (1 - b + b * sum(f.values()) / (a or 1.0))
                for w, b, a, f in zip(PARAMS.weights, PARAMS.b, avg, per_field)
            )
            if pseudo:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * pseudo / (PARAMS.k1 + pseudo)
        if score:
            out[rel] = score
    return out


@pytest.mark.parametrize("query", QUERIES)
def test_bm25f_matches_a_plain_python_reference(built, query):
    vault, conn = built
    index = load_sparse(conn, PARAMS)
    analyzer = language_analyzer_for("en")
    scores, matched = bm25_scores(index, analyzer.terms(query))
    path_of = dict(conn.execute("SELECT id, rel_path FROM notes"))
    got = {path_of[int(nid)]: float(s) for nid, s, m in zip(index.note_ids, scores, matched) if m > 0}
    expected = reference_bm25f(vault, conn, query)
    assert expected and got == pytest.approx(expected, rel=1e-5)


def test_a_note_without_terms_is_a_row_without_postings(conn):
    index = load_sparse(conn, PARAMS)
    empty = conn.execute("SELECT id FROM notes WHERE rel_path = '___.md'").fetchone()[0]
    row = int(index.rows_of(np.array([empty]))[0])
    assert row >= 0 and not np.any(index.docs == row)


@pytest.mark.parametrize(("block", "read_rows"), [(1, 1), (3, 2), (17, 3)])
def test_loading_in_small_blocks_gives_the_same_index(conn, monkeypatch, block, read_rows):
    whole = load_sparse(conn)
    monkeypatch.setattr(core.ranking.postings, "BLOCK", block)
    monkeypatch.setattr(core.ranking.sparse_rows, "READ_ROWS", read_rows)
    pieces = core.ranking.sparse.compute_sparse(conn)  # the row reader the build stores from
    for name in core.ranking.sparse.SPARSE_ARRAYS:
        a, b = getattr(whole, name), getattr(pieces, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for t in range(whole.indptr.shape[0] - 1):  # rows ascend within each term
        assert np.all(np.diff(pieces.docs[pieces.indptr[t] : pieces.indptr[t + 1]]) > 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 70_000), max_size=300), st.booleans())
def test_stable_order_is_a_stable_argsort(values, small):
    n_terms = 1 << 16 if small else 1 << 20
    terms = np.array([v % n_terms for v in values], dtype=np.int32)
    assert np.array_equal(stable_order(terms, n_terms), np.argsort(terms, kind="stable"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 70), max_size=200), st.sampled_from([np.int32, np.int64, np.uint16]))
def test_distinct_is_np_unique(values, dtype):
    given_values = np.array([v % 60 if dtype == np.uint16 else v for v in values], dtype=dtype)
    got = distinct(given_values)
    assert got.dtype == dtype and np.array_equal(got, np.unique(given_values))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=200), st.integers(1, 50))
def test_term_major_slots_fill_each_term_in_row_order(values, block):
    terms = np.array(values, dtype=np.int32)
    layout = TermMajor(terms, 41)
    out = np.full(terms.shape[0], -1, dtype=np.int64)
    for start in range(0, terms.shape[0], block):
        order, dest = layout.slots(terms[start : start + block])
        out[dest] = (start + np.arange(order.shape[0]))[order]
    assert np.array_equal(out, np.argsort(terms, kind="stable"))
    assert np.array_equal(np.diff(layout.indptr), np.bincount(terms, minlength=41))


def test_the_name_bonus_ranks_the_note_named_by_the_query_first(make_vault):
    """'dendron topic schema' is the name of dendron.topic.schema.md, more than of its children,
    even when a child says the words more often (their names hold more than the query)."""
    root = make_vault(
        {
            "dendron.topic.schema.md": "---\ntitle: Schemas\n---\nSchemas describe a hierarchy.\n",
            "dendron.topic.schema.complete.md": "---\ntitle: Complete\n---\nSchema schema topic dendron.\n",
            "dendron.topic.schema.lib.md": "---\ntitle: Lib\n---\nDendron topic schema library schema.\n",
        },
        name="namebonus",
    )
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(root.resolve())))
    paths = dict(conn.execute("SELECT id, rel_path FROM notes"))
    terms = language_analyzer_for("en").terms("dendron topic schema")
    with_bonus = load_sparse(conn)
    without = load_sparse(conn, RankParams(name_match_weight=0.0))

    def top(sp):
        scores, _ = bm25_scores(sp, terms)
        return paths[int(sp.note_ids[int(np.argmax(scores))])]

    assert top(with_bonus) == "dendron.topic.schema.md"
    assert top(without) != "dendron.topic.schema.md"  # the bonus is what decides
    # a note's name idf is the summed idf of its name terms: "Schemas dendron topic", "Complete dendron topic schema"
    idf = {t: float(with_bonus.idf(i)) for t, i in with_bonus.term_id.items()}
    rows = np.arange(with_bonus.n_docs)
    names = {paths[int(i)]: float(v) for i, v in zip(with_bonus.note_ids, with_bonus.name_idf(rows))}
    shared = idf["en:dendron"] + idf["en:topic"] + idf["en:schema"]
    assert names == pytest.approx(
        {
            "dendron.topic.schema.md": shared,
            "dendron.topic.schema.complete.md": shared + idf["en:complet"],
            "dendron.topic.schema.lib.md": shared + idf["en:lib"],
        }
    )


def test_term_weights_scale_each_terms_share_of_the_score(conn):
    from core.ranking.sparse import query_postings

    index = load_sparse(conn, PARAMS)
    terms = language_analyzer_for("en").terms("compost soil")
    plain, _ = bm25_scores(index, terms)
    alone = {t: bm25_scores(index, [t])[0] for t in terms}
    weighted, _ = bm25_scores(index, terms, query_postings(index, terms, [2.0, 0.5], [1.0, 1.0]))
    assert weighted == pytest.approx(2.0 * alone[terms[0]] + 0.5 * alone[terms[1]], rel=1e-5)
    assert plain == pytest.approx(alone[terms[0]] + alone[terms[1]], rel=1e-5)


def test_the_title_coverage_bonus_rewards_only_notes_whose_title_holds_the_query(conn):
    index = load_sparse(conn, PARAMS)
    terms = language_analyzer_for("en").terms("soil")
    base, matched = bm25_scores(index, terms)
    boosted, _ = bm25_scores(index, terms, params=RankParams(heading_coverage_weight=0.0, title_coverage_weight=1.0))
    title_rows = {
        r
        for r, nid in enumerate(index.note_ids)
        if "soil" in conn.execute("SELECT lower(title) FROM notes WHERE id = ?", (int(nid),)).fetchone()[0]
    }
    assert title_rows and all(boosted[r] > base[r] for r in title_rows)
    assert all(boosted[r] == base[r] for r in range(index.n_docs) if r not in title_rows and matched[r])


@pytest.mark.parametrize("query", QUERIES)
def test_body_term_counts_count_the_given_notes_body_occurrences(built, query):
    """Counts only the notes asked for (in their order, an unknown id 0), from their bodies; with
    ``counted``, only the terms it marks."""
    from core.ranking.sparse import body_term_counts, query_postings

    vault, conn = built
    index = load_sparse(conn, PARAMS)
    analyzer = language_analyzer_for("en")
    terms = list(dict.fromkeys(analyzer.terms(query)))
    id_of = {rel: nid for nid, rel in conn.execute("SELECT id, rel_path FROM notes")}
    body = {rel: Counter(analyzer.terms(parse_note(rel, (vault / rel).read_bytes()).body)) for rel in FILES}
    asked = [id_of["worms.md"], 10_000, id_of["garden.md"]]  # not in row order; one id no note has
    rels = ["worms.md", None, "garden.md"]
    want = {nid: sum(body[rel][t] for t in terms) if rel else 0 for nid, rel in zip(asked, rels)}
    assert body_term_counts(index, terms, asked) == want
    postings = query_postings(index, terms)
    known = [t for t in terms if t in index.term_id]
    first = np.asarray([i == 0 for i in range(len(known))], dtype=bool)
    only_first = {nid: body[rel][known[0]] if rel and known else 0 for nid, rel in zip(asked, rels)}
    assert body_term_counts(index, terms, asked, postings, first) == only_first


def test_a_query_that_is_exactly_a_name_has_name_match_one_and_only_there(conn):
    """``named`` rows (the notes one of whose names the query is exactly, core.index.tables.names)
    get name match 1.0 however many other names they have; every other row keeps its bag-of-names share."""
    sp = load_sparse(conn)
    terms = language_analyzer_for("en").terms("garden")
    plain = name_match(sp, terms)
    kitchen = sp.rows_of(np.asarray([r[0] for r in conn.execute("SELECT id FROM notes WHERE rel_path='kitchen.md'")]))
    exact = name_match(sp, terms, named=kitchen)
    assert exact[kitchen[0]] == 1.0 and plain[kitchen[0]] == 0.0
    others = np.arange(sp.n_docs) != kitchen[0]
    np.testing.assert_array_equal(exact[others], plain[others])
    assert 0 < plain.max() < 1  # "garden" is part of garden.md's name "Garden soil": a share below 1 stays
