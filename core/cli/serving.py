"""The serving commands: ``mcp`` (stdio), ``serve`` (HTTP), ``open`` (``serve`` and a browser on its
search page) and ``watch``; their optional extras fail typed."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from core.cli.commands import freshness_options as _freshness
from core.cli.output import emit_stderr, env_index_dir, json_text


def _visible(args: argparse.Namespace) -> tuple[str, ...]:
    from core.serve.tools import DEFAULT_CLASSIFICATIONS

    extra = [c.strip().lower() for value in (args.classification or []) for c in value.split(",") if c.strip()]
    return tuple(dict.fromkeys([*DEFAULT_CLASSIFICATIONS, *extra]))


SERVE_MODULES = {
    "mcp": ("mcp",),
    "serve": ("starlette", "uvicorn"),
    "open": ("starlette", "uvicorn"),
    "watch": ("watchfiles",),
}


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

    config = ServeConfig(Path(args.vault), env_index_dir(args), _visible(args), _freshness(args))
    watcher = None
    if args.watch:
        from core.build.watch import Watcher

        watcher = Watcher(
            Path(args.vault),
            index_dir=env_index_dir(args),
            debounce_ms=args.debounce_ms,
            on_publish=lambda: tools.published(),
            on_build=lambda outcome: tools.warm(outcome),
        )
    tools = Tools(config, watch_state=watcher.state if watcher else None)
    if watcher is not None:
        watcher.start()
    emit_stderr(
        f"vaultsearch {command}: vault {tools.vault_real}; visible classifications: "
        f"{', '.join(config.visible_label())} (fixed; more with --classification); "
        f"watch {'on' if watcher else 'off'}; freshness {'on' if config.freshness.enabled else 'off'}"
    )
    return tools


def cmd_mcp(args: argparse.Namespace) -> int:
    """MCP over stdio until the client closes it."""
    _require_serve("mcp", args.watch)
    from core.serve.mcp_server import run_stdio

    tools = _start_tools(args, "mcp")
    run_stdio(tools)  # instructions built from the index's state (core.serve.instructions)
    return 0


def _token(token_file: str | None, env_value: str | None) -> str | None:
    """The bearer token: the file's text, else VAULTSEARCH_TOKEN, else none (off). A token that was asked
    for and is missing, unreadable or blank is ``TokenFileError``: never a server with the token off."""
    from core.errors import TokenFileError

    if token_file:
        try:
            text = Path(token_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenFileError(
                f"cannot read the token file {token_file}: {exc}", path=token_file, problem=type(exc).__name__
            ) from None
        if not text.strip():
            raise TokenFileError(f"the token file {token_file} is empty", path=token_file, problem="empty")
        return text.strip()
    if env_value is not None and not env_value.strip():
        raise TokenFileError("VAULTSEARCH_TOKEN is set but empty", variable="VAULTSEARCH_TOKEN", problem="empty")
    return env_value.strip() if env_value else None


def _page_url(host: str, port: int) -> str:
    """The search page's address: a wildcard bind is reached through loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def _browse(url: str) -> None:
    """Open ``url`` in the user's browser (``webbrowser``: $BROWSER, else the platform's), or say where to go."""
    import webbrowser

    opened = webbrowser.open(url)
    emit_stderr(f"vaultsearch open: {'opened' if opened else 'no browser found; open'} {url}")


def cmd_open(args: argparse.Namespace) -> int:
    """``serve``, then the search page in a browser once the port is bound."""
    return cmd_serve(args, browse=True)


def cmd_serve(args: argparse.Namespace, *, browse: bool = False) -> int:
    """The JSON API and the search page on HOST:PORT until interrupted."""
    command = "open" if browse else "serve"
    _require_serve(command, args.watch)
    from core.serve.http_api import serve

    token = _token(args.token_file, os.environ.get("VAULTSEARCH_TOKEN"))
    allowed = _allowed_hosts(args.host, args.allow_host, token)
    tools = _start_tools(args, command)

    def listening(port: int) -> None:
        also = f"; also Host {', '.join(allowed)}" if allowed else ""
        emit_stderr(
            f"vaultsearch {command}: listening on http://{args.host}:{port} "
            f"(token {'required' if token else 'off'}{also})"
        )
        if browse:  # the socket listens already: the browser's request waits until uvicorn serves it
            _browse(_page_url(args.host, port))

    serve(tools, host=args.host, port=args.port, token=token, on_listen=listening, allowed_hosts=allowed)
    return 0


def _allowed_hosts(host: str, names: list[str], token: str | None) -> tuple[str, ...]:
    """The ``--allow-host`` names, checked; a bind other than loopback, or any allowed name, without a
    token is ``TokenRequiredError`` (before the vault is opened or the port bound)."""
    from core.errors import TokenRequiredError
    from core.serve.http_api import LOOPBACK_BINDS, allowed_host

    allowed = tuple(dict.fromkeys(allowed_host(n) for n in names))
    if token is None and (host not in LOOPBACK_BINDS or allowed):
        why = f"--host {host}" if host not in LOOPBACK_BINDS else f"--allow-host {', '.join(allowed)}"
        raise TokenRequiredError(
            f"{why} lets other machines reach the server: a token is required", host=host, allow_host=list(allowed)
        )
    return allowed


def watch_line(outcome: Any, *, as_json: bool) -> str:
    """One watch build as the ``watch`` command prints it: JSON, or a line with control characters escaped."""
    from core.terminal import terminal_safe

    if as_json:
        return json_text(outcome.to_dict())
    if outcome.ok:
        state = "up to date" if outcome.up_to_date else f"published {outcome.generation_id}"
        return f"{state} ({len(outcome.changed_paths)} changed path(s), {outcome.seconds:.2f} s)"
    return terminal_safe(f"build FAILED [{outcome.reason}]: {outcome.message} (the previous generation keeps serving)")


def cmd_watch(args: argparse.Namespace) -> int:
    """Rebuild and publish on every debounced batch of note changes until interrupted."""
    _require_serve("watch", False)
    from core.build.watch import BuildOutcome, Watcher

    def report(outcome: BuildOutcome) -> None:
        print(watch_line(outcome, as_json=args.json), flush=True)

    watcher = Watcher(Path(args.vault), index_dir=env_index_dir(args), debounce_ms=args.debounce_ms, on_build=report)
    try:
        watcher.run()
    except KeyboardInterrupt:
        watcher.stop_event.set()
    return 0
