"""``vaultsearch serve`` as a subprocess on 127.0.0.1 and a free port, driven with httpx.

One server for the module, started with a bearer token (env VAULTSEARCH_TOKEN) and
``--freshness-window 0``. Tests that change the vault restore a consistent state before they end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.build.builder import build_index
from core.registry import MODE_NAMES
from tests.serve.serve_helpers import HIDDEN_WORD, HttpServer, make_serve_vault

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("http")
    root = make_serve_vault(base / "vault", base / "outside")
    build_index(root)
    return root


@pytest.fixture(scope="module")
def server(vault: Path) -> Iterator[HttpServer]:
    srv = HttpServer([str(vault), "--freshness-window", "0"], env={"VAULTSEARCH_TOKEN": TOKEN})
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def client(server: HttpServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as c:
        yield c


def test_start_up_says_what_is_visible_and_that_a_token_is_required(server):
    text = "".join(server.lines)
    assert "visible classifications: (unclassified), public" in text and "token required" in text


def test_every_tool(client, vault):
    env = client.post("/search", json={"q": "lighthouse lamp", "mode": "fts", "limit": 2}).json()
    assert env["hits"][0]["path"] == "notes/alpha.md" and env["hits"][0]["line_start"] >= 1
    assert env["freshness"]["checked"] is True and env["version"] == "vaultsearch.search/1"
    note = client.post("/read_note", json={"path": "notes/alpha.md", "section": "Usage"}).json()
    assert "Switch the lamp on at dusk." in note["text"] and note["frontmatter"]["tags"] == ["sea", "lamp"]
    related = client.post("/related", json={"path": "notes/beta.md"}).json()
    assert [x["path"] for x in related["links"]] == ["notes/alpha.md"]
    for method in ("get", "post"):
        assert client.request(method.upper(), "/status").json()["coverage"]["indexed_notes"] == 3
        assert [m["name"] for m in client.request(method.upper(), "/modes").json()["modes"]] == list(MODE_NAMES)


def test_openapi_describes_every_tool_with_the_same_schemas(client):
    spec = client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.1") and set(spec["paths"]) == {
        "/search",
        "/read_note",
        "/related",
        "/status",
        "/modes",
    }
    body = spec["paths"]["/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["mode"]["enum"] == list(MODE_NAMES)


@pytest.mark.parametrize(
    ("path", "body", "status", "reason"),
    [
        ("/search", {"q": "x", "colour": "red"}, 400, "invalid_argument"),
        ("/search", {"q": "x", "classifications": "restricted"}, 400, "invalid_argument"),
        ("/search", {"q": "x", "until": "yesterday"}, 400, "invalid_filter"),
        ("/search", {"q": "lighthouse", "mode": "semantic"}, 422, "dense_index_unavailable"),
        ("/search", [1, 2], 400, "invalid_argument"),
        ("/read_note", {"path": "../outside/outside.md"}, 400, "path_outside_vault"),
        ("/read_note", {"path": "/etc/passwd"}, 400, "path_outside_vault"),
        ("/read_note", {"path": "notes/escape.md"}, 400, "path_outside_vault"),
        ("/related", {"path": "notes/../../outside/outside.md"}, 400, "path_outside_vault"),
        ("/read_note", {"path": "private/secret.md"}, 404, "note_not_found"),
        ("/read_note", {"path": "notes/none.md"}, 404, "note_not_found"),
    ],
)
def test_bad_requests_get_a_status_and_a_stable_reason(client, path, body, status, reason):
    r = client.post(path, json=body)
    assert (r.status_code, r.json()["error"]["reason"]) == (status, reason)


def test_a_body_that_is_not_json_is_a_400(client):
    r = client.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    assert (r.status_code, r.json()["error"]["reason"]) == (400, "invalid_argument")


def test_a_hidden_classification_leaves_no_trace(client):
    env = client.post("/search", json={"q": f"{HIDDEN_WORD} lighthouse", "mode": "hybrid", "max_results": 50}).json()
    env.pop("query")  # the caller's own words
    # its hidden word matched nothing the caller may see: said as unmatched, as for a word no note holds
    assert env.pop("unmatched_words") == [HIDDEN_WORD]
    assert HIDDEN_WORD not in json.dumps(env).lower() and "private/" not in json.dumps(env)
    hidden = client.post("/read_note", json={"path": "private/secret.md"}).json()["error"]
    absent = client.post("/read_note", json={"path": "private/nothing.md"}).json()["error"]
    assert {k: v for k, v in hidden.items() if k not in ("message", "evidence")} == {
        k: v for k, v in absent.items() if k not in ("message", "evidence")
    }


def test_a_wrong_origin_is_refused_and_the_own_origin_allowed(client, server):
    assert client.get("/status", headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.get("/status", headers={"Origin": f"http://127.0.0.1:{server.port}"}).status_code == 200
    assert client.get("/status", headers={"Origin": f"http://localhost:{server.port}"}).status_code == 200


def test_a_wrong_host_is_misdirected(client):
    r = client.get("/status", headers={"Host": "attacker.example:80"})
    assert (r.status_code, r.json()["error"]["reason"]) == (421, "host_not_allowed")


def test_the_bearer_token_is_required(server):
    assert httpx.get(server.base + "/status").status_code == 401
    wrong = httpx.get(server.base + "/status", headers={"Authorization": "Bearer nope"})
    assert (wrong.status_code, wrong.json()["error"]["reason"]) == (401, "unauthorized")
    assert wrong.headers["www-authenticate"] == "Bearer"


def test_a_stale_vault_is_labelled_in_every_response_then_a_new_generation_is_served(client, vault):
    gid = client.get("/status").json()["generation_id"]
    alpha = vault / "notes/alpha.md"
    original = alpha.read_text()
    alpha.write_text(original.replace("Switch the lamp on at dusk.", "Switch the lamp on at dawn, zephyr."))
    try:
        every = (
            ("/search", {"q": "lamp", "mode": "fts"}),
            ("/status", None),
            ("/read_note", {"path": "notes/beta.md"}),
            ("/related", {"path": "notes/beta.md"}),
        )
        for path, body in every:
            fresh = client.post(path, json=body).json()["freshness"]
            assert fresh["stale"] is True and fresh["modified"] == 1 and fresh["sample_paths"] == ["notes/alpha.md"]
        assert client.post("/read_note", json={"path": "notes/alpha.md"}).json()["changed_since_index"] is True
        assert client.post("/search", json={"q": "zephyr", "mode": "fts"}).json()["hits"] == []
    finally:
        build_index(vault)
    env = client.post("/search", json={"q": "zephyr", "mode": "fts"}).json()
    assert [h["path"] for h in env["hits"]] == ["notes/alpha.md"] and env["index"]["generation_id"] != gid
    assert env["freshness"]["stale"] is False


def test_accepted_connections_get_tcp_nodelay():
    """Keep-alive clients must not wait on Nagle + delayed ACK (~40 ms a response)."""
    import asyncio
    import socket

    from core.serve.http_api import bind_socket

    async def accept_one() -> int:
        sock = bind_socket("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accept_one()) != 0


def test_the_same_tools_over_the_sdk_streamable_http_transport(server):
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def talk() -> tuple[set[str], dict, dict]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(server.base + "/mcp/", http_client=http)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            ok = await c.call_tool("search", {"q": "lighthouse", "mode": "fts"})
            bad = await c.call_tool("read_note", {"path": "../outside/outside.md"})
            return names, ok.structured_content, json.loads(bad.content[0].text)

    names, env, err = asyncio.run(talk())
    assert names == {"search", "read_note", "related", "status", "modes"}
    assert env["hits"][0]["path"] == "notes/alpha.md" and env["freshness"]["checked"] is True
    assert err["error"]["reason"] == "path_outside_vault"
    assert httpx.post(server.base + "/mcp/", json={}).status_code == 401  # the guard covers /mcp too


def test_an_unknown_path_and_a_wrong_method_answer_in_the_json_error_format(client: httpx.Client) -> None:
    """404 and 405 come back as ``{"error": {"reason", "message"}}`` like every other error (issue 27),
    not as Starlette's plain text; a 405 still says which methods the path takes."""
    missing = client.get("/no-such-endpoint")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/json")
    assert missing.json()["error"]["reason"] == "no_such_endpoint"
    wrong = client.delete("/search")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["reason"] == "method_not_allowed"
    assert "POST" in wrong.headers["allow"]
