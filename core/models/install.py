"""``vaultsearch models install DIR|NAME``: verify a model, record its identity, make it the default.

The check that runs the model (``check``: :func:`core.rerank.check_model`, which the CLI passes)
is given by the caller: this package sits below the Embedder and the CrossEncoder.

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

A process that had loaded an earlier install of the same name keeps it until
:func:`core.dense.clear_model_cache` (the CLI is a new process). A failed check leaves nothing behind (the staging folder is removed) and raises the typed error
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.errors import ModelError
from core.models.catalog import download_model
from core.models.installed import (
    INSTALL_MANIFEST,
    check_install_name,
    default_models_home,
    installed_dir,
    set_default_model,
)
from core.models.local import CONFIG_FILE, ModelFiles, file_sha256, load_local_dir
from core.models.presets import PRESETS

# Opens a model and runs it once (core.rerank.check_model): kind, model_name, dim, weights_sha256, checks.
Check = Callable[[ModelFiles], dict[str, Any]]


def install_model(
    source: str | Path,
    *,
    check: Check,
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
        report = {"name": str(source), "source": "hub", **check(files)}
    else:
        report = _install_folder(Path(source).expanduser(), name, root, check)
    if make_default:
        set_default_model(report["kind"], report["name"], root)
    return {**report, "default": make_default}


def _install_folder(source: Path, name: str | None, root: Path, check: Check) -> dict[str, Any]:
    """Copy ``source`` to a staging folder under ``root``, record and check it, then publish it as ``root/name``."""
    files = load_local_dir(source, kind=None, known_presets=tuple(PRESETS))
    config = files.config
    name = check_install_name(name or config.name, tuple(PRESETS))
    _check_target(root / name)  # before the copy and the check; again at the rename
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".install-{name}-", dir=root))
    try:
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
        checked = check(load_local_dir(staging, kind=config.kind))
        _write_manifest(staging, {**manifest, "dim": checked["dim"], "weights_sha256": checked["weights_sha256"]})
        target = root / name
        _publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone after a publish (renamed); a failed install leaves nothing
    return {"name": name, "source": str(source.resolve()), **checked, "location": str(target)}


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / INSTALL_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _check_target(target: Path) -> None:
    """``target`` is free or holds an earlier install (which is replaced); anything else is left alone."""
    if (target.exists() or target.is_symlink()) and installed_dir(target.name, target.parent) is None:
        raise ModelError(
            f"{target} exists and is not an installed model; it is left alone",
            hint="remove it, or install under another --name",
            path=str(target),
        )


def _publish(staging: Path, target: Path) -> None:
    """Rename the checked staging folder to ``target``; an earlier install of that name is replaced."""
    _check_target(target)
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".replaced-{target.name}-", dir=target.parent))
        target.rename(old / target.name)
        staging.rename(target)
        shutil.rmtree(old)
        return
    staging.rename(target)
