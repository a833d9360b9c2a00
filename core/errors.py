"""The one exception hierarchy of vaultsearch.

Every error carries a stable machine-readable ``reason`` (tests and callers match on it,
never on message text) and the CLI ``exit_code`` it maps to. Every reason is snake_case
(they double as ``fallback_reason`` values and integrity codes named by the spec) and unique
across the tree: tests/test_errors.py enforces both.

    VaultSearchError                      vaultsearch_error      exit 1
    ├── UsageError (ValueError)           usage                  exit 2
    │   ├── UnknownModeError              unknown_mode
    │   ├── FilterError                   invalid_filter
    │   └── QuerySyntaxError              query_syntax
    ├── IndexMissingError                 index_missing          exit 3
    ├── IntegrityError                    integrity              exit 4
    │   ├── GenerationMissingError        missing
    │   ├── SizeMismatchError             size_mismatch
    │   ├── Sha256MismatchError           sha256_mismatch
    │   ├── GenerationChangedError        generation_changed
    │   ├── StateCorruptError             state_corrupt
    │   ├── SqliteIntegrityError          integrity_check_failed
    │   └── SchemaMismatchError           schema_mismatch
    ├── CapabilityError                   capability_missing     exit 5
    │   ├── DenseIndexUnavailableError    dense_index_unavailable
    │   ├── DenseIncompleteError          dense_incomplete
    │   ├── ModelMissingError             model_missing
    │   ├── ModelIdentityMismatchError    model_identity_mismatch
    │   ├── OnnxRuntimeMissingError       onnxruntime_missing
    │   └── RerankerUnavailableError      reranker_unavailable
    ├── BuildError                        build_failed           exit 6
    │   ├── BuildLockedError              build_locked
    │   ├── SourceChangedError            source_changed
    │   └── ValidationError               validation_failed
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


class QuerySyntaxError(UsageError):
    reason = "query_syntax"


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


class SqliteIntegrityError(IntegrityError):
    reason = "integrity_check_failed"


class SchemaMismatchError(IntegrityError):
    reason = "schema_mismatch"


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
