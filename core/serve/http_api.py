"""``vaultsearch serve VAULT``: the same read-only tools as a JSON API (Starlette + uvicorn).

``POST /search`` (and ``/read_note``, ``/related``) with a JSON object body; ``GET`` or ``POST``
``/status`` and ``/modes``; the OpenAPI description at ``GET /openapi.json``, generated from the
tools' schemas; and the same tools over MCP's streamable HTTP transport (the SDK's, stateless)
at ``/mcp/``. Bound to loopback by default. Every request is checked before it reaches a tool:

- ``Host`` must name the address the server listens on (DNS rebinding): otherwise 421;
- an ``Origin`` header, when present, must be that same loopback origin: otherwise 403;
- with a bearer token configured, ``Authorization: Bearer <token>`` is required: otherwise 401
  (except for the search page's static files at ``/`` and ``/page/``, which hold no vault data
  and which a browser fetches without headers of its own: ``core.serve.page``);
- every request within ``schema.REQUEST_BOUNDS``: a body over ``max_body_bytes`` is refused from its
  Content-Length or while it streams (413, before any of it reaches a tool), a body that does not
  arrive within ``body_seconds`` is 408, headers that do not arrive within ``header_seconds`` of
  the connection (or of the previous response) close the connection, and a JSON body nested
  deeper than ``max_json_depth`` is 400 ``invalid_argument``.

A tool error is ``{"error": {"reason", "message", "hint", "evidence"}}`` with a status from the
error's class (400 bad arguments, 404 no such note, 422 a mode that fails closed, 503 index
missing or failing verification).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from core.errors import (
    CapabilityError,
    IndexMissingError,
    IntegrityError,
    InvalidArgumentError,
    NoteNotFoundError,
    SectionNotFoundError,
    UsageError,
    VaultSearchError,
)
from core.serve.output_schema import OUTPUT_SCHEMAS
from core.serve.page import PUBLIC_PATHS, page_routes
from core.serve.schema import REQUEST_BOUNDS, RequestBounds, dumps, json_depth
from core.serve.tools import TOOL_SPECS, Tools

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
LOOPBACK_BINDS = ("127.0.0.1", "::1", "localhost")
_HOST_NAME = re.compile(
    r"(?:[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::\d{1,5})?"
)


def allowed_host(name: str) -> str:
    """``--allow-host NAME``: a host name or address, with an optional port (``vault.lan``,
    ``vault.lan:8443``, ``192.168.1.5``, ``[fe80::1]``), lower-cased; anything else (a scheme, a path,
    a wildcard, spaces) is ``invalid_argument``."""
    norm = name.strip().lower().rstrip(".")
    if not _HOST_NAME.fullmatch(norm):
        raise InvalidArgumentError(
            f"--allow-host {name!r} is not a host name or address (optionally with :port)", argument="allow_host"
        )
    return norm


def _host_forms(names: tuple[str, ...], port: int) -> tuple[frozenset[str], frozenset[str]]:
    """(the Host values, the Origins) the guard accepts for the loopback names and the bind address."""
    hosts = {f"{h}:{port}" for h in names}
    return frozenset(hosts), frozenset(f"http://{h}" for h in hosts)


def _allowed_forms(names: tuple[str, ...], port: int) -> tuple[set[str], set[str]]:
    """The same for the ``--allow-host`` names: each at ``port`` and, without a port of its own, also as
    given (a client on the scheme's default port, e.g. through a proxy); Origins over http and https."""
    hosts = set()
    for name in names:
        has_port = re.search(r":\d+$", name) is not None and not name.endswith("]")
        hosts |= {name} if has_port else {name, f"{name}:{port}"}
    return hosts, {f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")}


_STATUS: tuple[tuple[type[VaultSearchError], int], ...] = (
    (NoteNotFoundError, 404),
    (SectionNotFoundError, 404),
    (UsageError, 400),
    (CapabilityError, 422),
    (IndexMissingError, 503),
    (IntegrityError, 503),
)
_GET_TOOLS = ("status", "modes")


def status_code(exc: VaultSearchError) -> int:
    return next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)


class _JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content).encode("utf-8")


class _Refused(Exception):
    """A request refused before it reaches the app: (status, reason, message)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class _Disconnected(Exception):
    """The client went away while its body was read: nothing to answer."""


async def read_body(receive: Receive, bounds: RequestBounds) -> bytes:
    """The whole request body, or ``_Refused``: 413 past ``max_body_bytes``, 408 past ``body_seconds``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + bounds.body_seconds
    body = bytearray()
    while True:
        try:
            message = await asyncio.wait_for(receive(), max(0.0, end - loop.time()))
        except TimeoutError:
            raise _Refused(
                408, "request_timeout", f"the request body did not arrive within {bounds.body_seconds:g} s"
            ) from None
        if message["type"] == "http.disconnect":
            raise _Disconnected
        body += message.get("body", b"")
        if len(body) > bounds.max_body_bytes:
            raise _Refused(413, "request_too_large", f"the request body is over {bounds.max_body_bytes} bytes")
        if not message.get("more_body", False):
            return bytes(body)


class GuardMiddleware:
    """Host (421), Origin (403), bearer token (401) and request bound (413, 408) checks for every HTTP
    request; the body is read here, within the bounds, and replayed to the app."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: frozenset[str],
        origins: frozenset[str],
        token: str | None,
        bounds: RequestBounds = REQUEST_BOUNDS,
    ) -> None:
        self.app, self.hosts, self.origins, self.token, self.bounds = app, hosts, origins, token, bounds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        public = scope["method"] in ("GET", "HEAD") and scope["path"] in PUBLIC_PATHS
        try:
            problem = self._check(headers, public)
            if problem is not None:
                raise _Refused(*problem)
            body = await read_body(receive, self.bounds)
        except _Refused as exc:
            extra = {"www-authenticate": "Bearer"} if exc.code == 401 else {}
            if exc.code in (408, 413):
                extra["connection"] = "close"  # what is left of the body is never read
            await _JSON(
                {"error": {"reason": exc.reason, "message": exc.message}}, status_code=exc.code, headers=extra or None
            )(scope, receive, send)
            return
        except _Disconnected:
            return
        await self.app(scope, _replay(body, receive), send)

    def _check(self, headers: dict[str, str], public: bool = False) -> tuple[int, str, str] | None:
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.bounds.max_body_bytes):
            return 413, "request_too_large", f"the request body is over {self.bounds.max_body_bytes} bytes"
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            return 421, "host_not_allowed", f"Host {host!r} is not this server's address"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            return 403, "origin_not_allowed", f"Origin {origin!r} may not call this server"
        if self.token is not None and not public:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode("utf-8"), f"Bearer {self.token}".encode()):
                return 401, "unauthorized", "a bearer token is required (Authorization: Bearer <token>)"
        return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read by the guard once, then the connection's own messages."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def openapi(port: int) -> dict[str, Any]:
    """The OpenAPI 3.1 description, from the same schemas the MCP server lists."""
    error = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["reason", "message"],
                "properties": {
                    "reason": {"type": "string", "description": "stable, machine-readable"},
                    "message": {"type": "string", "description": "for a person"},
                },
            }
        },
    }
    paths: dict[str, Any] = {}
    for spec in TOOL_SPECS.values():
        op = {
            "operationId": spec.name,
            "summary": spec.title,
            "description": spec.description,
            "requestBody": {
                "required": spec.name not in _GET_TOOLS,
                "content": {"application/json": {"schema": spec.input_schema}},
            },
            "responses": {
                "200": {"description": "ok", "content": {"application/json": {"schema": OUTPUT_SCHEMAS[spec.name]}}},
                "default": {"description": "a typed error", "content": {"application/json": {"schema": error}}},
            },
        }
        paths[f"/{spec.name}"] = {"post": op}
        if spec.name in _GET_TOOLS:
            paths[f"/{spec.name}"]["get"] = {k: v for k, v in op.items() if k != "requestBody"} | {
                "operationId": f"{spec.name}_get"
            }
    return {
        "openapi": "3.1.0",
        "info": {"title": "vaultsearch", "version": "1", "description": "Read-only search over a Markdown vault."},
        "servers": [{"url": f"http://127.0.0.1:{port}"}],
        "paths": paths,
    }


def _mcp_mount(tools: Tools) -> tuple[Mount, Any]:
    """The SDK's streamable HTTP transport of the same MCP tools, mounted at ``/mcp/`` (stateless,
    JSON responses), and the lifespan that runs its session manager. Host, Origin and token are
    checked by the guard around the whole app, so the SDK's own check is off here."""
    from mcp.server.transport_security import TransportSecuritySettings

    from core.serve.mcp_server import build_server

    server = build_server(tools)
    app = server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        max_request_body_size=REQUEST_BOUNDS.max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return Mount("/mcp", app=app), lifespan


_HTTP_REASONS = {404: "no_such_endpoint", 405: "method_not_allowed"}


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (no route, a method the route does not take) in the JSON error
    format of every other answer; a 405 keeps its ``Allow`` header."""
    code = getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", "") or ""
    message = f"{request.method} {request.url.path}: {detail}".strip(": ")
    return _JSON(
        {"error": {"reason": _HTTP_REASONS.get(code, "http_error"), "message": message}},
        status_code=code,
        headers=getattr(exc, "headers", None),
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    """An exception no handler expected: a JSON 500 naming its type (never a traceback or plain text);
    Starlette then raises it again, so the server logs it."""
    message = f"{request.method} {request.url.path}: internal error ({type(exc).__name__})"
    return _JSON({"error": {"reason": "internal_error", "message": message}}, status_code=500)


def build_app(
    tools: Tools,
    *,
    port: int,
    token: str | None = None,
    extra_hosts: tuple[str, ...] = (),
    allowed_hosts: tuple[str, ...] = (),
    bounds: RequestBounds = REQUEST_BOUNDS,
) -> ASGIApp:
    """The Starlette app (JSON tools, OpenAPI, MCP at ``/mcp/``) in the Host/Origin/token guard for ``port``;
    ``allowed_hosts``: the ``--allow-host`` names (see :func:`allowed_host`)."""

    async def call(request: Request) -> Response:
        name = request.url.path.strip("/")
        arguments: Any = {}
        if request.method == "POST":
            body = await request.body()
            if body.strip():
                try:
                    arguments = json.loads(body)
                    depth = json_depth(arguments)
                except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
                    depth = None
                if depth is None or depth > bounds.max_json_depth:
                    err = InvalidArgumentError(
                        f"the request body is not JSON nested at most {bounds.max_json_depth} deep"
                    )
                    return _JSON({"error": err.to_dict()}, status_code=400)
        try:
            out = await run_in_threadpool(tools.call, name, arguments)
        except VaultSearchError as exc:
            return _JSON({"error": exc.to_dict()}, status_code=status_code(exc))
        return _JSON(out)

    description = openapi(port)

    async def spec(request: Request) -> Response:
        return _JSON(description)

    routes = [
        Route(f"/{name}", call, methods=["POST", *(["GET"] if name in _GET_TOOLS else [])]) for name in TOOL_SPECS
    ]
    routes.append(Route("/openapi.json", spec, methods=["GET"]))
    routes += page_routes()
    mount, lifespan = _mcp_mount(tools)
    hosts, origins = _host_forms(tuple(h.lower() for h in (*LOOPBACK_NAMES, *extra_hosts)), port)
    more_hosts, more_origins = _allowed_forms(tuple(allowed_host(h) for h in allowed_hosts), port)
    return GuardMiddleware(
        Starlette(
            routes=[*routes, mount],
            lifespan=lifespan,
            exception_handlers={404: _http_error, 405: _http_error, 500: _internal_error},
        ),
        hosts=hosts | more_hosts,
        origins=origins | more_origins,
        token=token,
        bounds=bounds,
    )


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port).

    Created with proto ``IPPROTO_TCP``, not 0: asyncio sets ``TCP_NODELAY`` only on such
    sockets, and without it a keep-alive client waits ~40 ms (Nagle + delayed ACK) for every
    response body.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()  # a browser that `vaultsearch open` starts before uvicorn runs waits in the backlog
    return sock


def serve(
    tools: Tools,
    *,
    host: str,
    port: int,
    token: str | None,
    on_listen: Any = None,
    bounds: RequestBounds = REQUEST_BOUNDS,
    allowed_hosts: tuple[str, ...] = (),
) -> None:
    """Bind ``host:port`` (0: a free port), report it through ``on_listen(port)``, serve until stopped."""
    sock = bind_socket(host, port)
    server = make_server(tools, sock, host=host, token=token, bounds=bounds, allowed_hosts=allowed_hosts)
    if on_listen is not None:
        on_listen(sock.getsockname()[1])
    server.run(sockets=[sock])


def make_server(
    tools: Tools,
    sock: socket.socket,
    *,
    host: str,
    token: str | None,
    bounds: RequestBounds,
    allowed_hosts: tuple[str, ...] = (),
) -> Any:
    """The uvicorn server of the app for a bound socket, every request within ``bounds``."""
    import uvicorn

    extra = () if host in LOOPBACK_BINDS else (f"[{host}]" if ":" in host else host,)
    port = sock.getsockname()[1]
    app = build_app(tools, port=port, token=token, extra_hosts=extra, allowed_hosts=allowed_hosts, bounds=bounds)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=bounded_protocol(bounds),
        h11_max_incomplete_event_size=bounds.max_header_bytes,
        timeout_keep_alive=bounds.keep_alive_seconds,
    )
    return uvicorn.Server(config)


def send_json_400(protocol: Any, msg: str) -> None:
    """uvicorn's answer to a request h11 cannot parse, in the JSON error format (uvicorn's own is
    plain text): ``bad_request``, then the connection is closed."""
    import h11

    body = dumps({"error": {"reason": "bad_request", "message": f"invalid HTTP request: {msg}"}}).encode("utf-8")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    for event in (
        h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
        h11.Data(data=body),
        h11.EndOfMessage(),
    ):
        protocol.transport.write(protocol.conn.send(event))
    protocol.transport.close()


def bounded_protocol(bounds: RequestBounds) -> type:
    """uvicorn's h11 protocol with a header deadline: a connection whose request headers are not complete
    ``header_seconds`` after it opened (or after the previous response) is closed. uvicorn has none of
    its own: its keep-alive timer stops at the first byte of a request."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def send_400_response(self, msg: str) -> None:
            send_json_400(self, msg)

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(bounds.header_seconds, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return BoundedH11Protocol
