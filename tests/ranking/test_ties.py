"""Equal scores follow a tie order (the modes pass the note's path order), never the order rows, edges or
chunks happen to be stored in: the dense pipeline's best chunk per note and graph expansion's paths."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.ranking import scoring
from tests.ranking.test_scoring import _neighbors


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.integers(1, 12), st.integers(0, 10_000))
def test_best_row_per_group_orders_equal_scores_by_the_tie_then_the_row(n_rows: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 3, n_rows).astype(np.float32)  # few distinct values: many ties, past ``take``
    groups = rng.integers(0, 40, n_rows).astype(np.int64)
    rank = rng.permutation(40)  # a group's place among equal scores (its path's), unrelated to its id
    rows = np.flatnonzero(rng.random(n_rows) < 0.9)
    got = scoring.best_row_per_group(scores, rows, groups, k, lambda g: rank[g])
    want: list[int] = []
    for r in sorted(rows.tolist(), key=lambda r: (-scores[r], rank[groups[r]], r)):
        if int(groups[r]) not in {int(groups[w]) for w in want}:
            want.append(r)
    assert got == want[:k]


def test_best_row_per_group_takes_every_row_tied_with_the_last_one_taken() -> None:
    groups = np.arange(1000, dtype=np.int64)
    scores = np.ones(1000, dtype=np.float32)
    # the group ranked first by the tie sits past the first ``take`` rows of a partial selection
    assert scoring.best_row_per_group(scores, groups, groups, 1, lambda g: -g) == [999]
    assert scoring.best_row_per_group(scores, groups, groups, 3) == [0, 1, 2]


def test_graph_expand_breaks_equal_paths_on_the_tie_never_on_the_edges_order() -> None:
    # anchor 1 links to 5 and 6 (hop 1, equal scores); both link to 9 (hop 2, equal scores); 1 and 5 are
    # joined by two edges of different kinds
    edges = [(1, 6, "wikilink"), (1, 5, "wikilink"), (1, 5, "related"), (6, 9, "wikilink"), (5, 9, "wikilink")]
    path_rank = {1: 0, 5: 2, 6: 1, 9: 3}.__getitem__  # 6's path sorts before 5's
    results = set()
    for seed in range(12):
        shuffled = edges[:]
        random.Random(seed).shuffle(shuffled)
        nb = {n: sorted(v, key=lambda _: random.Random(seed).random()) for n, v in _neighbors(shuffled).items()}
        results.add(tuple(sorted(scoring.graph_expand({1: 1.0}, nb, hops=2, decay=0.5, tie=path_rank).items())))
    assert results == {
        (
            (5, (0.5, 1, "related", "out", 1)),  # of the two edges, the kind first by name
            (6, (0.5, 1, "wikilink", "out", 1)),
            (9, (0.25, 6, "wikilink", "out", 2)),  # through 6, whose path sorts first
        )
    }
