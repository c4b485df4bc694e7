"""MCP client: servers from the person's config and a trusted project's ``.mcp.json``,
their tools offered as ``mcp__SERVER__TOOL`` (``config``, ``server``, ``tool``).

Built on the official ``mcp`` Python SDK, imported only when a server starts.
"""

from .config import McpConfigError, ServerSpec, expand, load_project_servers, parse_servers
from .server import McpManager, McpServer, ToolInfo
from .tool import McpTool, mcp_tools, tool_name

__all__ = [
    "McpConfigError",
    "McpManager",
    "McpServer",
    "McpTool",
    "ServerSpec",
    "ToolInfo",
    "expand",
    "load_project_servers",
    "mcp_tools",
    "parse_servers",
    "tool_name",
]
