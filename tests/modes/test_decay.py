"""Volatility and age down-weighting: the formula on hand-computed cases, and the search option
(off by default; when on, an old volatile note drops below a fresh one and is labelled)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import note

from core.errors import UsageError
from core.modes.decay import AgeDecay
from core.ranking import scoring
from core.searcher import search_vault


def test_decay_hand_computed() -> None:
    ages = np.array([0.0, 30.0, 60.0, 30.0, -5.0])
    halves = np.array([30.0, 30.0, 30.0, math.inf, 30.0])
    got = scoring.volatility_age_decay(ages, halves, floor=0.2)
    # 0.2 + 0.8 * 2^-(age/30): 1, 0.6, 0.4; no decay for inf; a future date counts as age 0
    assert got.tolist() == pytest.approx([1.0, 0.6, 0.4, 1.0, 1.0])


def test_decay_is_monotone_in_age_and_bounded_by_the_floor() -> None:
    ages = np.linspace(0, 10_000, 50)
    got = scoring.volatility_age_decay(ages, np.full(50, 30.0), floor=0.25)
    assert np.all(np.diff(got) <= 0) and got.min() >= 0.25 and got.max() == 1.0


NOW = 1_700_000_000.0  # 2023-11-14
FILES = {
    "old-volatile.md": note(
        "Release plan", "harbour release harbour release harbour", volatility="volatile", updated="2020-01-01"
    ),
    "new-volatile.md": note("Release notes", "harbour release", volatility="volatile", updated="2023-11-10"),
    "old-stable.md": note("Harbour history", "harbour harbour release", volatility="stable", updated="2001-01-01"),
}


@pytest.fixture(scope="module")
def vault(make_vault):
    return make_vault(FILES, name="decay")


def test_decay_is_off_by_default_and_reorders_when_asked(vault) -> None:
    plain = search_vault(vault, "harbour release", mode="fts")
    assert plain[0].rel_path == "old-volatile.md" and all("age_decay" not in r.score_source for r in plain)
    decayed = search_vault(vault, "harbour release", mode="fts", decay=AgeDecay(now=NOW))
    order = [r.rel_path for r in decayed]
    assert order.index("new-volatile.md") < order.index("old-volatile.md")
    labels = {r.rel_path: r.score_source for r in decayed}
    assert labels["old-volatile.md"].endswith("+age_decay") and "age_decay" not in labels["old-stable.md"]
    assert {r.rel_path: r.score for r in decayed}["old-stable.md"] == {r.rel_path: r.score for r in plain}[
        "old-stable.md"
    ]


def test_decay_settings_are_checked() -> None:
    with pytest.raises(UsageError):
        AgeDecay(floor=1.5)
    with pytest.raises(UsageError):
        AgeDecay(date_fields=("mtime",))


def test_notes_without_volatility_decay_only_when_the_empty_key_says_so(make_vault) -> None:
    vault = make_vault(
        {
            "old.md": note("Old", "lantern lantern lantern", updated="2015-01-01"),
            "new.md": note("New", "lantern", updated="2023-11-01"),
        },
        name="decay-unset",
    )
    assert [r.rel_path for r in search_vault(vault, "lantern", mode="fts", decay=AgeDecay(now=NOW))][0] == "old.md"
    every = AgeDecay(half_lives={"": 365.0}, now=NOW)
    assert [r.rel_path for r in search_vault(vault, "lantern", mode="fts", decay=every)][0] == "new.md"
