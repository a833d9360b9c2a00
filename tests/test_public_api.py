"""The public surface of ``core``: ``core.__all__`` pinned (adding or removing a name is a conscious
change made here too), every error class exported with its stable ``reason``."""

from __future__ import annotations

import inspect

import pytest

import core
from core import errors

PUBLIC = [
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


def test_core_all_is_pinned() -> None:
    assert sorted(core.__all__) == PUBLIC
    assert len(set(core.__all__)) == len(core.__all__)


def test_every_public_name_resolves() -> None:
    for name in core.__all__:
        assert getattr(core, name) is not None, name


def test_every_error_class_is_exported_from_core_with_its_reason() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.VaultSearchError)]
    for cls in classes:
        assert cls.__name__ in core.__all__ and getattr(core, cls.__name__) is cls, cls.__name__
        assert isinstance(cls.reason, str) and cls.reason and isinstance(cls.exit_code, int)


def test_an_error_is_caught_by_its_exported_class(tmp_path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    with pytest.raises(core.IndexMissingError) as caught:
        core.search_vault(vault, "anything")
    assert caught.value.reason == "index_missing" and isinstance(caught.value, core.VaultSearchError)
