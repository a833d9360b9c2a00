"""vaultsearch: trustworthy search over Markdown vaults.

The read path (``search_vault`` and what it needs) is imported eagerly; the write path
(``build_index``, ``IndexConfig``, ``BuildReport``) only when first used, so a process that
only searches never loads the builder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.errors import VaultSearchError
from core.ranking.filters import Filters
from core.registry import SEARCH_MODE_REGISTRY
from core.render import format_search_results
from core.searcher import SearchResult, SearchResults, search_vault

if TYPE_CHECKING:
    from core.build.builder import BuildReport, IndexConfig, build_index

__all__ = [
    "SEARCH_MODE_REGISTRY",
    "BuildReport",
    "Filters",
    "IndexConfig",
    "SearchResult",
    "SearchResults",
    "VaultSearchError",
    "build_index",
    "format_search_results",
    "search_vault",
]

_WRITE_PATH = frozenset({"BuildReport", "IndexConfig", "build_index"})


def __getattr__(name: str) -> Any:
    if name in _WRITE_PATH:
        from core.build import builder

        return getattr(builder, name)
    raise AttributeError(f"module 'core' has no attribute {name!r}")
