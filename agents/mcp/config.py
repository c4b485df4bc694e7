"""MCP server configuration: the person's ``[mcp_servers.NAME]`` and a project's ``.mcp.json``.

The person's ``config.toml``::

    [mcp_servers.github]                    # stdio: a command musec starts
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
    tool_timeout_s = 120                    # default 120
    startup_timeout_s = 30                  # default 30

    [mcp_servers.docs]                      # streamable HTTP
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

A project's ``.mcp.json`` (the format other agents share; it applies only in a trusted
workspace): ``{"mcpServers": {"NAME": {"command", "args", "env", "cwd"} | {"type": "http",
"url", "headers"}}}``.

``${VAR}`` in ``command``, ``args``, ``env``, ``url`` and ``headers`` is replaced, per
session, by the variable of the *client's* environment (a daemon started by systemd has
none of the person's secrets); the expanded values are held in memory only and the log
keeps the templates. A missing variable keeps that server from starting, with a message
naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError

__all__ = ["McpConfigError", "ServerSpec", "expand", "load_project_servers", "parse_servers"]

SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYS = {"command", "args", "env", "cwd", "url", "headers", "type", "tool_timeout_s", "startup_timeout_s", "enabled"}


class McpConfigError(ConfigError):
    """An MCP server entry is malformed; the message names the file and the server."""


@dataclass(frozen=True)
class ServerSpec:
    """One MCP server as configured (templates not expanded).

    Attributes:
        name: the ``SERVER`` of ``mcp__SERVER__TOOL``.
        transport: ``stdio`` or ``http`` (streamable HTTP).
        command, args, env, cwd: how a stdio server is started (``cwd`` relative to the
            workspace; default the workspace).
        url, headers: where an HTTP server is.
        source: ``user`` or ``project``; origin: the file.
        tool_timeout_s: a call's deadline; startup_timeout_s: the start's deadline.
    """

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    source: str = "user"
    origin: str = ""
    tool_timeout_s: float = 120.0
    startup_timeout_s: float = 30.0

    def describe(self) -> str:
        """One line, with templates, never values."""
        if self.transport == "http":
            return f"{self.name} (http {self.url}, {self.source})"
        return f"{self.name} (stdio {' '.join([self.command, *self.args])}, {self.source})"


def _str_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f'{where} must be a table of strings, like {{ NAME = "value" }}')
    return dict(value)


def _number(value: object, default: float, where: str) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise McpConfigError(f"{where} must be a number of seconds in (0, 3600]")
    return float(value)


def _spec(name: str, entry: object, *, source: str, origin: str) -> ServerSpec | None:
    where = f"{origin}: mcp server {name!r}"
    if not SERVER_NAME.fullmatch(name) or "__" in name:
        raise McpConfigError(f"{where}: a server name is up to 32 letters, digits, - and _ (no '__')")
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where} must be a table with `command` or `url`")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise McpConfigError(f"{where} has unknown key {unknown[0]!r}; use {', '.join(sorted(_KEYS))}")
    if entry.get("enabled", True) is False:
        return None
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise McpConfigError(f"{where} needs exactly one of `command` (stdio) or `url` (streamable HTTP)")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f'{where}: args must be a list of strings, like ["-y", "pkg"]')
    for key, value in (("command", command), ("url", url), ("cwd", entry.get("cwd"))):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise McpConfigError(f"{where}: {key} must be a non-empty string")
    if url is not None and not re.match(r"https?://", url):
        raise McpConfigError(f"{where}: url must start with http:// or https://")
    return ServerSpec(
        name=name, transport="stdio" if command else "http", command=command or "", args=tuple(args),
        env=_str_map(entry.get("env"), f"{where}: env"), cwd=entry.get("cwd") or "", url=url or "",
        headers=_str_map(entry.get("headers"), f"{where}: headers"), source=source, origin=origin,
        tool_timeout_s=_number(entry.get("tool_timeout_s"), 120.0, f"{where}: tool_timeout_s"),
        startup_timeout_s=_number(entry.get("startup_timeout_s"), 30.0, f"{where}: startup_timeout_s"),
    )


def parse_servers(table: object, *, source: str, origin: str) -> list[ServerSpec]:
    """The servers of an ``mcp_servers`` table (TOML) or ``mcpServers`` object (JSON).

    Raises:
        McpConfigError: see the module docstring for the accepted shape.
    """
    if table is None:
        return []
    if not isinstance(table, dict):
        raise McpConfigError(f"{origin}: mcp servers must be a table of servers, like [mcp_servers.NAME]")
    out = [_spec(name, entry, source=source, origin=origin) for name, entry in table.items()]
    return [s for s in out if s is not None]


def load_project_servers(workspace: Path) -> list[ServerSpec]:
    """The servers of ``workspace/.mcp.json`` (``[]`` when there is none). Call it only for a
    trusted workspace.

    Raises:
        McpConfigError: the file is unreadable, not JSON, or malformed.
    """
    path = workspace / ".mcp.json"
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise McpConfigError(f"{path} cannot be read as JSON ({exc}); fix it or move it away") from exc
    if not isinstance(data, dict):
        raise McpConfigError(f'{path} must be a JSON object like {{"mcpServers": {{...}}}}')
    return parse_servers(data.get("mcpServers", {}), source="project", origin=str(path))


def expand(text: str, environment: Mapping[str, str]) -> str:
    """``text`` with each ``${VAR}`` replaced from ``environment``.

    Raises:
        KeyError: a variable is not set (its name is the message).
    """
    def one(m: re.Match[str]) -> str:
        if m.group(1) not in environment:
            raise KeyError(m.group(1))
        return environment[m.group(1)]

    return _VAR.sub(one, text)


def expanded(spec: ServerSpec, environment: Mapping[str, str]) -> dict[str, Any]:
    """The spec's command/args/env/url/headers with ``${VAR}`` expanded.

    Raises:
        KeyError: a variable is not set.
    """
    return {
        "command": expand(spec.command, environment), "args": [expand(a, environment) for a in spec.args],
        "env": {k: expand(v, environment) for k, v in spec.env.items()}, "url": expand(spec.url, environment),
        "headers": {k: expand(v, environment) for k, v in spec.headers.items()},
    }
