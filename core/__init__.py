"""vaultsearch: trustworthy search over Markdown vaults."""

from core.builder import BuildReport, IndexConfig, build_index
from core.errors import VaultSearchError
from core.filters import Filters
from core.registry import SEARCH_MODE_REGISTRY
from core.render import format_search_results
from core.searcher import SearchResult, SearchResults, search_vault

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
