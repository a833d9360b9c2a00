"""The `vaultsearch` command: each command parses, makes one library call, renders.

Library errors become CLI errors in one place (``main``): the reason and a next-step hint
on stderr (or a JSON object with --json) and the error's exit code. Bad arguments are usage
errors (argparse's message, exit 2), never a traceback. Everything printed goes through
``_emit``: note text cannot send terminal control sequences (``core.render.terminal_safe``;
JSON escapes them too), and a closed pipe (``search ... | head``) ends the command quietly.

    0 ok · 1 unexpected vaultsearch error · 2 usage · 3 index missing · 4 integrity failure
    5 a mode's capability missing (dense/rerank) · 6 build conflict or failure · 7 model invalid
    8 verify/status found the vault stale (status --check only) · 130 Ctrl-C during ``index --embed``
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from core.cli.arguments import COMMANDS, build_parser
from core.cli.output import EXIT_BROKEN_PIPE, EXIT_STALE, json_text
from core.errors import VaultSearchError
from core.index.ownership import check_vault

__all__ = ["COMMANDS", "EXIT_BROKEN_PIPE", "EXIT_STALE", "build_parser", "main"]


def _check_vault(args: argparse.Namespace) -> None:
    """A vault argument must name an existing folder: a typo is a usage error, never a new folder."""
    vault = getattr(args, "vault", None)
    if vault is not None:
        check_vault(Path(vault))


def _report_error(exc: VaultSearchError, as_json: bool) -> None:
    from core.terminal import terminal_safe

    if as_json:
        text = json_text(exc.to_dict())
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
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)  # else: the whole CLI's help/errors
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
