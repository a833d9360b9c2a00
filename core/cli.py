"""The `vaultsearch` command: each command parses, makes one library call, renders.

Library errors become CLI errors in one place (``main``): the reason and a next-step hint
on stderr (or a JSON object with --json) and the error's exit code. Bad arguments are usage
errors (argparse's message, exit 2), never a traceback. Everything printed goes through
``_emit``: note text cannot send terminal control sequences (``core.render.terminal_safe``;
JSON escapes them too), and a closed pipe (``search ... | head``) ends the command quietly.

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
from core.index.ownership import check_vault
from core.registry import DEFAULT_MODE, DEPRECATED_ALIASES, MODE_NAMES

EXIT_STALE = 8
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a reader that went away
MAX_RESULTS = 10_000


def _emit(text: str) -> None:
    """Print ``text`` to stdout with every control character shown as an escape, never interpreted."""
    from core.render import terminal_safe

    print(terminal_safe(text))


def _json_text(obj: Any, **kw: Any) -> str:
    """JSON whose strings carry no raw control character: json escapes C0; DEL, C1 and bidi controls too."""
    from core.render import UNSAFE_CODEPOINTS

    escapes = {c: f"\\u{c:04x}" for c in UNSAFE_CODEPOINTS if c >= 0x7F}
    return json.dumps(obj, ensure_ascii=False, default=str, **kw).translate(escapes)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 10**9:
        raise argparse.ArgumentTypeError(f"must be between 1 and 10^9, not {value}")
    return value


def _results_count(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_RESULTS:
        raise argparse.ArgumentTypeError(f"at most {MAX_RESULTS} results, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    return 0 if text.strip() == "0" else _positive_int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be between 0 and 86400 seconds, not {text}")
    return value


def _mode(text: str) -> str:
    """A mode name or a deprecated alias (accepted, not listed in the choices)."""
    if text in MODE_NAMES or text in DEPRECATED_ALIASES:
        return text
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(MODE_NAMES)})")


def _text_arg(text: str) -> str:
    """A free-text argument: undecodable bytes from the command line (lone surrogates) are refused."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not valid UTF-8 text") from None
    return text


def _env_index_dir(args: argparse.Namespace) -> Path | None:
    """--index-dir, else VAULTSEARCH_INDEX_DIR (environment is read only here, in the CLI)."""
    value = getattr(args, "index_dir", None) or os.environ.get("VAULTSEARCH_INDEX_DIR")
    return Path(value) if value else None


def _read_layout(args: argparse.Namespace) -> Any:
    """The layout a reading command uses: an existing vault folder and a readable index dir, else a typed
    usage error (exit 2) instead of a traceback."""
    from core import generations as gen
    from core.index.ownership import check_index_dir_for_reading, check_vault

    check_vault(Path(args.vault))
    layout = gen.layout_for(Path(args.vault).resolve(), _env_index_dir(args))
    check_index_dir_for_reading(layout)
    return layout


def _print_json(obj: Any) -> None:
    _emit(_json_text(obj, indent=2))


def cmd_index(args: argparse.Namespace) -> int:
    """Build (unless --embed-only), then embed (with --embed / --embed-only)."""
    from core.index.build_embed import EmbedInStaging
    from core.index.builder import build_index
    from core.index.embed import embed_index

    embed = args.embed or args.embed_only
    if (args.embed_limit is not None or args.model) and not embed:
        raise UsageError("--embed-limit and --model apply with --embed or --embed-only")
    progress = not args.json and sys.stderr.isatty()
    out: dict[str, Any] = {}
    if not args.embed_only:
        changes = {
            "chunk_size": args.chunk_size,
            "chunk_overlap": args.chunk_overlap,
            "tokenizer": args.tokenizer,
            "language": args.language,
            "include_dot_paths": None if args.dot_paths is None else args.dot_paths == "index",
        }
        out["build"] = build_index(
            Path(args.vault),
            index_dir=_env_index_dir(args),
            changes=changes,
            in_place=args.in_place,
            progress=progress,
            keep=args.keep,
            wait_seconds=args.wait,
            source=args.source,
            rev=args.rev,
            # --embed: a small change's vectors go into the same generation as its text
            before_publish=EmbedInStaging(args.model, batch=args.embed_limit)
            if args.embed and not args.in_place
            else None,
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
        from core.render import format_build

        _emit(format_build(out["build"]))
    if "embed" in out:
        _print_embed(out["embed"])
    return 0


def _print_embed(report: dict[str, Any]) -> None:
    published = report["generations_published"]
    where = f"{len(published)} generation(s), active {report['generation_id']}" if published else report["index_kind"]
    if report["dropped"]:
        _emit(f"dropped {report['dropped']} vectors of model {report['dropped_model'].get('name')!r}")
    _emit(
        f"embedded {report['embedded']} chunks with {report['model_name']} ({where}); "
        f"{report['chunks'] - report['remaining']}/{report['chunks']} chunks have vectors; {report['seconds']:.2f} s"
    )


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "note_types": args.type or None,
        "tags_all": args.tag or None,
        "tags_any": args.any_tag or None,
        "path_prefixes": args.path or None,
        "namespaces": args.namespace or None,
        "since": args.since,
        "until": args.until,
        "date_field": args.date_field,
        "include_superseded": args.include_superseded or None,
        "classifications": args.classification or None,
        "status": args.status or None,
        "volatility": args.volatility or None,
    }


def cmd_search(args: argparse.Namespace) -> int:
    from core.modes.decay import AgeDecay
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
        decay=AgeDecay() if args.age_decay else None,
        freshness=_freshness(args),
        **kw,
    )
    if args.json:
        _print_json(results.to_dict())
    else:
        warning = freshness_warning(results.freshness)
        if warning:
            _emit(warning)
        _emit(format_search_results(results, args.query, args.mode))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from core.render import format_note
    from core.searcher import obsidian_uri
    from core.vault.show import parse_line_range, show_note

    lines = parse_line_range(args.lines) if args.lines is not None else None
    view = show_note(Path(args.vault), args.path, section=args.section, lines=lines)
    uri = obsidian_uri(Path(args.vault).resolve().name, view.rel_path)
    if args.json:
        _print_json({**view.to_dict(), "obsidian_uri": uri})
    else:
        _emit(format_note(view))
    return 0


def freshness_warning(fresh: dict[str, Any]) -> str | None:
    """The one line text output shows when the index is behind the vault (or a watch build failed)."""
    failure = fresh.get("last_build_failure")
    fail = f"; the last watch build failed [{failure.get('reason')}]" if failure else ""
    if fresh.get("stale"):
        sample = ", ".join(fresh.get("sample_paths") or [])
        return (
            f"warning: STALE index: {fresh['added']} added, {fresh['modified']} modified, {fresh['removed']} removed "
            f"since it was built ({sample}){fail}; run: vaultsearch index VAULT"
        )
    if fresh.get("reason") in UNCHECKED_WARNINGS:
        return f"warning: index freshness NOT checked: {UNCHECKED_WARNINGS[fresh['reason']].format(**fresh)}{fail}"
    return f"warning: {fail[2:]}" if fail else None


UNCHECKED_WARNINGS = {  # unchecked for a reason the user did not choose: said in text output too
    "walk_over_budget": "the vault walk took longer than its {walk_budget_seconds:g} s budget "
    "(run `vaultsearch watch VAULT` beside it for exact freshness at any size)",
    "vault_too_large": "{notes} notes are more than max_notes {max_notes}",
}


def _freshness(args: argparse.Namespace) -> Any:
    from core.index.freshness import FreshnessOptions

    return FreshnessOptions(
        enabled=not args.no_freshness,
        window_seconds=getattr(args, "freshness_window", 2.0),  # a one-shot search walks at most once anyway
        walk_budget_seconds=args.freshness_budget or None,
    )


def _add_freshness_budget(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--freshness-budget",
        type=float,
        default=1.0,
        help="seconds the freshness walk may take before it is abandoned and says so (default 1; 0: no limit)",
    )


def _visible(args: argparse.Namespace) -> tuple[str, ...]:
    from core.serve.tools import DEFAULT_CLASSIFICATIONS

    extra = [c.strip().lower() for value in (args.classification or []) for c in value.split(",") if c.strip()]
    return tuple(dict.fromkeys([*DEFAULT_CLASSIFICATIONS, *extra]))


SERVE_MODULES = {"mcp": ("mcp",), "serve": ("starlette", "uvicorn"), "watch": ("watchfiles",)}


def _require_serve(command: str, watch: bool) -> None:
    """The optional modules a serving command needs, or a typed error naming the extra."""
    import importlib.util

    needed = SERVE_MODULES[command] + (SERVE_MODULES["watch"] if watch else ())
    missing = []
    for name in needed:
        try:
            found = importlib.util.find_spec(name) is not None
        except ValueError:  # a module set to None in sys.modules (tests) has no spec
            found = False
        if not found:
            missing.append(name)
    if missing:
        from core.errors import ServeExtraMissingError

        raise ServeExtraMissingError(f"`vaultsearch {command}` needs {', '.join(missing)}", missing=missing)


def _start_tools(args: argparse.Namespace, command: str) -> Any:
    """The server's Tools (and its watcher when --watch), announced on stderr."""
    from core.serve.tools import ServeConfig, Tools

    config = ServeConfig(Path(args.vault), _env_index_dir(args), _visible(args), _freshness(args))
    watcher = None
    if args.watch:
        from core.index.watch import Watcher

        watcher = Watcher(
            Path(args.vault),
            index_dir=_env_index_dir(args),
            debounce_ms=args.debounce_ms,
            on_publish=lambda: tools.published(),
            on_build=lambda outcome: tools.warm(outcome),
        )
    tools = Tools(config, watch_state=watcher.state if watcher else None)
    if watcher is not None:
        watcher.start()
    print(
        f"vaultsearch {command}: vault {tools.vault_real}; visible classifications: "
        f"{', '.join(config.visible_label())} (fixed; more with --classification); "
        f"watch {'on' if watcher else 'off'}; freshness {'on' if config.freshness.enabled else 'off'}",
        file=sys.stderr,
        flush=True,
    )
    return tools


def cmd_mcp(args: argparse.Namespace) -> int:
    """MCP over stdio until the client closes it."""
    _require_serve("mcp", args.watch)
    from core.serve.mcp_server import run_stdio

    tools = _start_tools(args, "mcp")
    run_stdio(tools, instructions=f"Read-only search over the Markdown vault {tools.vault_real}.")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """The JSON API on HOST:PORT until interrupted."""
    _require_serve("serve", args.watch)
    from core.serve.http_api import serve

    token = os.environ.get("VAULTSEARCH_TOKEN") or None
    if args.token_file:
        token = Path(args.token_file).read_text(encoding="utf-8").strip() or None
    tools = _start_tools(args, "serve")

    def listening(port: int) -> None:
        print(
            f"vaultsearch serve: listening on http://{args.host}:{port} (token {'required' if token else 'off'})",
            file=sys.stderr,
            flush=True,
        )

    serve(tools, host=args.host, port=args.port, token=token, on_listen=listening)
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """Rebuild and publish on every debounced batch of note changes until interrupted."""
    _require_serve("watch", False)
    from core.index.watch import BuildOutcome, Watcher

    def report(outcome: BuildOutcome) -> None:
        if args.json:
            print(json.dumps(outcome.to_dict()), flush=True)
        elif outcome.ok:
            state = "up to date" if outcome.up_to_date else f"published {outcome.generation_id}"
            print(f"{state} ({len(outcome.changed_paths)} changed path(s), {outcome.seconds:.2f} s)", flush=True)
        else:
            print(
                f"build FAILED [{outcome.reason}]: {outcome.message} (the previous generation keeps serving)",
                flush=True,
            )

    watcher = Watcher(Path(args.vault), index_dir=_env_index_dir(args), debounce_ms=args.debounce_ms, on_build=report)
    try:
        watcher.run()
    except KeyboardInterrupt:
        watcher.stop_event.set()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from core.index.status import index_status
    from core.render import format_status

    status = index_status(Path(args.vault), _env_index_dir(args), classifications=args.classification)
    if args.json:
        _print_json(status)
    else:
        _emit(format_status(status))
        _emit(f"visibility {_visibility_line(args.classification)}")
    return EXIT_STALE if (args.check and status["staleness"]["stale"]) else 0


def _visibility_line(classifications: list[str] | None) -> str:
    if not classifications:
        return "every note (no --classification given: secret ones included)"
    return f"only classifications {', '.join(sorted({c.lower() for c in classifications}))}"


def cmd_verify(args: argparse.Namespace) -> int:
    from core import generations as gen

    report = gen.verify_full(_read_layout(args))
    if args.json:
        _print_json(report)
    else:
        _emit(f"ok: generation {report.get('generation_id')} sha256 {report.get('sha256')} verified")
    return 0


def cmd_modes(args: argparse.Namespace) -> int:
    from core.registry import markdown_table, modes_json

    if args.markdown:
        sys.stdout.write(markdown_table())
    elif args.json:
        _print_json(modes_json())
    else:
        for m in modes_json():
            _emit(f"{m['name']:<15} {'(default) ' if m['default'] else ''}{m['summary']}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """List the presets and whether each is present locally, or download one."""
    from core.models.catalog import download_model, list_models

    if args.action == "download":
        if not args.name:
            raise UsageError("name the preset to download: vaultsearch models download NAME")
        files = download_model(args.name)
        _print_json({"downloaded": args.name, "location": str(files.model_path.parent)}) if args.json else _emit(
            f"downloaded {args.name} to {files.model_path.parent}"
        )
        return 0
    rows = list_models()
    if args.json:
        _print_json(rows)
        return 0
    for m in rows:
        where = m["location"] if m["present"] else "absent (vaultsearch models download " + m["name"] + ")"
        _emit(f"{m['name']:<20} {m['kind']:<10} {'(default) ' if m['default'] else ''}{m['repo_id']}: {where}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from core.eval.cli import run_eval

    _read_layout(args)
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
        classifications=args.classification,
    )
    if args.json:
        _print_json(report.to_dict())
    else:
        _emit(report.format_table())
        if args.failures:
            _emit(report.format_failures())
    return 0


def _add_filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters (applied before ranking)")
    g.add_argument("--type", action="append", type=_text_arg, help="note type (repeatable: any of)")
    g.add_argument(
        "--tag",
        action="append",
        type=_text_arg,
        help="tag the note must have, nested ones included (repeatable: all of)",
    )
    g.add_argument(
        "--any-tag", action="append", type=_text_arg, help="tags of which the note must have one (repeatable)"
    )
    g.add_argument("--path", action="append", type=_text_arg, help="path prefix, e.g. projects/ (repeatable: any of)")
    g.add_argument("--namespace", action="append", type=_text_arg, help="frontmatter namespace/project (repeatable)")
    g.add_argument("--since", type=_text_arg, help="date or datetime lower bound, offsets allowed (compared in UTC)")
    g.add_argument("--until", type=_text_arg, help="date or datetime upper bound (a date includes the whole day)")
    g.add_argument(
        "--date-field",
        type=_text_arg,
        help="updated | date | created | source_date | mtime | git_date | git_created (default: the first of "
        "updated, date, created, mtime the note has)",
    )
    g.add_argument("--status", action="append", type=_text_arg, help="note status (repeatable: any of)")
    g.add_argument("--volatility", action="append", type=_text_arg, help="note volatility (repeatable: any of)")
    g.add_argument("--include-superseded", action="store_true", help="also return superseded notes")
    _add_classification(g)


VISIBILITY_HELP = (
    "visible classification (repeatable); notes outside leave no trace. Default: every note is visible, "
    "secret ones included. A note without one counts as 'public'; 'unreadable' names notes whose "
    "classification could not be read exactly (hidden unless listed)"
)


def _add_classification(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--classification", action="append", type=_text_arg, metavar="C", help=VISIBILITY_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vaultsearch",
        description="Search a Markdown vault through a verified "
        "index. Visibility: without --classification every note is shown, secret ones included; "
        "search, status and eval take --classification (repeatable) to see only those classifications. "
        "Exit codes: 0 ok, 2 usage, 3 index missing, 4 integrity failure, "
        "5 dense/rerank missing, 6 build conflict, 7 model invalid, 8 stale (--check).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    p = command("index", "build or update the index and publish a verified generation")
    p.add_argument("vault")
    p.add_argument(
        "--index-dir",
        help="index directory (default VAULT/.vaultsearch; env VAULTSEARCH_INDEX_DIR): a new or empty folder, or one "
        "vaultsearch created (marked); never the vault or a folder of notes",
    )
    p.add_argument("--in-place", action="store_true", help="single writable index.db (served as legacy_db)")
    reused = "default: what the index was built with, else "
    p.add_argument("--chunk-size", type=_positive_int, help=f"chunk size in characters ({reused}600)")
    p.add_argument("--chunk-overlap", type=_non_negative_int, help=f"chunk overlap in characters ({reused}60)")
    p.add_argument(
        "--tokenizer",
        type=_text_arg,
        help="FTS5 tokenizer of the full-text table (raw FTS5 queries); ranking analyses each note's language "
        f"({reused}'porter unicode61 remove_diacritics 2')",
    )
    p.add_argument(
        "--language",
        type=_text_arg,
        help="vault default language (a code such as en, de, fr, ja) for notes with no frontmatter lang/language "
        f"whose language is not detected; part of the index identity ({reused}en)",
    )
    p.add_argument(
        "--source",
        choices=["worktree", "git"],
        help="read notes from the working tree or from a git commit (default: what the index was built from, "
        "else worktree); stored with the index",
    )
    p.add_argument(
        "--rev", type=_text_arg, help="with --source git: the revision to index (default: the stored one, else HEAD)"
    )
    p.add_argument(
        "--dot-paths",
        choices=["ignore", "index"],
        help=f"dot-files and dot-folders (.github/, .draft.md): ignored as Obsidian does, or indexed ({reused}ignore)",
    )
    p.add_argument("--keep", type=_positive_int, default=2, help="ready generations to retain")
    p.add_argument("--wait", type=_seconds, default=0.0, help="seconds to wait for another build's lock")
    p.add_argument("--embed", action="store_true", help="after building, embed every chunk without a vector")
    p.add_argument(
        "--embed-only", action="store_true", help="only embed chunks without a vector (newest notes first), no rebuild"
    )
    p.add_argument(
        "--embed-limit",
        type=_positive_int,
        metavar="N",
        help="embed at most N chunks (N >= 1) and publish them as one generation",
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
    p.add_argument("query", type=_text_arg)
    p.add_argument(
        "--mode",
        default=DEFAULT_MODE,
        type=_mode,
        metavar="{" + ",".join(MODE_NAMES) + "}",
        help=f"retrieval mode (default {DEFAULT_MODE}); see `vaultsearch modes`",
    )
    p.add_argument("-n", type=_results_count, default=10, help=f"number of results (1 to {MAX_RESULTS})")
    p.add_argument("--raw", action="store_true", help="pass FTS5 query syntax through")
    p.add_argument("--allow-fallback", action="store_true", help="let dense modes run fts (labelled) when not ready")
    p.add_argument("--model", type=_text_arg, help="embedding model (preset or directory) instead of the index's")
    p.add_argument(
        "--reranker", type=_text_arg, help="cross-encoder for reranked (preset or directory; default bge-reranker-base)"
    )
    p.add_argument(
        "--age-decay",
        action="store_true",
        help="down-weight volatile/evolving notes by age (git_date, else updated/date/created); off by default",
    )
    p.add_argument("--index-dir")
    p.add_argument(
        "--no-freshness",
        action="store_true",
        help="skip the check of the vault against the index (says checked: false)",
    )
    _add_freshness_budget(p)
    _add_filters(p)
    p.set_defaults(func=cmd_search)

    p = command("watch", "rebuild and publish the index whenever notes change (debounced)")
    p.add_argument("vault")
    p.add_argument("--index-dir")
    p.add_argument("--debounce-ms", type=int, default=200, help="collect changes for this long before a build")
    p.set_defaults(func=cmd_watch)

    for name, help_text, func in (
        ("mcp", "serve the read-only tools over MCP (stdio)", cmd_mcp),
        ("serve", "serve the read-only tools as a JSON API over HTTP (loopback)", cmd_serve),
    ):
        p = command(name, help_text)
        p.add_argument("vault")
        p.add_argument("--index-dir")
        p.add_argument(
            "--classification",
            action="append",
            help="also show notes of this classification (repeatable; default: unclassified and public only)",
        )
        p.add_argument("--watch", action="store_true", help="rebuild and publish when notes change")
        p.add_argument("--debounce-ms", type=int, default=200, help="with --watch: debounce of the watcher")
        p.add_argument("--no-freshness", action="store_true", help="do not check the vault against the index")
        p.add_argument(
            "--freshness-window", type=float, default=2.0, help="seconds a freshness scan is reused (default 2)"
        )
        _add_freshness_budget(p)
        if name == "serve":
            p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
            p.add_argument("--port", type=int, default=8765, help="port (0: a free one, printed on stderr)")
            p.add_argument("--token-file", help="require this bearer token (else env VAULTSEARCH_TOKEN, if set)")
        p.set_defaults(func=func)

    p = command("show", "print a note of the vault (or one section, or a line range) with line numbers")
    p.add_argument("vault")
    p.add_argument("path", type=_text_arg, help="the note's path in the vault (.md optional)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--section", type=_text_arg, metavar="H", help="only the section under this heading")
    which.add_argument("--lines", type=_text_arg, metavar="A:B", help="only lines A to B (1-based, inclusive)")
    p.set_defaults(func=cmd_show)

    p = command("status", "active generation, counts, coverage, problems, staleness")
    p.add_argument("vault")
    p.add_argument("--index-dir")
    p.add_argument("--check", action="store_true", help=f"exit {EXIT_STALE} when the vault changed since")
    _add_classification(p)
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
    p.add_argument("-k", type=_results_count, default=10)
    p.add_argument("--failures", action="store_true", help="list queries whose relevant note ranks outside top k")
    p.add_argument("--model", help="embedding model for the dense modes (preset or directory) instead of the index's")
    p.add_argument("--reranker", help="cross-encoder for reranked (preset or directory; default bge-reranker-base)")
    p.add_argument("--index-dir")
    _add_classification(p)
    p.set_defaults(func=cmd_eval)
    return parser


def _check_vault(args: argparse.Namespace) -> None:
    """A vault argument must name an existing folder: a typo is a usage error, never a new folder."""
    vault = getattr(args, "vault", None)
    if vault is not None:
        check_vault(Path(vault))


def _report_error(exc: VaultSearchError, as_json: bool) -> None:
    from core.render import terminal_safe

    if as_json:
        text = _json_text(exc.to_dict())
    else:
        hint = f"\nhint: {exc.hint}" if exc.hint else ""
        text = terminal_safe(f"vaultsearch: error [{exc.reason}]: {exc.message}{hint}")
    print(text, file=sys.stderr)


def _quiet_broken_pipe() -> int:
    """The reader went away (``| head``): stop quietly, and keep Python from complaining at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        try:
            _check_vault(args)
            code = int(args.func(args))
            sys.stdout.flush()
            return code
        except VaultSearchError as exc:
            _report_error(exc, getattr(args, "json", False))
            return exc.exit_code
    except BrokenPipeError:
        return _quiet_broken_pipe()


if __name__ == "__main__":
    sys.exit(main())
