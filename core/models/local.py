"""Local model directories in the vaultsearch format, their config, and file identity.

A directory holds ``model.onnx`` (+ external data files), ``tokenizer.json`` and
``vaultsearch-model.json`` (docs/models.md describes every key). :func:`load_local_dir` turns it
into :class:`ModelFiles`; :func:`verify_model_files` re-checks pinned and recorded digests each
time a model is opened (cached per process by file stat) and yields the weights digest that
goes into the model identity stored with the vectors.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import ModelError, ModelMissingError
from core.models.installed import INSTALL_MANIFEST, install_pins, read_json_object

KIND_EMBEDDING = "embedding"
KIND_RERANKER = "reranker"
KINDS = (KIND_EMBEDDING, KIND_RERANKER)
POOLINGS = ("mean", "cls")
CONFIG_FILE = "vaultsearch-model.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
DOWNLOAD_MANIFEST = "vaultsearch-download.json"
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class PinnedFile:
    """One file of a preset at its pinned revision. ``None`` = not published, not pinned."""

    path: str  # path inside the repository
    size: int | None
    sha256: str | None


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
class ModelFiles:
    """A model on disk, ready to open: paths, config, and the digests it must match."""

    config: ModelConfig
    model_path: Path
    data_paths: tuple[Path, ...]
    tokenizer_path: Path
    source: str  # 'local_dir' | 'installed' | 'vaultsearch_cache' | 'hf_cache'
    expected: tuple[PinnedFile, ...] = field(default=())  # path = absolute path on disk

    @property
    def weight_paths(self) -> tuple[Path, ...]:
        return (self.model_path, *self.data_paths)


# ---------------------------------------------------------------- local directories


def load_local_dir(directory: Path, *, kind: str | None, known_presets: Sequence[str] = ()) -> ModelFiles:
    """ModelFiles of a directory in the vaultsearch format (see the module docstring); ``kind`` None
    accepts either kind (``models install`` learns it from the config).

    ``known_presets`` only words the error for a name that is neither a preset nor a directory."""
    if not directory.is_dir():
        raise ModelMissingError(
            f"no model preset, installed model or directory named {str(directory)!r}",
            hint=f"use a preset ({', '.join(known_presets)}), an installed model (vaultsearch models list) "
            "or a directory holding "
            f"{MODEL_FILE}, {TOKENIZER_FILE} and {CONFIG_FILE}",
            model=str(directory),
            known=list(known_presets),
        )
    missing = [n for n in (MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE) if not (directory / n).is_file()]
    if missing:
        raise ModelMissingError(
            f"model directory {directory} lacks {', '.join(missing)}",
            hint="see docs/models.md for the local model format",
            model=str(directory),
            missing=missing,
        )
    config = parse_config(read_json_object(directory / CONFIG_FILE, "model config"), default_name=directory.name)
    if kind is not None and config.kind != kind:
        raise ModelError(
            f"{directory} holds a {config.kind!r} model, not a {kind!r} model",
            model=str(directory),
            kind=config.kind,
            expected_kind=kind,
        )
    pins = install_pins(directory)  # an installed copy: every file must still match its recorded digest
    return ModelFiles(
        config=config,
        model_path=directory / MODEL_FILE,
        data_paths=_data_files(directory, config),
        tokenizer_path=directory / TOKENIZER_FILE,
        source="installed" if pins else "local_dir",
        expected=tuple(PinnedFile(str(directory / n), size, sha) for n, (size, sha) in sorted(pins.items())),
    )


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
    skip = {MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE, DOWNLOAD_MANIFEST, INSTALL_MANIFEST}
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
            hint="reinstall it: vaultsearch models install SOURCE_DIR (it was changed after `models install`)"
            if files.source == "installed"
            else f"re-download with: vaultsearch models download {files.config.name}",
            model=files.config.name,
            problems=problems,
        )
    lines = sorted(f"{p.name} {file_sha256(p)}\n" for p in files.weight_paths)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()
