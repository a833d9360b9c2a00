"""vaultsearch: trustworthy search over Markdown vaults.

The read path (``search_vault`` and what it needs) is imported eagerly; the write path
(``build_index``, ``IndexConfig``, ``BuildReport``) only when first used, so a process that
only searches never loads the builder.

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
from core.ranking.filters import Filters
from core.registry import SEARCH_MODE_REGISTRY
from core.render import format_search_results
from core.searcher import IndexIdentity, SearchResult, SearchResults, search_vault

if TYPE_CHECKING:
    from core.build.builder import BuildReport, IndexConfig, build_index

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

_WRITE_PATH = frozenset({"BuildReport", "IndexConfig", "build_index"})


def __getattr__(name: str) -> Any:
    if name in _WRITE_PATH:
        from core.build import builder

        return getattr(builder, name)
    raise AttributeError(f"module 'core' has no attribute {name!r}")
