"""vaultsearch: trustworthy search over Markdown vaults.

The read path (``search_vault`` and what it needs) and the write path (``build_index``,
``IndexConfig``, ``BuildReport``) are imported when first used, so a process that only searches
never loads the builder and ``vaultsearch index`` loads no search mode.

Every error class (``core.errors``) is exported here with its stable ``reason`` and CLI ``exit_code``:
``except core.IndexMissingError`` or ``exc.reason == "index_missing"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.errors import (
    BuildError,
    BuildIOError,
    BuildLockedError,
    CapabilityError,
    DenseIncompleteError,
    DenseIndexUnavailableError,
    EvalInputError,
    FilterError,
    GenerationChangedError,
    GenerationMissingError,
    GitCommandError,
    GitRevisionError,
    IndexBusyError,
    IndexDirError,
    IndexDirHoldsNotesError,
    IndexDirInaccessibleError,
    IndexDirIsVaultError,
    IndexDirNotDirectoryError,
    IndexDirNotOursError,
    IndexMissingError,
    IntegrityError,
    InvalidArgumentError,
    LegacyInterruptedError,
    ModelDownloadError,
    ModelError,
    ModelIdentityMismatchError,
    ModelMissingError,
    NotAGitRepoError,
    NoteNotFoundError,
    NoteTooLargeError,
    NotRegularFileError,
    OnnxRuntimeMissingError,
    PathOutsideVaultError,
    QuerySyntaxError,
    RecipeSourceMissingError,
    RerankerUnavailableError,
    SchemaMismatchError,
    SectionNotFoundError,
    ServeExtraMissingError,
    Sha256MismatchError,
    SizeMismatchError,
    SourceChangedError,
    SqliteIntegrityError,
    StateCorruptError,
    TokenFileError,
    TokenRequiredError,
    UnknownModeError,
    UnsupportedIndexFormatError,
    UsageError,
    ValidationError,
    VaultMismatchError,
    VaultMissingError,
    VaultNotDirectoryError,
    VaultPathError,
    VaultSearchError,
    WatchRunningError,
)

if TYPE_CHECKING:
    from core.build.builder import BuildReport, IndexConfig, build_index
    from core.ranking.filters import Filters
    from core.registry import SEARCH_MODE_REGISTRY
    from core.render import format_search_results
    from core.searcher import IndexIdentity, SearchResult, SearchResults, search_vault

__all__ = [
    "BuildError",
    "BuildIOError",
    "BuildLockedError",
    "BuildReport",
    "CapabilityError",
    "DenseIncompleteError",
    "DenseIndexUnavailableError",
    "EvalInputError",
    "FilterError",
    "Filters",
    "GenerationChangedError",
    "GenerationMissingError",
    "GitCommandError",
    "GitRevisionError",
    "IndexBusyError",
    "IndexConfig",
    "IndexDirError",
    "IndexDirHoldsNotesError",
    "IndexDirInaccessibleError",
    "IndexDirIsVaultError",
    "IndexDirNotDirectoryError",
    "IndexDirNotOursError",
    "IndexIdentity",
    "IndexMissingError",
    "IntegrityError",
    "InvalidArgumentError",
    "LegacyInterruptedError",
    "ModelDownloadError",
    "ModelError",
    "ModelIdentityMismatchError",
    "ModelMissingError",
    "NotAGitRepoError",
    "NotRegularFileError",
    "NoteNotFoundError",
    "NoteTooLargeError",
    "OnnxRuntimeMissingError",
    "PathOutsideVaultError",
    "QuerySyntaxError",
    "RecipeSourceMissingError",
    "RerankerUnavailableError",
    "SEARCH_MODE_REGISTRY",
    "SchemaMismatchError",
    "SearchResult",
    "SearchResults",
    "SectionNotFoundError",
    "ServeExtraMissingError",
    "Sha256MismatchError",
    "SizeMismatchError",
    "SourceChangedError",
    "SqliteIntegrityError",
    "StateCorruptError",
    "TokenFileError",
    "TokenRequiredError",
    "UnknownModeError",
    "UnsupportedIndexFormatError",
    "UsageError",
    "ValidationError",
    "VaultMismatchError",
    "VaultMissingError",
    "VaultNotDirectoryError",
    "VaultPathError",
    "VaultSearchError",
    "WatchRunningError",
    "build_index",
    "format_search_results",
    "search_vault",
]

# name -> the module that defines it, imported on first use (``vaultsearch index`` loads no search module)
_LAZY = {
    "BuildReport": "core.build.builder",
    "IndexConfig": "core.build.builder",
    "build_index": "core.build.builder",
    "Filters": "core.ranking.filters",
    "SEARCH_MODE_REGISTRY": "core.registry",
    "format_search_results": "core.render",
    "IndexIdentity": "core.searcher",
    "SearchResult": "core.searcher",
    "SearchResults": "core.searcher",
    "search_vault": "core.searcher",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value  # found once
        return value
    raise AttributeError(f"module 'core' has no attribute {name!r}")
