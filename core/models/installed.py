"""Installed models: verified copies of local model folders, and the user's default model per kind.

``vaultsearch models install DIR`` (:mod:`core.models.install`) copies a model folder to
``<home>/<name>/`` (home: :func:`default_models_home`, ``~/.local/share/vaultsearch/models``) and
writes ``vaultsearch-install.json`` beside its files: the name, the source folder, and the size and
SHA-256 of every file. Opening the copy later re-checks those digests (:func:`install_pins`, used by
:func:`core.models.local.load_local_dir`), so a file changed after the install is a typed error,
never different vectors under the same name.

The defaults live in ``<home>/settings.json`` (``{"embedding": NAME, "reranker": NAME}``; a NAME
is a preset or an installed model). They are the user's, not a vault's: one model serves every
vault, and an index records the model it was embedded with (meta ``dense_model``), so changing
the default never changes what an existing index is searched with.

This module reads and writes JSON only; it imports no model backend.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from core.errors import ModelError, UsageError

INSTALL_MANIFEST = "vaultsearch-install.json"
SETTINGS_FILE = "settings.json"
SETTING_KINDS = ("embedding", "reranker")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def default_models_home() -> Path:
    """``~/.local/share/vaultsearch/models``: installed models are data the user made, not a cache."""
    return Path.home() / ".local" / "share" / "vaultsearch" / "models"


def check_install_name(name: str, presets: tuple[str, ...]) -> str:
    """A name an installed model may have: letters, digits, ``.``, ``_``, ``-`` (<= 64), not a preset's."""
    if not _NAME.match(name):
        raise UsageError(
            f"invalid model name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)",
            hint="name it: vaultsearch models install DIR --name NAME",
            model=name,
        )
    if name in presets:
        raise UsageError(f"{name!r} is a preset name; install the folder under another --name", model=name)
    return name


def installed_dir(name: str, home: Path | None = None) -> Path | None:
    """The folder of the installed model ``name``, or None when no such model is installed."""
    if not _NAME.match(name):
        return None
    folder = (home or default_models_home()) / name
    return folder if (folder / INSTALL_MANIFEST).is_file() else None


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` (a model config, manifest or settings file); anything else -> ModelError."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"unreadable {what} {path}: {exc}", path=str(path)) from exc
    if not isinstance(data, dict):
        raise ModelError(f"{what} {path} must hold a JSON object", path=str(path))
    return data


def read_install_manifest(folder: Path) -> dict[str, Any] | None:
    """The install manifest of a model folder (None when it has none); a malformed one -> ModelError."""
    path = folder / INSTALL_MANIFEST
    if not path.is_file():
        return None
    data = read_json_object(path, "install manifest")
    files = data.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("size"), int) and isinstance(v.get("sha256"), str)
        for v in files.values()
    ):
        raise ModelError(
            f"malformed install manifest {path}",
            hint=f"reinstall the model: vaultsearch models install SOURCE_DIR --name {folder.name}",
            path=str(path),
        )
    return data


def install_pins(folder: Path) -> dict[str, tuple[int, str]]:
    """file name -> (size, sha256) recorded at install time; {} for a folder that was not installed."""
    manifest = read_install_manifest(folder)
    if manifest is None:
        return {}
    return {name: (int(v["size"]), str(v["sha256"])) for name, v in manifest["files"].items()}


def installed_models(home: Path | None = None) -> list[dict[str, Any]]:
    """The installed models, by name: their manifest plus ``location``."""
    root = home or default_models_home()
    if not root.is_dir():
        return []
    rows = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        manifest = read_install_manifest(folder)
        if manifest is not None:
            rows.append({**manifest, "location": str(folder)})
    return rows


# ---------------------------------------------------------------- the user's defaults


def read_settings(home: Path | None = None) -> dict[str, str]:
    """The stored defaults (``{"embedding": NAME, ...}``); {} when none were set."""
    path = (home or default_models_home()) / SETTINGS_FILE
    if not path.is_file():
        return {}
    data = read_json_object(path, "model settings")
    return {k: v for k, v in data.items() if k in SETTING_KINDS and isinstance(v, str)}


def default_model(kind: str, home: Path | None = None) -> str | None:
    """The user's default model of ``kind`` ('embedding' | 'reranker'), or None when none was chosen."""
    if kind not in SETTING_KINDS:
        raise ValueError(f"kind must be one of {SETTING_KINDS}, got {kind!r}")
    return read_settings(home).get(kind)


def set_default_model(kind: str, name: str, home: Path | None = None) -> None:
    """Make ``name`` the default model of ``kind`` (written atomically)."""
    if kind not in SETTING_KINDS:
        raise ValueError(f"kind must be one of {SETTING_KINDS}, got {kind!r}")
    root = home or default_models_home()
    root.mkdir(parents=True, exist_ok=True)
    settings = {**read_settings(root), kind: name}
    fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=root)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, root / SETTINGS_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
