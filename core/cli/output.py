"""What the CLI writes: text with control characters escaped, JSON, and the exit codes of its own."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

EXIT_STALE = 8
EXIT_INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C during an embedding (what was published is kept)
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a reader that went away


def emit(text: str) -> None:
    """Print ``text`` to stdout with every control character shown as an escape, never interpreted."""
    from core.terminal import terminal_safe

    print(terminal_safe(text))


def emit_stderr(text: str) -> None:
    """Print ``text`` to stderr (flushed), control characters escaped as by :func:`emit`: a status line
    that names a vault or index path holding OSC/BEL sequences shows them, never runs them."""
    import sys

    from core.terminal import terminal_safe

    print(terminal_safe(text), file=sys.stderr, flush=True)


def json_text(obj: Any, **kw: Any) -> str:
    """JSON whose strings carry no raw control character: json escapes C0; DEL, C1 and bidi controls too."""
    from core.terminal import UNSAFE_CODEPOINTS

    escapes = {c: f"\\u{c:04x}" for c in UNSAFE_CODEPOINTS if c >= 0x7F}
    return json.dumps(obj, ensure_ascii=False, default=str, **kw).translate(escapes)


def env_index_dir(args: argparse.Namespace) -> Path | None:
    """--index-dir, else VAULTSEARCH_INDEX_DIR (environment is read only here, in the CLI)."""
    value = getattr(args, "index_dir", None) or os.environ.get("VAULTSEARCH_INDEX_DIR")
    return Path(value) if value else None


def read_layout(args: argparse.Namespace) -> Any:
    """The layout a reading command uses: an existing vault folder and a readable index dir, else a typed
    usage error (exit 2) instead of a traceback."""
    from core.index.layout import layout_for
    from core.index.ownership import check_index_dir_for_reading, check_vault

    check_vault(Path(args.vault))
    layout = layout_for(Path(args.vault).resolve(), env_index_dir(args))
    check_index_dir_for_reading(layout)
    return layout


def print_json(obj: Any) -> None:
    emit(json_text(obj, indent=2))
