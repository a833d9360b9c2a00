"""A test process gives memory back between modules (issue 27: under 2 GB on 2 cores): the conftest's
module boundary empties the per-process caches, so the next module loads its own and nothing more."""

from __future__ import annotations

from pathlib import Path

from conftest import clear_loaded_process_caches

from core import search_vault
from core.ranking import sparse, visibility


def test_after_the_caches_are_emptied_the_next_search_loads_again(example_vault: Path) -> None:
    search_vault(example_vault, "postgres connection pool", 5, "hybrid", freshness=False)
    loads = sparse.SPARSE_CACHE.loads, visibility.VISIBILITY_CACHE.loads
    search_vault(example_vault, "postgres connection pool", 5, "hybrid", freshness=False)
    assert (sparse.SPARSE_CACHE.loads, visibility.VISIBILITY_CACHE.loads) == loads  # served from the caches

    clear_loaded_process_caches()
    search_vault(example_vault, "postgres connection pool", 5, "hybrid", freshness=False)
    assert sparse.SPARSE_CACHE.loads == loads[0] + 1
