"""Issue 28 case 16: every MCP reply to a bad call is the typed error format.

An unknown tool is ``invalid_argument`` (as every other tool error: JSON with a stable reason),
through the SDK's own client. A query holding a lone surrogate (``"\\ud800"``, legal JSON that
the SDK's client cannot even write) is sent as raw JSON-RPC lines over the server's stdin: it gets
a typed ``invalid_argument`` reply, and the server goes on answering.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.build.builder import build_index
from tests.serve.serve_helpers import VAULTSEARCH, StdioSession, _env, make_serve_vault

REPLY_DEADLINE = 60.0  # a guard against a hang, not a speed assertion


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mcp_hostile")
    root = make_serve_vault(base / "vault", base / "outside")
    build_index(root)
    return root


def test_an_unknown_tool_is_a_typed_invalid_argument(vault: Path) -> None:
    session = StdioSession([str(vault)])
    try:
        assert session.error("no_such_tool", {"query": "x"})["reason"] == "invalid_argument"
        assert session.call("search", {"query": "lighthouse", "mode": "fts"})["hits"]  # and it goes on answering
    finally:
        session.close()


class RawMcp:
    """``vaultsearch mcp`` driven by raw JSON-RPC lines (what a client that writes any legal JSON sends)."""

    def __init__(self, vault: Path) -> None:
        self.proc = subprocess.Popen(
            [VAULTSEARCH, "mcp", str(vault)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_env(),
        )
        self._buffer = b""
        self.request(
            1,
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode("ascii") + b"\n")  # ASCII: "\ud800" as its JSON escape
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self._reply(rid)

    def _reply(self, rid: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        end = time.monotonic() + REPLY_DEADLINE
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("id") == rid:
                    return dict(message)
            left = end - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise AssertionError(f"no reply to request {rid} in {REPLY_DEADLINE} s")
            chunk = self.proc.stdout.read1(65536)  # type: ignore[attr-defined]
            if not chunk:
                raise AssertionError(f"the server closed its output before replying to request {rid}")
            self._buffer += chunk

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def raw(vault: Path) -> Iterator[RawMcp]:
    client = RawMcp(vault)
    yield client
    client.close()


def _tool_error(reply: dict[str, Any]) -> dict[str, Any]:
    result = reply["result"]
    assert result["isError"] is True
    return dict(json.loads(result["content"][0]["text"])["error"])


@pytest.mark.parametrize("query", ["\ud800", "lighthouse \udfff", "a\ud800b" * 50])
def test_a_query_holding_a_lone_surrogate_gets_a_typed_reply(raw: RawMcp, query: str) -> None:
    reply = raw.request(2, "tools/call", {"name": "search", "arguments": {"query": query}})
    assert _tool_error(reply)["reason"] == "invalid_argument"
    ok = raw.request(3, "tools/call", {"name": "search", "arguments": {"query": "lighthouse", "mode": "fts"}})
    assert ok["result"].get("isError") is not True and ok["result"]["structuredContent"]["hits"]


def test_a_lone_surrogate_in_an_argument_name_or_another_field_gets_a_reply(raw: RawMcp) -> None:
    reply = raw.request(4, "tools/call", {"name": "search", "arguments": {"query": "x", "\udc80": 1}})
    assert _tool_error(reply)["reason"] == "invalid_argument"
    reply = raw.request(5, "tools/call", {"name": "no_such_\ud800", "arguments": {}})
    assert _tool_error(reply)["reason"] == "invalid_argument"
