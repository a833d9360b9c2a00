"""The golden rankings: top-10 (rel_path, score) of 50 queries per corpus in every lexical mode.

Recorded before the package layout moved (tests/golden/record.py); any change to ranking
shows here. A deliberate change is recorded again with ``python -m tests.golden.record --write``
and the diff of ``tests/golden/rankings.json`` goes into the same commit.
"""

from __future__ import annotations

import json

import pytest

from tests.golden import record


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(record.GOLDEN.read_text(encoding="utf-8"))


# numpy picks its SIMD loops by CPU (AVX-512 or AVX2): `vector`'s float32 arithmetic then differs in the
# last bits, up to 2e-6 of a score on an AVX-512 machine against the AVX2 one these were recorded on (the
# order of every ranking the same). Scores are compared within this; the paths and their order exactly.
SCORE_TOLERANCE = 1e-5


def _same(got: list, want: list) -> bool:
    """Are two recorded rankings (per query, [path, score as text] pairs) the same paths in the same order,
    each score within ``SCORE_TOLERANCE``?"""
    if [[p for p, _ in q] for q in got] != [[p for p, _ in q] for q in want]:
        return False
    return all(
        abs(float(a) - float(b)) <= SCORE_TOLERANCE for qa, qb in zip(got, want) for (_, a), (_, b) in zip(qa, qb)
    )


def test_a_ranking_differing_in_order_or_beyond_the_tolerance_is_not_the_same() -> None:
    want = [[["a.md", "2.000000"], ["b.md", "1.000000"]]]
    assert _same([[["a.md", "2.000002"], ["b.md", "0.999999"]]], want)
    assert not _same([[["b.md", "2.000000"], ["a.md", "1.000000"]]], want)
    assert not _same([[["a.md", "2.000100"], ["b.md", "1.000000"]]], want)
    assert not _same([[["a.md", "2.000000"]]], want)


@pytest.mark.parametrize("corpus", sorted(record.CORPORA))
def test_rankings_match_the_golden_file(corpus: str, golden: dict, tmp_path) -> None:
    got = json.loads(json.dumps(record.record_corpus(corpus, tmp_path)))
    for mode in record.MODES:
        assert _same(got[mode], golden[corpus][mode]), f"{corpus}/{mode} differs from the golden rankings"
