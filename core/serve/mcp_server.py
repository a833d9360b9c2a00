"""``vaultsearch mcp VAULT``: the tools of :mod:`core.serve.tools` over MCP (official SDK v2, stdio).

Each tool is registered with the input schema :mod:`core.serve.schema` derives from the
registry and the filters (not with one inferred from a Python signature), annotated read-only
(``readOnlyHint``, ``openWorldHint=false``). A ``VaultSearchError`` is a tool error
(``isError``) whose text is the JSON ``{"error": {"reason", "message", "hint", "evidence"}}``:
a mode that fails closed says why, never an empty hit list.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from core.errors import VaultSearchError
from core.serve.schema import OUTPUT_SCHEMAS, dumps
from core.serve.tools import TOOL_SPECS, Tools

SERVER_NAME = "vaultsearch"


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
        out = tools.call(name, arguments or {})
    except VaultSearchError as exc:
        return CallToolResult(content=[TextContent(type="text", text=dumps({"error": exc.to_dict()}))], is_error=True)
    return CallToolResult(content=[TextContent(type="text", text=dumps(out))], structured_content=out)


def build_server(tools: Tools, *, instructions: str | None = None) -> MCPServer:
    """An MCPServer exposing every tool of TOOL_SPECS over ``tools``."""
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
    return MCPServer(SERVER_NAME, instructions=instructions, tools=registered, log_level="WARNING")


def run_stdio(tools: Tools, *, instructions: str | None = None) -> None:
    """Serve over stdin/stdout until the client closes the stream."""
    build_server(tools, instructions=instructions).run("stdio")
