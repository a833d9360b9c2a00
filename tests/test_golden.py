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


@pytest.mark.parametrize("corpus", sorted(record.CORPORA))
def test_rankings_are_byte_identical_to_the_golden_file(corpus: str, golden: dict, tmp_path) -> None:
    got = json.loads(json.dumps(record.record_corpus(corpus, tmp_path)))
    for mode in record.MODES:
        assert got[mode] == golden[corpus][mode], f"{corpus}/{mode} differs from the golden rankings"
