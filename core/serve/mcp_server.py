"""``vaultsearch mcp VAULT``: the tools of :mod:`core.serve.tools` over MCP (official SDK v2, stdio).

Each tool is registered with the input schema :mod:`core.serve.schema` derives from the
registry and the filters (not with one inferred from a Python signature), annotated read-only
(``readOnlyHint``, ``openWorldHint=false``). A ``VaultSearchError`` is a tool error
(``isError``) whose text is the JSON ``{"error": {"reason", "message", "hint", "evidence"}}``:
a mode that fails closed says why, never an empty hit list. An unknown tool is the same typed
error (``invalid_argument``), not the SDK's text.

A request holding a lone surrogate (``"\\ud800"``: legal JSON, not Unicode text) is refused by the
SDK's strict parser before any handler sees it, and would get no reply at all. ``run_stdio`` reads
such a line again with the stdlib parser: a ``tools/call`` has its arguments replaced by the names
of those that are not text (``INVALID_TEXT``), which the tool answers with ``invalid_argument``;
any other field is mended to U+FFFD (none of them is data a tool acts on).
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from core.errors import InvalidArgumentError, VaultSearchError
from core.serve.instructions import server_instructions
from core.serve.output_schema import OUTPUT_SCHEMAS
from core.serve.schema import dumps, lone_surrogate
from core.serve.tools import TOOL_SPECS, Tools
from core.serve.version import package_version

SERVER_NAME = "vaultsearch"
INVALID_TEXT = "_arguments_not_text"  # set by the stdio guard only: the arguments that held a lone surrogate


def _placeholder() -> None:
    """Stands in for the SDK's signature metadata: the arguments reach ``Tools.call`` unparsed."""


class VaultTool(Tool):
    """An MCP tool whose arguments go to :meth:`Tools.call` as the client sent them."""

    tools: Any = None  # the process's Tools
    output: dict[str, Any] | None = None

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return self.output

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        return call_result(self.tools, self.name, arguments)


def call_result(tools: Tools, name: str, arguments: dict[str, Any] | None) -> CallToolResult:
    """One tool call as an MCP result: structured content on success, a typed error otherwise."""
    try:
        if arguments and INVALID_TEXT in arguments:
            names = ", ".join(map(str, arguments[INVALID_TEXT]))
            raise InvalidArgumentError(
                f"{name}: argument(s) {names} hold a lone surrogate: not Unicode text", argument=names
            )
        out = tools.call(name, arguments or {})
    except VaultSearchError as exc:
        return CallToolResult(content=[TextContent(type="text", text=dumps({"error": exc.to_dict()}))], is_error=True)
    return CallToolResult(content=[TextContent(type="text", text=dumps(out))], structured_content=out)


class VaultServer(MCPServer):
    """The SDK's server, but a call of an unknown tool is answered by ``Tools`` (typed), not by the SDK."""

    vault_tools: Tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self._tool_manager.get_tool(name) is None:
            return call_result(self.vault_tools, name, arguments)
        return await super().call_tool(name, arguments, context)


def build_server(tools: Tools, *, instructions: str | None = None) -> MCPServer:
    """An MCPServer exposing every tool of TOOL_SPECS over ``tools``, named ``vaultsearch`` with the
    installed package's version; ``instructions`` default to the index's state now
    (:func:`core.serve.instructions.server_instructions`)."""
    registered: list[Tool] = []
    meta = func_metadata(_placeholder)
    for spec in TOOL_SPECS.values():
        registered.append(
            VaultTool(
                fn=_placeholder,
                name=spec.name,
                title=spec.title,
                description=spec.description,
                parameters=spec.input_schema,
                fn_metadata=meta,
                is_async=False,
                context_kwarg=None,
                annotations=ToolAnnotations(
                    title=spec.title,
                    read_only_hint=True,
                    destructive_hint=False,
                    idempotent_hint=True,
                    open_world_hint=False,
                ),
                tools=tools,
                output=OUTPUT_SCHEMAS[spec.name],
            )
        )
    if instructions is None:
        instructions = server_instructions(tools)
    server = VaultServer(
        SERVER_NAME, instructions=instructions, version=package_version(), tools=registered, log_level="WARNING"
    )
    server.vault_tools = tools
    return server


def mend_message(item: Any) -> Any:
    """A line the SDK could not parse because it holds a lone surrogate, parsed again (see the module
    docstring); anything else is returned as it came."""
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    if not isinstance(item, ValidationError):
        return item
    raw = next((e.get("input") for e in item.errors() if e.get("type") == "json_invalid"), None)
    try:
        message = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return item
    if not isinstance(message, dict) or not lone_surrogate(message):
        return item
    params = message.get("params")
    if message.get("method") == "tools/call" and isinstance(params, dict) and isinstance(params.get("arguments"), dict):
        bad = sorted(_mend_text(str(k)) for k, v in params["arguments"].items() if lone_surrogate([k, v]))
        params["arguments"] = {INVALID_TEXT: bad}
    mended = _mend_text(message)
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_python(mended, by_name=False))
    except ValidationError as exc:
        return exc


def _mend_text(value: Any) -> Any:
    """Every lone surrogate in the strings of a JSON value replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if lone_surrogate(value) else value
    if isinstance(value, list):
        return [_mend_text(v) for v in value]
    if isinstance(value, dict):
        return {_mend_text(k): _mend_text(v) for k, v in value.items()}
    return value


class _MendedStream:
    """The SDK's stdio read stream, each item through :func:`mend_message`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:  # last_context and the rest: the inner stream's
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        return mend_message(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _MendedStream:
        return self

    async def __anext__(self) -> Any:
        return mend_message(await self._inner.__anext__())

    async def __aenter__(self) -> _MendedStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


async def _serve_stdio(server: MCPServer) -> None:
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        await low.run(_MendedStream(read_stream), write_stream, low.create_initialization_options())


def run_stdio(tools: Tools, *, instructions: str | None = None) -> None:
    """Serve over stdin/stdout until the client closes the stream."""
    import anyio

    anyio.run(_serve_stdio, build_server(tools, instructions=instructions))
