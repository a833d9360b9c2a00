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

import hashlib
import importlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from core.errors import ModelDownloadError, ModelError, ModelMissingError, OnnxRuntimeMissingError

KIND_EMBEDDING = "embedding"
KIND_RERANKER = "reranker"
KINDS = (KIND_EMBEDDING, KIND_RERANKER)
POOLINGS = ("mean", "cls")
CONFIG_FILE = "vaultsearch-model.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
DOWNLOAD_MANIFEST = "vaultsearch-download.json"
DEFAULT_EMBEDDING_MODEL = "bge-m3"
DEFAULT_RERANKER_MODEL = "bge-reranker-base"
DENSE_EXTRA = "pip install 'vaultsearch[dense]'"
BACKEND_MODULES = ("onnxruntime", "tokenizers", "huggingface_hub")
_HASH_CHUNK = 1 << 20


# ---------------------------------------------------------------- config and presets


@dataclass(frozen=True)
class ModelConfig:
    """How to run one model: the keys of ``vaultsearch-model.json`` after validation."""

    kind: str
    name: str
    revision: str | None = None
    pooling: str | None = None  # embeddings only: 'mean' | 'cls'
    dim: int | None = None  # expected hidden size; checked against the graph
    max_length: int = 512
    normalize: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""
    pad_token: str | None = None  # None: from tokenizer.json, else [PAD] / <pad>
    pad_id: int | None = None
    output: str | None = None  # output tensor name; None: the first output
    data_files: tuple[str, ...] | None = None  # local dirs: external data; None: every other file


@dataclass(frozen=True)
class PinnedFile:
    """One file of a preset at its pinned revision. ``None`` = not published, not pinned."""

    path: str  # path inside the repository
    size: int | None
    sha256: str | None


@dataclass(frozen=True)
class ModelPreset:
    """A named, pinned model on the Hugging Face hub."""

    name: str
    repo_id: str
    revision: str
    model_file: str
    tokenizer_file: str
    files: tuple[PinnedFile, ...]
    config: ModelConfig
    description: str = ""

    @property
    def kind(self) -> str:
        return self.config.kind


def _preset(
    name: str, repo: str, rev: str, files: tuple[PinnedFile, ...], description: str, **config: Any
) -> ModelPreset:
    return ModelPreset(
        name=name,
        repo_id=repo,
        revision=rev,
        model_file=files[0].path,
        tokenizer_file=files[-1].path,
        files=files,
        config=ModelConfig(name=name, revision=rev, **config),
        description=description,
    )


# Provenance of every pin is in docs/models.md. Files: the graph first, the tokenizer last.
PRESETS: Mapping[str, ModelPreset] = {
    p.name: p
    for p in (
        _preset(
            "bge-m3",
            "BAAI/bge-m3",
            "5617a9f61b028005a4858fdac845db406aefb181",
            (
                PinnedFile(
                    "onnx/model.onnx", 724_923, "f84251230831afb359ab26d9fd37d5936d4d9bb5d1d5410e66442f630f24435b"
                ),
                PinnedFile(
                    "onnx/model.onnx_data",
                    2_266_820_608,
                    "1eebfb28493f67bba03ce0ef64bfdc7fc5a3bd9d7493f818bb1d78cd798416b4",
                ),
                PinnedFile("onnx/Constant_7_attr__value", 65_552, None),
                PinnedFile(
                    "tokenizer.json", 17_098_108, "21106b6d7dab2952c1d496fb21d5dc9db75c28ed361a05f5020bbba27810dd08"
                ),
            ),
            "multilingual, 1024 dims, CLS pooling (default embedding model)",
            kind=KIND_EMBEDDING,
            pooling="cls",
            dim=1024,
            output="token_embeddings",
            pad_token="<pad>",
            pad_id=1,
        ),
        _preset(
            "bge-small-en-v1.5",
            "BAAI/bge-small-en-v1.5",
            "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a",
            (
                PinnedFile(
                    "onnx/model.onnx", 133_093_490, "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35"
                ),
                PinnedFile(
                    "tokenizer.json", 711_396, "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
                ),
            ),
            "English, 384 dims, CLS pooling; better and far faster on English-only vaults",
            kind=KIND_EMBEDDING,
            pooling="cls",
            dim=384,
            pad_token="[PAD]",
            pad_id=0,
            query_prefix="Represent this sentence for searching relevant passages: ",
        ),
        _preset(
            "bge-reranker-base",
            "BAAI/bge-reranker-base",
            "580465186bcc87f862a9b2f9003d720af2377980",
            (
                PinnedFile(
                    "onnx/model.onnx", 1_112_459_588, "15b9a8c3da82eddf263df571281166e00e9308fe19d077084b642ebfcaf06d2b"
                ),
                PinnedFile(
                    "tokenizer.json", 17_098_107, "9eb652ac4e40cc093272bbbe0f55d521cf67570060227109b5cdc20945a4489e"
                ),
            ),
            "cross-encoder, English + Chinese; score = logits[:, 0] (default reranker)",
            kind=KIND_RERANKER,
            output="logits",
            pad_token="<pad>",
            pad_id=1,
        ),
    )
}


# ---------------------------------------------------------------- resolved model files


@dataclass(frozen=True)
class ModelFiles:
    """A model on disk, ready to open: paths, config, and the digests it must match."""

    config: ModelConfig
    model_path: Path
    data_paths: tuple[Path, ...]
    tokenizer_path: Path
    source: str  # 'local_dir' | 'vaultsearch_cache' | 'hf_cache'
    expected: tuple[PinnedFile, ...] = field(default=())  # path = absolute path on disk

    @property
    def weight_paths(self) -> tuple[Path, ...]:
        return (self.model_path, *self.data_paths)


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
        return load_local_dir(Path(name_or_dir).expanduser(), kind=kind)
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
            hint=f"download it with: vaultsearch models download {preset.name} "
            "(or pass a local model directory; see docs/models.md)",
            model=preset.name,
            download_command=f"vaultsearch models download {preset.name}",
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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"unreadable download manifest {path}: {exc}", path=str(path)) from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
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


def preset_named(name: str | ModelPreset) -> ModelPreset:
    """The preset of that name, or ModelMissingError listing the known ones."""
    if isinstance(name, ModelPreset):
        return name
    if name not in PRESETS:
        raise ModelMissingError(
            f"unknown model preset {name!r}; known: {', '.join(PRESETS)}",
            hint="name a preset or pass a local model directory",
            model=name,
            known=list(PRESETS),
        )
    return PRESETS[name]


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
            hint=f"connect (unset HF_HUB_OFFLINE) and run: vaultsearch models download "
            f"{preset.name}, or pass a local model directory",
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


# ---------------------------------------------------------------- local directories


def load_local_dir(directory: Path, *, kind: str) -> ModelFiles:
    """ModelFiles of a directory in the vaultsearch format (see the module docstring)."""
    if not directory.is_dir():
        raise ModelMissingError(
            f"no model preset or directory named {str(directory)!r}",
            hint=f"use a preset ({', '.join(PRESETS)}) or a directory holding "
            f"{MODEL_FILE}, {TOKENIZER_FILE} and {CONFIG_FILE}",
            model=str(directory),
            known=list(PRESETS),
        )
    missing = [n for n in (MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE) if not (directory / n).is_file()]
    if missing:
        raise ModelMissingError(
            f"model directory {directory} lacks {', '.join(missing)}",
            hint="see docs/models.md for the local model format",
            model=str(directory),
            missing=missing,
        )
    config = parse_config(_read_config(directory / CONFIG_FILE), default_name=directory.name)
    if config.kind != kind:
        raise ModelError(
            f"{directory} holds a {config.kind!r} model, not a {kind!r} model",
            model=str(directory),
            kind=config.kind,
            expected_kind=kind,
        )
    return ModelFiles(
        config=config,
        model_path=directory / MODEL_FILE,
        data_paths=_data_files(directory, config),
        tokenizer_path=directory / TOKENIZER_FILE,
        source="local_dir",
    )


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"unreadable {path}: {exc}", path=str(path)) from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path} must hold a JSON object", path=str(path))
    return data


def _data_files(directory: Path, config: ModelConfig) -> tuple[Path, ...]:
    """External data of the graph: ``data_files`` if given, else every other visible file."""
    if config.data_files is not None:
        paths = tuple(directory / n for n in config.data_files)
        absent = [str(p) for p in paths if not p.is_file()]
        if absent:
            raise ModelMissingError(
                f"data files listed in {CONFIG_FILE} are absent: {absent}", model=str(directory), missing=absent
            )
        return paths
    skip = {MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE, DOWNLOAD_MANIFEST}
    return tuple(
        sorted(p for p in directory.iterdir() if p.is_file() and p.name not in skip and not p.name.startswith("."))
    )


_KEYS_COMMON = {"kind", "name", "revision", "max_length", "pad_token", "pad_id", "output", "data_files"}
_KEYS_EMBEDDING = _KEYS_COMMON | {"pooling", "dim", "normalize", "query_prefix", "passage_prefix"}
_TYPES: Mapping[str, tuple[type, ...]] = {
    "name": (str,),
    "revision": (str,),
    "max_length": (int,),
    "pad_token": (str,),
    "pad_id": (int,),
    "output": (str,),
    "data_files": (list,),
    "pooling": (str,),
    "dim": (int,),
    "normalize": (bool,),
    "query_prefix": (str,),
    "passage_prefix": (str,),
}


def parse_config(raw: Mapping[str, Any], *, default_name: str) -> ModelConfig:
    """Validate a ``vaultsearch-model.json`` object; every problem is collected, then one ModelError."""
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ModelError(f"{CONFIG_FILE}: 'kind' must be one of {KINDS}, got {kind!r}", problems=["kind"])
    allowed = _KEYS_EMBEDDING if kind == KIND_EMBEDDING else _KEYS_COMMON
    problems = [f"unknown key {k!r} for a {kind} model" for k in sorted(set(raw) - allowed)]
    for key, value in raw.items():
        types = _TYPES.get(key) if key in allowed else None
        if types and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            problems.append(f"{key!r} must be {types[0].__name__}, got {type(value).__name__}")
    problems += _semantic_problems(raw, kind)
    if problems:
        raise ModelError(f"invalid {CONFIG_FILE}: " + "; ".join(problems), problems=problems)
    values = {k: v for k, v in raw.items() if k != "data_files"}
    values.setdefault("name", default_name)
    data_files = tuple(raw["data_files"]) if "data_files" in raw else None
    return ModelConfig(**values, data_files=data_files)


def _semantic_problems(raw: Mapping[str, Any], kind: str) -> list[str]:
    problems = []
    if kind == KIND_EMBEDDING and raw.get("pooling") not in POOLINGS:
        problems.append(f"'pooling' must be one of {POOLINGS}, got {raw.get('pooling')!r}")
    for key in ("max_length", "dim"):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            problems.append(f"{key!r} must be positive, got {value}")
    files = raw.get("data_files")
    if isinstance(files, list) and not all(isinstance(n, str) and n and "/" not in n for n in files):
        problems.append("'data_files' must list plain file names next to model.onnx")
    return problems


# ---------------------------------------------------------------- file identity


_sha_cache: dict[tuple[Any, ...], str] = {}
_sha_lock = threading.Lock()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, cached in process while its stat (dev, inode, size, mtime, ctime) holds."""
    st = Path(path).stat()
    key = (str(Path(path).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _sha_lock:
        if key in _sha_cache:
            return _sha_cache[key]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_HASH_CHUNK), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _sha_lock:
        _sha_cache[key] = value
    return value


def verify_model_files(files: ModelFiles) -> str:
    """Check every pinned/recorded size and digest; return the weights digest for the identity.

    The weights digest is the SHA-256 of ``"<file name> <sha256>\\n"`` lines, sorted, over
    the graph and its data files: the same bytes give the same digest wherever they live.
    All mismatches are collected and raised as one ModelError naming file, expected, actual.
    """
    problems: list[dict[str, object]] = []
    for pin in files.expected:
        path = Path(pin.path)
        if not path.is_file():
            problems.append({"file": pin.path, "check": "exists", "expected": "file", "actual": "absent"})
            continue
        size = path.stat().st_size
        if pin.size is not None and size != pin.size:
            problems.append({"file": pin.path, "check": "size", "expected": pin.size, "actual": size})
        elif pin.sha256 is not None and (actual := file_sha256(path)) != pin.sha256:
            problems.append({"file": pin.path, "check": "sha256", "expected": pin.sha256, "actual": actual})
    if problems:
        raise ModelError(
            f"model {files.config.name!r} does not match its pinned/recorded files",
            hint=f"re-download with: vaultsearch models download {files.config.name}",
            model=files.config.name,
            problems=problems,
        )
    lines = sorted(f"{p.name} {file_sha256(p)}\n" for p in files.weight_paths)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()
