"""SortedTerms (core.ranking.sorted_terms): a term dictionary whose ids are the sorted terms' positions
answers every look-up, iteration and view as the dict of the same terms does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.ranking.sorted_terms import SortedTerms


@given(st.sets(st.text(min_size=1, max_size=6)), st.lists(st.text(max_size=6), max_size=20))
def test_sorted_terms_is_the_dict_of_its_sorted_terms(words, probes):
    ordered = sorted(words)
    want = {w: i for i, w in enumerate(ordered)}
    got = SortedTerms(np.asarray(ordered, dtype=object))
    assert dict(got) == want and len(got) == len(want)
    assert list(got) == list(want) and list(got.keys()) == list(want.keys())
    assert list(got.values()) == list(want.values()) and list(got.items()) == list(want.items())
    for p in [*probes, *ordered[:5]]:
        assert (p in got) == (p in want)
        assert got.get(p, -1) == want.get(p, -1)
        if p not in want:
            with pytest.raises(KeyError):
                got[p]
    assert 3 not in got and got.get(None) is None  # type: ignore[arg-type]
