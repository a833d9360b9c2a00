"""The `vaultsearch` command: each command parses, makes one library call, renders.

Library errors become CLI errors in one place (``main``): the reason and a next-step hint
on stderr (or a JSON object with --json) and the error's exit code:

    0 ok · 1 unexpected vaultsearch error · 2 usage · 3 index missing · 4 integrity failure
    5 a mode's capability missing (dense/rerank) · 6 build conflict or failure · 7 model invalid
    8 verify/status found the vault stale (status --check only)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from core.errors import UsageError, VaultSearchError
from core.registry import DEFAULT_MODE, DEPRECATED_ALIASES, MODE_NAMES

EXIT_STALE = 8


def _env_index_dir(args: argparse.Namespace) -> Path | None:
    """--index-dir, else VAULTSEARCH_INDEX_DIR (environment is read only here, in the CLI)."""
    value = getattr(args, "index_dir", None) or os.environ.get("VAULTSEARCH_INDEX_DIR")
    return Path(value) if value else None


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def cmd_index(args: argparse.Namespace) -> int:
    """Build (unless --embed-only), then embed (with --embed / --embed-only)."""
    from core.index.builder import IndexConfig, build_index
    from core.index.embed import embed_index

    embed = args.embed or args.embed_only
    if (args.embed_limit is not None or args.model) and not embed:
        raise UsageError("--embed-limit and --model apply with --embed or --embed-only")
    progress = not args.json and sys.stderr.isatty()
    out: dict[str, Any] = {}
    if not args.embed_only:
        config = IndexConfig(
            chunk_size=args.chunk_size,
            chunk_overlap=args.chunk_overlap,
            tokenizer=args.tokenizer,
            language=args.language,
        )
        out["build"] = build_index(
            Path(args.vault),
            index_dir=_env_index_dir(args),
            config=config,
            in_place=args.in_place,
            progress=progress,
            keep=args.keep,
            wait_seconds=args.wait,
        ).to_dict()
    if embed:
        out["embed"] = embed_index(
            Path(args.vault),
            model=args.model,
            index_dir=_env_index_dir(args),
            limit=args.embed_limit,
            progress=progress,
            keep=args.keep,
            wait_seconds=args.wait,
        ).to_dict()
    if args.json:
        _print_json(out["build"] if list(out) == ["build"] else out)
        return 0
    if "build" in out:
        _print_build(out["build"])
    if "embed" in out:
        _print_embed(out["embed"])
    return 0


def _print_build(report: dict[str, Any]) -> None:
    state = "up to date" if report["up_to_date"] else f"published {report['generation_id'] or report['index_kind']}"
    print(
        f"{state}: {report['notes']} notes, {report['chunks']} chunks; reused {report['reused']}, changed "
        f"{report['changed']}, removed {report['removed']}; {report['links']} links ({report['unresolved_links']} "
        f"unresolved); {report['seconds']:.2f} s"
    )
    for p in report["problems"]:
        print(f"  problem: {p['path']}: {p['reason']} {p.get('detail', '')}".rstrip())


def _print_embed(report: dict[str, Any]) -> None:
    published = report["generations_published"]
    where = f"{len(published)} generation(s), active {report['generation_id']}" if published else report["index_kind"]
    if report["dropped"]:
        print(f"dropped {report['dropped']} vectors of model {report['dropped_model'].get('name')!r}")
    print(
        f"embedded {report['embedded']} chunks with {report['model_name']} ({where}); "
        f"{report['chunks'] - report['remaining']}/{report['chunks']} chunks have vectors; {report['seconds']:.2f} s"
    )


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "note_types": args.type or None,
        "tags_all": args.tag or None,
        "tags_any": args.any_tag or None,
        "path_prefixes": args.path or None,
        "since": args.since,
        "until": args.until,
        "date_field": args.date_field,
        "include_superseded": args.include_superseded or None,
        "classifications": args.classification or None,
        "status": args.status or None,
        "volatility": args.volatility or None,
    }


def cmd_search(args: argparse.Namespace) -> int:
    from core.render import format_search_results
    from core.searcher import search_vault

    kw = {k: v for k, v in _filters(args).items() if v is not None}
    results = search_vault(
        Path(args.vault),
        args.query,
        mode=args.mode,
        limit=args.n,
        raw=args.raw,
        allow_fallback=args.allow_fallback,
        model=args.model,
        index_dir=_env_index_dir(args),
        options={"reranker": args.reranker} if args.reranker else None,
        **kw,
    )
    if args.json:
        _print_json(results.to_dict())
    else:
        print(format_search_results(results, args.query, args.mode))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from core.index.status import index_status
    from core.render import format_status

    status = index_status(Path(args.vault), _env_index_dir(args))
    _print_json(status) if args.json else print(format_status(status))
    return EXIT_STALE if (args.check and status["staleness"]["stale"]) else 0


def cmd_verify(args: argparse.Namespace) -> int:
    from core import generations as gen

    layout = gen.layout_for(Path(args.vault).resolve(), _env_index_dir(args))
    report = gen.verify_full(layout)
    if args.json:
        _print_json(report)
    else:
        print(f"ok: generation {report.get('generation_id')} sha256 {report.get('sha256')} verified")
    return 0


def cmd_modes(args: argparse.Namespace) -> int:
    from core.registry import markdown_table, modes_json

    if args.markdown:
        print(markdown_table(), end="")
    elif args.json:
        _print_json(modes_json())
    else:
        for m in modes_json():
            print(f"{m['name']:<15} {'(default) ' if m['default'] else ''}{m['summary']}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """List the presets and whether each is present locally, or download one."""
    from core.models.catalog import download_model, list_models

    if args.action == "download":
        if not args.name:
            raise UsageError("name the preset to download: vaultsearch models download NAME")
        files = download_model(args.name)
        _print_json({"downloaded": args.name, "location": str(files.model_path.parent)}) if args.json else print(
            f"downloaded {args.name} to {files.model_path.parent}"
        )
        return 0
    rows = list_models()
    if args.json:
        _print_json(rows)
        return 0
    for m in rows:
        where = m["location"] if m["present"] else "absent (vaultsearch models download " + m["name"] + ")"
        print(f"{m['name']:<20} {m['kind']:<10} {'(default) ' if m['default'] else ''}{m['repo_id']}: {where}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from core.eval.cli import run_eval

    report = run_eval(
        Path(args.vault),
        queries=Path(args.queries),
        qrels=Path(args.qrels),
        modes=args.mode or ["fts"],
        k=args.k,
        failures=args.failures,
        index_dir=_env_index_dir(args),
        model=args.model,
        reranker=args.reranker,
    )
    if args.json:
        _print_json(report.to_dict())
    else:
        print(report.format_table())
        if args.failures:
            print(report.format_failures())
    return 0


def _add_filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters (applied before ranking)")
    g.add_argument("--type", action="append", help="note type (repeatable: any of)")
    g.add_argument("--tag", action="append", help="tag the note must have (repeatable: all of)")
    g.add_argument("--any-tag", action="append", help="tags of which the note must have one (repeatable)")
    g.add_argument("--path", action="append", help="path or namespace prefix (repeatable: any of)")
    g.add_argument("--since", help="ISO date/datetime lower bound on --date-field")
    g.add_argument("--until", help="ISO date/datetime upper bound (a date includes the whole day)")
    g.add_argument("--date-field", default="updated", help="created | updated | source_date | date")
    g.add_argument("--status", action="append", help="note status (repeatable: any of)")
    g.add_argument("--volatility", action="append", help="note volatility (repeatable: any of)")
    g.add_argument("--include-superseded", action="store_true", help="also return superseded notes")
    g.add_argument(
        "--classification", action="append", help="visible classification (repeatable); notes outside leave no trace"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vaultsearch",
        description="Search a Markdown vault through a verified "
        "index. Exit codes: 0 ok, 2 usage, 3 index missing, 4 integrity failure, "
        "5 dense/rerank missing, 6 build conflict, 7 model invalid, 8 stale (--check).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    p = command("index", "build or update the index and publish a verified generation")
    p.add_argument("vault")
    p.add_argument("--index-dir", help="index directory (default VAULT/.vaultsearch; env VAULTSEARCH_INDEX_DIR)")
    p.add_argument("--in-place", action="store_true", help="single writable index.db (served as legacy_db)")
    p.add_argument("--chunk-size", type=int, default=600)
    p.add_argument("--chunk-overlap", type=int, default=60)
    p.add_argument(
        "--tokenizer",
        default="porter unicode61 remove_diacritics 2",
        help="FTS5 tokenizer of the full-text table (raw FTS5 queries); ranking analyses each note's language",
    )
    p.add_argument(
        "--language",
        default="en",
        help="vault default language (a code such as en, de, fr, ja) for notes with no frontmatter lang/language "
        "whose language is not detected; part of the index identity",
    )
    p.add_argument("--keep", type=int, default=2, help="ready generations to retain")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for another build's lock")
    p.add_argument("--embed", action="store_true", help="after building, embed every chunk without a vector")
    p.add_argument(
        "--embed-only", action="store_true", help="only embed chunks without a vector (newest notes first), no rebuild"
    )
    p.add_argument(
        "--embed-limit", type=int, metavar="N", help="embed at most N chunks and publish them as one generation"
    )
    p.add_argument(
        "--model",
        metavar="M",
        help="embedding model: preset or directory (default: the index's, "
        "else the default preset; see `vaultsearch models`)",
    )
    p.set_defaults(func=cmd_index)

    p = command("search", "search the vault")
    p.add_argument("vault")
    p.add_argument("query")
    p.add_argument(
        "--mode",
        default=DEFAULT_MODE,
        choices=[*MODE_NAMES, *DEPRECATED_ALIASES],
        help=f"retrieval mode (default {DEFAULT_MODE}); see `vaultsearch modes`",
    )
    p.add_argument("-n", type=int, default=10, help="number of results")
    p.add_argument("--raw", action="store_true", help="pass FTS5 query syntax through")
    p.add_argument("--allow-fallback", action="store_true", help="let dense modes run fts (labelled) when not ready")
    p.add_argument("--model", help="embedding model (preset or directory) instead of the index's")
    p.add_argument("--reranker", help="cross-encoder for reranked (preset or directory; default bge-reranker-base)")
    p.add_argument("--index-dir")
    _add_filters(p)
    p.set_defaults(func=cmd_search)

    p = command("status", "active generation, counts, coverage, problems, staleness")
    p.add_argument("vault")
    p.add_argument("--index-dir")
    p.add_argument("--check", action="store_true", help=f"exit {EXIT_STALE} when the vault changed since")
    p.set_defaults(func=cmd_status)

    p = command("verify", "full SHA-256 + SQLite integrity check of the active generation")
    p.add_argument("vault")
    p.add_argument("--index-dir")
    p.set_defaults(func=cmd_verify)

    p = command("modes", "list the retrieval modes")
    p.add_argument("--markdown", action="store_true", help="the reference table of docs/architecture.md")
    p.set_defaults(func=cmd_modes)

    p = command("models", "list the model presets and whether they are present locally; or download one")
    p.add_argument("action", nargs="?", choices=["list", "download"], default="list")
    p.add_argument("name", nargs="?", help="preset to download")
    p.set_defaults(func=cmd_models)

    p = command("eval", "nDCG@k, Recall@100, MRR@10, P@k and latency per mode on labelled queries")
    p.add_argument("vault")
    p.add_argument("--queries", required=True, help="BEIR queries JSONL ({_id, text} per line)")
    p.add_argument("--qrels", required=True, help="BEIR qrels TSV (query-id, corpus-id, score; header)")
    p.add_argument("--mode", action="append", choices=list(MODE_NAMES), help="mode to evaluate (repeatable)")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--failures", action="store_true", help="list queries whose relevant note ranks outside top k")
    p.add_argument("--model", help="embedding model for the dense modes (preset or directory) instead of the index's")
    p.add_argument("--reranker", help="cross-encoder for reranked (preset or directory; default bge-reranker-base)")
    p.add_argument("--index-dir")
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except VaultSearchError as exc:
        if getattr(args, "json", False):
            print(json.dumps(exc.to_dict(), ensure_ascii=False, default=str), file=sys.stderr)
        else:
            hint = f"\nhint: {exc.hint}" if exc.hint else ""
            print(f"vaultsearch: error [{exc.reason}]: {exc.message}{hint}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
