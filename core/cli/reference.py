"""The README's command reference, generated from the parser (as sqlite-utils keeps its CLI reference).

README.md holds the block between :data:`BEGIN` and :data:`END`; tests/test_cli_reference.py fails
when it differs from what the parser renders now. After changing an option or a help text, run::

    python -m core.cli.reference --write README.md   # replace the block between the markers
    python -m core.cli.reference --check README.md   # exit 1 (and say so) when the block is out of date
    python -m core.cli.reference                     # print the block

The help is rendered at a fixed width (:data:`WIDTH`), whatever the terminal, so the text is the
same on every machine.
"""

from __future__ import annotations

import argparse
import functools
import html
import sys
from pathlib import Path
from typing import cast

from core.cli.arguments import COMMANDS, build_parser
from core.errors import UsageError

WIDTH = 96
REGENERATE = "python -m core.cli.reference --write README.md"
BEGIN = f"<!-- BEGIN command reference: generated from the parser by `{REGENERATE}`; do not edit by hand -->"
END = "<!-- END command reference -->"


def _help(parser: argparse.ArgumentParser) -> str:
    formatter = cast("type[argparse.HelpFormatter]", parser.formatter_class)
    parser.formatter_class = functools.partial(formatter, width=WIDTH)
    return parser.format_help().rstrip()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _summary(description: str | None) -> str:
    """A command's description as HTML text (a ``<summary>`` shows no Markdown: backticks dropped)."""
    return html.escape((description or "").replace("`", ""))


def reference_markdown() -> str:
    """The whole CLI's help, then each command's, as Markdown (each command folded in a ``<details>``)."""
    parser = build_parser()
    subs = _subparsers(parser)
    parts = [
        "Every command and option, as `--help` prints them (open a command for its options):",
        "",
        "```text",
        "$ vaultsearch --help",
        _help(parser),
        "```",
    ]
    for name in COMMANDS:
        parts += [
            "",
            f"<details><summary><code>vaultsearch {name}</code>: {_summary(subs[name].description)}</summary>",
            "",
            "```text",
            f"$ vaultsearch {name} --help",
            _help(subs[name]),
            "```",
            "",
            "</details>",
        ]
    return "\n".join(parts) + "\n"


def generated_block() -> str:
    """The README block: the markers and the reference between them."""
    return f"{BEGIN}\n\n{reference_markdown()}\n{END}"


def _block_span(text: str) -> tuple[int, int]:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start or text.count(BEGIN) != 1 or text.count(END) != 1:
        raise UsageError(f"the file needs exactly one {BEGIN!r} ... {END!r} block", begin=BEGIN, end=END)
    return start, end + len(END)


def current_block(text: str) -> str:
    """The block a README holds now (markers included)."""
    start, end = _block_span(text)
    return text[start:end]


def with_reference(text: str) -> str:
    """``text`` with its block replaced by the generated one; nothing outside the markers changes."""
    start, end = _block_span(text)
    return text[:start] + generated_block() + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.cli.reference", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--write", metavar="FILE", type=Path, help="replace the block in FILE")
    which.add_argument("--check", metavar="FILE", type=Path, help="exit 1 when FILE's block is out of date")
    args = parser.parse_args(argv)
    if args.write is None and args.check is None:
        sys.stdout.write(generated_block() + "\n")
        return 0
    path: Path = args.write or args.check
    text = path.read_text(encoding="utf-8")
    try:
        updated = with_reference(text)
    except UsageError as exc:
        print(f"{path}: {exc.message}", file=sys.stderr)
        return 2
    if args.check:
        if updated != text:
            print(f"{path}: the command reference is out of date; run: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
