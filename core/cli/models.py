"""``vaultsearch models``: list the presets and the installed models, download, install, build the recipe folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.cli.output import emit, print_json
from core.errors import UsageError

ACTIONS = ("list", "download", "install", "build-minilm")


def cmd_models(args: argparse.Namespace) -> int:
    """One action of ``vaultsearch models`` (``list`` by default)."""
    if args.action != "install" and (args.name_as or args.no_default):
        raise UsageError("--name and --no-default apply to: vaultsearch models install")
    if args.action != "build-minilm" and args.source:
        raise UsageError("--source applies to: vaultsearch models build-minilm")
    if args.action == "list":
        return _list(args)
    if not args.name:
        what = {"download": "NAME", "install": "DIR|NAME", "build-minilm": "DIR"}[args.action]
        raise UsageError(f"vaultsearch models {args.action} needs {what}")
    if args.action == "download":
        from core.models.catalog import download_model

        files = download_model(args.name)
        out = {"downloaded": args.name, "location": str(files.model_path.parent)}
        print_json(out) if args.json else emit(f"downloaded {args.name} to {out['location']}")
        return 0
    if args.action == "install":
        from core.models.install import install_model
        from core.rerank import check_model

        report = install_model(args.name, check=check_model, name=args.name_as, make_default=not args.no_default)
        print_json(report) if args.json else emit(_installed_text(report))
        return 0
    from core.models.recipe import build_minilm_dir

    folder = build_minilm_dir(Path(args.name), Path(args.source) if args.source else None)
    if args.json:
        print_json({"built": str(folder)})
    else:
        emit(f"built {folder}\nnext: vaultsearch models install {folder}")
    return 0


def _installed_text(report: dict[str, Any]) -> str:
    dim = f", {report['dim']} dims" if report.get("dim") else ""
    default = (
        f"\nit is now the default {report['kind']} model: vaultsearch index VAULT --embed uses it"
        if report["default"]
        else ""
    )
    return (
        f"installed {report['name']} ({report['kind']}{dim}) at {report['location']}\n"
        f"checked: {', '.join(report['checks'])}; weights sha256 {report['weights_sha256']}{default}"
    )


def _list(args: argparse.Namespace) -> int:
    from core.models.catalog import list_models
    from core.models.installed import installed_models, read_settings

    defaults = read_settings()
    presets = list_models()
    installed = installed_models()
    if args.json:
        print_json({"defaults": defaults, "presets": presets, "installed": installed})
        return 0
    chosen = set(defaults.values())
    for m in installed:
        mark = "(default) " if m["name"] in chosen else ""
        dim = f"{m['dim']} dims, " if m.get("dim") else ""
        emit(f"{m['name']:<24} {m['kind']:<10} {mark}installed, {dim}from {m.get('source_dir')}: {m['location']}")
    for m in presets:
        mark = "(default) " if m["name"] in chosen or (m["default"] and m["kind"] not in defaults) else ""
        where = m["location"] if m["present"] else f"absent (vaultsearch models install {m['name']})"
        emit(f"{m['name']:<24} {m['kind']:<10} {mark}preset {m['repo_id']}: {where}")
    return 0
