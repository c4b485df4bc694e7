"""An MCP server's tool offered to the model as ``mcp__SERVER__TOOL``.

Calls go through approvals like any tool (rules such as ``mcp__github__*`` under allow,
ask or deny); its ``access`` is ``write`` because a server acts outside the sandbox (asked
in ``ask`` mode, refused in ``read-only``). Results are outside text: the history marks
them as untrusted data (``history.mark_untrusted``).
"""

from __future__ import annotations

import re
from typing import Any

from ..core.conversation import ToolSpec
from .server import McpManager, McpServer, ToolInfo

__all__ = ["PREFIX", "McpTool", "mcp_tools", "tool_name"]

PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64  # providers accept tool names of 1-64 characters of [A-Za-z0-9_-]


def tool_name(server: str, tool: str) -> str | None:
    """``mcp__SERVER__TOOL`` with unsafe characters replaced by ``_``; ``None`` when too long."""
    name = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"
    return name if len(name) <= MAX_NAME else None


class McpTool:
    """One tool of an MCP server, with the server's description and input schema."""

    access = "write"

    def __init__(self, server_name: str, info: ToolInfo, name: str, server: McpServer | None = None) -> None:
        self.server = server  # None: a tool rebuilt for replay, never run
        self.remote_name = info.name
        self.name = name
        schema = info.input_schema if isinstance(info.input_schema, dict) else {}
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        description = f"[MCP server {server_name}] {info.description}".strip()
        self.spec = ToolSpec(name=name, description=description[:2000], input_schema=schema)

    def paths(self, input: dict[str, Any]) -> list[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: Any) -> Any:
        from ..tools.base import ToolOutput

        if self.server is None:
            return ToolOutput(content="this MCP tool is not connected", is_error=True)
        text, is_error = await self.server.call(self.remote_name, dict(input))
        return ToolOutput(content=text, is_error=is_error)


def mcp_tools(manager: McpManager) -> tuple[list[McpTool], list[str]]:
    """The ``McpTool`` of every listed tool of every server of ``manager``, and one line per
    tool left out (a name over 64 characters, or a name clash)."""
    out: list[McpTool] = []
    problems: list[str] = []
    seen: set[str] = set()
    for server in manager.servers.values():
        for info in server.tools:
            name = tool_name(server.spec.name, info.name)
            if name is None or name in seen:
                problems.append(f"MCP tool {info.name!r} of {server.spec.name} left out: its name is too long or clashes")
                continue
            seen.add(name)
            out.append(McpTool(server.spec.name, info, name, server))
    return out, problems
