"""The vault the server tests share, and clients that drive a real server process.

``StdioSession`` starts ``vaultsearch mcp`` as a subprocess and talks to it with the SDK's own
client (``mcp.Client`` over ``StdioServerParameters``), on an event loop in a background
thread so that synchronous tests can call tools. ``HttpServer`` starts ``vaultsearch serve``
on 127.0.0.1 and a free port (``--port 0``; the port is read from its start-up line).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import note, write_vault

VAULTSEARCH = str(Path(sys.executable).with_name("vaultsearch"))

ALPHA = note(
    "Alpha lighthouse",
    """
    # Alpha lighthouse

    Intro line about the harbour.

    ## Setup

    Install the lighthouse lamp carefully.
    Then link it to [[beta]] and to [[secret]].

    ## Usage

    Switch the lamp on at dusk.
    """,
    type="howto",
    tags=["sea", "lamp"],
)
FILES = {
    "notes/alpha.md": ALPHA,
    "notes/beta.md": note("Beta harbour", "Beta talks about the harbour and links back to [[alpha]].", type="ref"),
    "notes/lan-only.md": note("LAN note", "The lighthouse lan moonbeam.", classification="lan"),
    "private/secret.md": note(
        "Secret plans", "The moonbeam project: a lighthouse too. See [[alpha]].", classification="restricted"
    ),
    "notes/old.md": note("Old harbour", "An old harbour note about tides.", type="ref"),
}
HIDDEN_WORD = "moonbeam"


def make_serve_vault(root: Path, outside: Path) -> Path:
    """The shared vault: public, unclassified, lan and restricted notes, and a symlink leaving the vault."""
    write_vault(root, FILES)
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "outside.md").write_text("# Outside\n\nNot in the vault.\n", encoding="utf-8")
    (root / "notes" / "escape.md").symlink_to(outside / "outside.md")
    return root


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}


def serve_refused(vault: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``vaultsearch serve VAULT --port 0 ARGS`` expected to refuse to start, with a bounded wait: a server
    that starts instead is a failure, not a hang."""
    try:
        return subprocess.run(
            [VAULTSEARCH, "serve", str(vault), "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=30,
            env={**_env(), **(env or {})},
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"serve started instead of refusing: {exc.stderr!r}") from None


class StdioSession:
    """One ``vaultsearch mcp`` subprocess and an SDK client session to it."""

    def __init__(self, args: list[str]) -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        params = StdioServerParameters(command=VAULTSEARCH, args=["mcp", *args], env=_env())
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ready = threading.Event()
        self._client: Any = None

        async def main() -> None:  # the client is entered and left in this one task (anyio scopes)
            self._stop = asyncio.Event()
            async with Client(params, read_timeout_seconds=60) as client:
                self._client = client
                self._ready.set()
                await self._stop.wait()

        self._main = asyncio.run_coroutine_threadsafe(main(), self._loop)
        if not self._ready.wait(120):
            raise AssertionError("mcp server did not start")

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=120)

    def list_tools(self) -> Any:
        return self._run(self._client.list_tools())

    @property
    def server_info(self) -> Any:
        """The initialize result's ``serverInfo`` (name, version)."""
        return self._client.server_info

    @property
    def instructions(self) -> str | None:
        """The initialize result's ``instructions``."""
        return self._client.instructions

    def call_raw(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return self._run(self._client.call_tool(name, arguments or {}))

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """A successful call's structured content (fails the test on a tool error)."""
        result = self.call_raw(name, arguments)
        assert not result.is_error, result.content[0].text
        assert result.structured_content == json.loads(result.content[0].text)
        return dict(result.structured_content)

    def error(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """A failed call's error object (fails the test when the call succeeded)."""
        result = self.call_raw(name, arguments)
        assert result.is_error, f"{name}({arguments}) succeeded: {result.content[0].text[:300]}"
        return dict(json.loads(result.content[0].text)["error"])

    def close(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._main.result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


class HttpServer:
    """One ``vaultsearch serve`` subprocess on 127.0.0.1 and a free port."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [VAULTSEARCH, "serve", *args, "--port", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**_env(), **(env or {})},
        )
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        else:
            raise AssertionError("serve did not start: " + "".join(self.lines))
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._drain, daemon=True).start()
        wait_until(self._up, what="the HTTP server to accept connections")

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def _up(self) -> bool:
        import httpx

        try:
            httpx.get(self.base + "/openapi.json", timeout=2)
        except httpx.TransportError:
            return False
        return True

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def wait_until(check: Callable[[], Any], *, what: str, deadline_seconds: float = 60.0) -> Any:
    """Poll ``check`` until it returns a truthy value (a generous deadline guards against a hang;
    it is not a speed assertion)."""
    end = time.monotonic() + deadline_seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
