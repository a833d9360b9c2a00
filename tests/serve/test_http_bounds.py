"""Issue 28 case 9 (HTTP part): one bound on every request, ``schema.REQUEST_BOUNDS``.

A body over ``max_body_bytes`` is 413 from its Content-Length or while it streams (chunked) and
never reaches a tool; a JSON body nested 100,000 deep is a 400 ``invalid_argument``, as is a lone
surrogate; a half-sent body gets 408 and headers that never complete lose the connection (a
server with short bounds, run in this process, so the test does not wait the real deadlines).
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.build.builder import build_index
from core.serve.tools import ServeConfig, Tools
from tests.serve.serve_helpers import HttpServer, make_serve_vault, wait_until

MAX_BODY = 1 << 20  # schema.REQUEST_BOUNDS.max_body_bytes
DEADLINE = 30.0  # a guard against a hang, not a speed assertion


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("bounds")
    root = make_serve_vault(base / "vault", base / "outside")
    build_index(root)
    return root


@pytest.fixture(scope="module")
def server(vault: Path) -> Iterator[HttpServer]:
    srv = HttpServer([str(vault)])
    yield srv
    srv.close()


def _error(response: httpx.Response) -> dict[str, Any]:
    return dict(response.json()["error"])


def test_a_body_over_the_bound_is_413_from_its_content_length(server: HttpServer) -> None:
    body = b'{"query": "' + b"a" * (MAX_BODY + 1) + b'"}'
    got = httpx.post(server.base + "/search", content=body, timeout=DEADLINE)
    assert got.status_code == 413 and _error(got)["reason"] == "request_too_large"


def test_a_streamed_body_over_the_bound_is_413_while_it_streams(server: HttpServer) -> None:
    sent = [0]

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked, 64 KiB at a time, up to 100 MB
        block = b"a" * 65536
        while sent[0] < 100_000_000:
            sent[0] += len(block)
            yield block

    try:
        got = httpx.post(server.base + "/search", content=chunks(), timeout=DEADLINE)
    except httpx.TransportError:  # the server answered and closed while the client still wrote
        got = None
    if got is not None:
        assert got.status_code == 413 and _error(got)["reason"] == "request_too_large"
    assert sent[0] < 100_000_000  # refused early: the 100 MB were never all sent
    assert httpx.post(server.base + "/search", json={"query": "lighthouse", "mode": "fts"}).status_code == 200


def test_a_json_body_nested_100k_deep_is_a_typed_400(server: HttpServer) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    got = httpx.post(server.base + "/search", content=body, timeout=DEADLINE)
    assert got.status_code == 400 and _error(got)["reason"] == "invalid_argument"
    deep = {"query": "x", "tags_any": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}
    got = httpx.post(server.base + "/search", json=deep, timeout=DEADLINE)
    assert got.status_code == 400 and _error(got)["reason"] == "invalid_argument"


def test_a_lone_surrogate_over_http_is_a_typed_400(server: HttpServer) -> None:
    got = httpx.post(server.base + "/search", content=b'{"query": "a\\ud800"}', timeout=DEADLINE)
    assert got.status_code == 400 and _error(got)["reason"] == "invalid_argument"


@pytest.fixture(scope="module")
def short_server(vault: Path) -> Iterator[int]:
    """The app in this process with half-second header and body deadlines."""
    from core.serve.schema import REQUEST_BOUNDS

    short = dataclasses.replace(REQUEST_BOUNDS, header_seconds=0.5, body_seconds=0.5)
    from core.serve.http_api import bind_socket, make_server

    sock = bind_socket("127.0.0.1", 0)
    server = make_server(Tools(ServeConfig(vault)), sock, host="127.0.0.1", token=None, bounds=short)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, what="the in-process server")
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(DEADLINE)


def _read_all(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (bounded by DEADLINE)."""
    conn.settimeout(DEADLINE)
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def test_a_half_sent_body_gets_408_and_the_connection_closed(short_server: int) -> None:
    with socket.create_connection(("127.0.0.1", short_server)) as conn:
        conn.sendall(
            f"POST /search HTTP/1.1\r\nHost: 127.0.0.1:{short_server}\r\nContent-Type: application/json\r\n"
            'Content-Length: 100\r\n\r\n{"query":'.encode()
        )
        reply = _read_all(conn)
    assert reply.startswith(b"HTTP/1.1 408") and b"request_timeout" in reply


@pytest.mark.parametrize("sent", [b"", b"POST /search HTTP/1.1\r\nHost: 127.0.0.1"])
def test_headers_that_never_complete_lose_the_connection(short_server: int, sent: bytes) -> None:
    with socket.create_connection(("127.0.0.1", short_server)) as conn:
        conn.sendall(sent)
        assert _read_all(conn) == b""  # closed by the server, nothing answered (today: open forever)
