"""``vaultsearch models install DIR|NAME``: verify a model, record its identity, make it the default.

A **folder** (the vaultsearch local format, docs/models.md) is copied to ``<home>/<name>/``
(:func:`core.models.installed.default_models_home`) through a staging folder, and proven usable
before it is published there:

1. the files are present and ``vaultsearch-model.json`` is valid (kind, pooling, ...);
2. the SHA-256 and size of every copied file are recorded in ``vaultsearch-install.json``
   (opening the copy later re-checks them);
3. the ONNX graph loads in onnxruntime, declares inputs we can feed and the configured output
   with a usable shape, and the tokenizer loads;
4. one passage and one query embed to finite vectors of the declared dimension (unit length
   when the config normalises); a reranker scores two pairs to finite numbers.

A failed check leaves nothing behind (the staging folder is removed) and raises the typed error
of that check. A **preset** name is downloaded with huggingface-hub at its pinned revision and
digests (:func:`core.models.catalog.download_model`) and then checked the same way (3, 4); without
a network that is a ``ModelMissingError`` whose hint names the offline way (a local folder).

The model installed last (or downloaded by ``install NAME``) becomes the user's default of its
kind unless ``make_default=False``: ``index --embed`` without ``--model`` uses it for an index that
records no model yet. Why a user setting and not a per-vault one: a model serves every vault, and
each index records the model its vectors came from, which a search always reuses.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import ModelError
from core.models.catalog import download_model
from core.models.installed import (
    INSTALL_MANIFEST,
    check_install_name,
    default_models_home,
    installed_dir,
    set_default_model,
)
from core.models.local import CONFIG_FILE, KIND_EMBEDDING, ModelFiles, file_sha256, load_local_dir
from core.models.presets import PRESETS

PROBE_PASSAGE = "Semantic search finds notes by meaning: a query about cooking pasta finds the spaghetti recipe."
PROBE_QUERY = "how do I cook pasta"


def install_model(
    source: str | Path,
    *,
    name: str | None = None,
    make_default: bool = True,
    home: Path | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Install a preset (download) or a local model folder (copy); see the module docstring.

    Returns what was installed: name, kind, location, dim, weights digest, the checks passed, and
    whether it is now the default."""
    root = home or default_models_home()
    if str(source) in PRESETS:
        files = download_model(str(source), cache_dir)
        report = {"name": str(source), "source": "hub", **probe_model(files)}
    else:
        report = _install_folder(Path(source).expanduser(), name, root)
    if make_default:
        set_default_model(report["kind"], report["name"], root)
    return {**report, "default": make_default}


def _install_folder(source: Path, name: str | None, root: Path) -> dict[str, Any]:
    """Copy ``source`` to a staging folder under ``root``, record and check it, then publish it as ``root/name``."""
    config = load_local_dir(source, kind=None, known_presets=tuple(PRESETS)).config
    name = check_install_name(name or config.name, tuple(PRESETS))
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".install-{name}-", dir=root))
    try:
        files = load_local_dir(source, kind=None)
        for path in (files.model_path, *files.data_paths, files.tokenizer_path, source / CONFIG_FILE):
            shutil.copyfile(path, staging / path.name)  # a symlinked file is copied, not linked
        manifest = {
            "name": name,
            "kind": config.kind,
            "model_name": config.name,
            "source_dir": str(source.resolve()),
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "files": {p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in sorted(staging.iterdir())},
        }
        _write_manifest(staging, manifest)
        checked = probe_model(load_local_dir(staging, kind=config.kind))
        _write_manifest(staging, {**manifest, "dim": checked["dim"], "weights_sha256": checked["weights_sha256"]})
        target = root / name
        _publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone after a publish (renamed); a failed install leaves nothing
    _forget_loaded_models()
    return {"name": name, "source": str(source.resolve()), **checked, "location": str(target)}


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / INSTALL_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _publish(staging: Path, target: Path) -> None:
    """Rename the checked staging folder to ``target``; an earlier install of that name is replaced."""
    if target.exists() or target.is_symlink():
        if installed_dir(target.name, target.parent) is None:
            raise ModelError(
                f"{target} exists and is not an installed model; it is left alone",
                hint="remove it, or install under another --name",
                path=str(target),
            )
        old = Path(tempfile.mkdtemp(prefix=f".replaced-{target.name}-", dir=target.parent))
        target.rename(old / target.name)
        staging.rename(target)
        shutil.rmtree(old)
        return
    staging.rename(target)


def _forget_loaded_models() -> None:
    """A reinstall under the same name changes the files behind a loaded model reference."""
    from core.dense import clear_model_cache

    clear_model_cache()


# ---------------------------------------------------------------- the checks that need the model running


def probe_model(files: ModelFiles) -> dict[str, Any]:
    """Open the model (graph, inputs, output, tokenizer, pinned digests) and run it once; a problem -> ModelError."""
    if files.config.kind == KIND_EMBEDDING:
        from core.dense import Embedder

        embedder = Embedder(files)
        vectors = np.vstack([embedder.embed_passages([PROBE_PASSAGE]), embedder.embed_query(PROBE_QUERY)[None, :]])
        _check_vectors(vectors, embedder.dim, files)
        identity: dict[str, Any] = embedder.identity
        checks = ["files", "config", "onnx_loads", "inputs_outputs", "tokenizer", "embedding_dim", "finite"]
    else:
        from core.rerank import CrossEncoder

        reranker = CrossEncoder(files)
        scores = reranker.score(PROBE_QUERY, [PROBE_PASSAGE, "An unrelated note about tax forms."])
        if scores.shape != (2,) or not np.all(np.isfinite(scores)):
            raise ModelError(f"reranker {files.config.name!r} gave scores {scores.tolist()}", model=files.config.name)
        identity = {**reranker.identity, "dim": None}
        checks = ["files", "config", "onnx_loads", "inputs_outputs", "tokenizer", "scores_finite"]
    return {
        "kind": files.config.kind,
        "model_name": files.config.name,
        "dim": identity["dim"],
        "weights_sha256": identity["weights_sha256"],
        "location": str(files.model_path.parent),
        "checks": checks,
    }


def _check_vectors(vectors: np.ndarray, dim: int, files: ModelFiles) -> None:
    """The probe vectors: [2, dim], finite, unit length when the config normalises."""
    cfg = files.config
    problems = []
    if vectors.shape != (2, dim) or (cfg.dim is not None and dim != cfg.dim):
        problems.append(f"shape {list(vectors.shape)}, expected [2, {cfg.dim or dim}]")
    if not np.all(np.isfinite(vectors)):
        problems.append("non-finite values")
    elif cfg.normalize and not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3):
        problems.append("vectors are not unit length although the config normalises")
    if problems:
        raise ModelError(
            f"model {cfg.name!r} failed its test embedding: " + "; ".join(problems),
            hint="check pooling, output and dim in vaultsearch-model.json (docs/models.md)",
            model=cfg.name,
            problems=problems,
        )
