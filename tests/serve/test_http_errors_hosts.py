"""Issue 27 (HTTP): every error status is JSON with a stable ``reason``, and ``serve --allow-host NAME``
lets requests addressed to NAME through the Host check, but only with a token: a server reachable from
other machines (a bind other than loopback, or an allowed name) refuses to start without one."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from core.build.builder import build_index
from core.serve.http_api import GuardMiddleware, build_app
from core.serve.schema import REQUEST_BOUNDS
from core.serve.tools import ServeConfig, Tools
from tests.serve.serve_helpers import HttpServer, make_serve_vault, serve_refused

TOKEN = "t0ken-for-allowed-hosts"
BASE = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("hosts")
    root = make_serve_vault(base / "vault", base / "outside")
    build_index(root)
    return root


@pytest.fixture(scope="module")
def tools(vault: Path) -> Tools:
    return Tools(ServeConfig(vault))


@pytest.fixture
def client(tools: Tools) -> Iterator[TestClient]:
    app = build_app(tools, port=8765, token=TOKEN)
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        yield c


def _error(r: httpx.Response) -> tuple[int, str]:
    assert r.headers["content-type"].startswith("application/json"), (r.status_code, r.text[:200])
    body = r.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return r.status_code, body["error"]["reason"]


def test_every_error_status_is_json_with_a_stable_reason(client, tools, monkeypatch):
    assert _error(client.post("/search", json={"q": "x", "limit": "many"})) == (400, "invalid_argument")
    assert _error(client.get("/status", headers={"Authorization": "Bearer wrong"})) == (401, "unauthorized")
    assert _error(client.get("/status", headers={"Origin": "http://evil.example"})) == (403, "origin_not_allowed")
    assert _error(client.get("/no/such/endpoint")) == (404, "no_such_endpoint")
    assert _error(client.post("/read_note", json={"path": "notes/none.md"})) == (404, "note_not_found")
    assert _error(client.delete("/search")) == (405, "method_not_allowed")
    big = b"{" + b" " * REQUEST_BOUNDS.max_body_bytes + b"}"
    assert _error(client.post("/search", content=big)) == (413, "request_too_large")
    assert _error(client.get("/status", headers={"Host": "vault.example:8765"})) == (421, "host_not_allowed")
    monkeypatch.setattr(tools, "call", lambda name, arguments: 1 / 0)  # a bug no handler expects
    assert _error(client.get("/status")) == (500, "internal_error")
    assert "ZeroDivisionError" in client.get("/status").json()["error"]["message"]


def test_a_body_that_never_arrives_is_a_json_408() -> None:
    bounds = dataclasses.replace(REQUEST_BOUNDS, body_seconds=0.2)

    async def never(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app must not be reached")

    guard = GuardMiddleware(never, hosts=frozenset({"h:1"}), origins=frozenset(), token=None, bounds=bounds)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/search", "headers": [(b"host", b"h:1")]}
    asyncio.run(guard(scope, receive, send))
    assert sent[0]["status"] == 408 and (b"content-type", b"application/json") in sent[0]["headers"]
    assert b'"reason":"request_timeout"' in sent[1]["body"].replace(b" ", b"")


def test_allowed_host_names_pass_the_host_and_origin_checks(tools):
    app = build_app(tools, port=8765, token=TOKEN, allowed_hosts=("Vault.Example", "proxy.lan:9000", "[fe80::1]"))
    with TestClient(app, base_url=BASE) as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        for host in ("vault.example:8765", "VAULT.example", "proxy.lan:9000", "[fe80::1]:8765", "127.0.0.1:8765"):
            assert c.get("/status", headers={"Host": host}).status_code == 200, host
        for host in ("proxy.lan:8765", "vault.example:1", "evil.example:8765", "vault.example.evil:8765"):
            assert _error(c.get("/status", headers={"Host": host})) == (421, "host_not_allowed"), host
        own = {"Host": "vault.example", "Origin": "https://vault.example"}
        assert c.get("/status", headers=own).status_code == 200
        other = {"Host": "vault.example", "Origin": "https://evil.example"}
        assert _error(c.get("/status", headers=other)) == (403, "origin_not_allowed")
        assert _error(c.get("/status", headers={"Host": "vault.example", "Authorization": ""})) == (401, "unauthorized")


@pytest.mark.parametrize("args", [("--host", "0.0.0.0"), ("--allow-host", "vault.example")])
def test_a_server_other_machines_can_reach_refuses_to_start_without_a_token(vault, args):
    done = serve_refused(vault, *args)
    assert done.returncode == 2 and "[token_required]" in done.stderr and "Traceback" not in done.stderr
    assert "--token-file" in done.stderr  # the hint says what to do


@pytest.mark.parametrize("name", ["http://vault.example/", "*.example", "vault example", ""])
def test_an_allowed_host_that_is_not_a_host_name_is_refused(vault, name):
    done = serve_refused(vault, "--allow-host", name, env={"VAULTSEARCH_TOKEN": TOKEN})
    assert done.returncode == 2 and "[invalid_argument]" in done.stderr and "Traceback" not in done.stderr


def test_a_real_server_with_allow_host_serves_that_name_with_the_token(vault):
    srv = HttpServer([str(vault), "--allow-host", "vault.example"], env={"VAULTSEARCH_TOKEN": TOKEN})
    try:
        assert "also Host vault.example" in "".join(srv.lines)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        named = httpx.get(srv.base + "/status", headers={**auth, "Host": f"vault.example:{srv.port}"})
        assert named.status_code == 200 and named.json()["coverage"]["indexed_notes"] == 3
        assert httpx.get(srv.base + "/status", headers={"Host": f"vault.example:{srv.port}"}).status_code == 401
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:  # not HTTP at all: uvicorn's 400
            raw.sendall(b"NOT HTTP\x00\r\n\r\n")
            answer = b"".join(iter(lambda: raw.recv(65536), b"")).decode("latin-1")  # until it closes
        assert answer.startswith("HTTP/1.1 400") and "application/json" in answer and '"bad_request"' in answer
    finally:
        srv.close()


def test_the_openapi_schemas_are_strict_clean(client):
    from tests.serve.test_mcp_schemas import strict_problems

    spec = client.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for code, response in op["responses"].items():
                schema = response["content"]["application/json"]["schema"]
                assert list(strict_problems(schema)) == [], (path, method, code)
