"""MCP servers of a session: started once, supervised, restarted with backoff, stopped with it.

Each ``McpServer`` is one task of the session's task group (``McpManager.run``) holding the
SDK's ``Client`` open; tool calls reach it through a small memory stream and are run as
tasks inside the connection's scope, so a server that dies (a stdio process that exits, an
HTTP server that drops the connection) fails only the calls in flight: they are answered
with an error, and the server is started again after 0.5 s, 1 s, 2 s ... (at most
``max_restarts`` times in a row without a successful start). The SDK (``mcp`` >= 2) is
imported only when a server starts.

A project's stdio server (``.mcp.json`` of a trusted workspace) is a command the repository
supplies, so it runs like a project hook: in the session's sandbox (``bwrap_argv`` with the
session's policy: the workspace writable, the rest of the file system read-only, a private
/tmp, the network as the session's net rules allow), its environment scrubbed of
credentials; where no bubblewrap is found it does not start. Only the person's own servers
(``config.toml``) run unsandboxed, and every server runs unsandboxed when the person chose
``--sandbox off``.

Events (``on_event(event)``; the session logs them): ``McpServerStarted``,
``McpServerRestarting``, ``McpServerFailed`` (``agents.core.events``). Fields never hold an expanded ``${VAR}``; ``secret_values`` lists
those values for the log's redactor in case a server echoes one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..core.events import McpServerFailed, McpServerRestarting, McpServerStarted
from ..tools.base import SandboxPolicy
from .config import ServerSpec, expanded

__all__ = ["McpManager", "McpServer", "ToolInfo"]

OnEvent = Callable[[McpServerStarted | McpServerRestarting | McpServerFailed], object]
CONNECTION_CLOSED = -32000  # the SDK's code for a connection that is gone (mcp_types.CONNECTION_CLOSED)
MAX_RESULT_CHARS = 200_000
INVALID_ANSWER = -32099  # our code for an answer the SDK could not read (stands in for it, so the call ends at once)
STDERR_TAIL = 600  # characters of a failed server's stderr shown with its error
_DEFAULT_SANDBOX = SandboxPolicy()


@dataclass(frozen=True)
class ToolInfo:
    """A server's tool as listed: its name, description and JSON Schema input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(eq=False)
class _Call:
    tool: str
    arguments: dict[str, Any]
    done: anyio.Event = field(default_factory=anyio.Event)
    content: str = ""
    is_error: bool = True
    answered: bool = False


class _Gone(Exception):
    """The connection to the server is gone; the supervisor starts it again."""


class _NotMcp(Exception):
    """The server wrote something on stdout that is not an MCP message before it was up."""


def _answer_id(exc: BaseException) -> Any:
    """The JSON-RPC ``id`` of a line the SDK could not read as a message (a pydantic error
    whose input is the parsed object, e.g. ``"result": null``); ``None`` when it has none."""
    errors = getattr(exc, "errors", None)
    try:
        found = [e.get("input") for e in errors()] if callable(errors) else []
    except Exception:
        return None
    for value in found:
        if isinstance(value, dict) and isinstance(value.get("id"), int | str) and "method" not in value:
            return value["id"]
    return None


def _what_is_wrong(exc: BaseException) -> str:
    """What is wrong with a line the SDK could not read as a JSON-RPC message, in a few words."""
    errors = getattr(exc, "errors", None)
    try:
        found = errors() if callable(errors) else []
    except Exception:
        found = []
    for e in found:
        loc = tuple(e.get("loc", ()))
        if loc[:1] == ("JSONRPCResponse",) and len(loc) > 1:
            return f"{'.'.join(map(str, loc[1:]))}: {e.get('msg', '')} (got {json.dumps(e.get('input'))[:80]})"
        if not loc and isinstance(e.get("input"), str):
            return f"it wrote {e['input'][:100]!r} on stdout, which is not an MCP message"
    if found:
        loc = ".".join(map(str, found[0].get("loc", ())))
        return f"{loc}: {found[0].get('msg', '')}" if loc else str(found[0].get("msg", ""))
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _result_text(result: Any) -> tuple[str, bool]:
    """A ``CallToolResult`` as text for the model, and whether it is an error."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(getattr(block, "resource", None), "text"):
            parts.append(block.resource.text)
        else:
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", None) or ""
            parts.append(f"[{kind} content {mime} omitted]".replace("  ", " "))
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut at {MAX_RESULT_CHARS} characters]"
    return text, bool(getattr(result, "is_error", False))


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking into exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]


class McpServer:
    """One configured server and its supervision.

    Args:
        spec: the configuration.
        workspace: the session's workspace (a stdio server's default working directory).
        environment: the client's environment of this session (``${VAR}`` values).
        on_event: receives the lifecycle events.
        max_restarts: consecutive failed starts before the server is given up.
        backoff_s: the first restart delay; it doubles each time, up to 30 s.
        sandbox: the session's sandbox policy, for a project's stdio server (``mode="off"``:
            unsandboxed, only because the person chose ``--sandbox off``).
        bwrap: the bubblewrap executable (``None``: not available; a project's stdio server
            then does not start).
    """

    def __init__(self, spec: ServerSpec, *, workspace: Path, environment: Mapping[str, str], on_event: OnEvent,
                 max_restarts: int = 5, backoff_s: float = 0.5, sandbox: SandboxPolicy = _DEFAULT_SANDBOX,
                 bwrap: str | None = None) -> None:
        self.spec = spec
        self.sandbox = sandbox
        self.bwrap = bwrap
        self.workspace = workspace
        self._environment = dict(environment)
        self.on_event = on_event
        self.max_restarts = max_restarts
        self.backoff_s = backoff_s
        self.state = "stopped"
        self.error = ""
        self.tools: list[ToolInfo] = []
        self.restarts = 0
        self.ready = anyio.Event()  # set once the first start succeeded or was given up
        self._tx, self._rx = anyio.create_memory_object_stream[_Call](16)
        self._inflight: set[_Call] = set()
        self._errlog: Any = None  # the running attempt's stderr (a temporary file), for its tail
        self._not_mcp = ""  # what the server wrote instead of MCP before it was up

    def secret_values(self) -> list[str]:
        """The expanded ``${VAR}`` values of this server's config (for the log's redactor)."""
        try:
            values = expanded(self.spec, self._environment)
        except KeyError:
            return []
        templated = {self.spec.command: values["command"], self.spec.url: values["url"],
                     **{self.spec.env[k]: v for k, v in values["env"].items()},
                     **{self.spec.headers[k]: v for k, v in values["headers"].items()},
                     **dict(zip(self.spec.args, values["args"], strict=True))}
        return sorted({v for t, v in templated.items() if "${" in t and v})

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the server connected until cancelled or given up."""
        task_status.started()
        try:
            await self._supervise()
        finally:
            self._tx.close()
            self._rx.close()
            if self.state != "failed":
                self.state = "stopped"

    @property
    def sandboxed(self) -> bool:
        """Whether this server runs in the sandbox (a project's stdio server, unless the
        person chose ``--sandbox off``)."""
        return self.spec.source != "user" and self.spec.transport == "stdio" and self.sandbox.mode != "off"

    def _sandboxed_argv(self, params: dict[str, Any], cwd: Path) -> list[str]:
        """``bwrap`` argv running the server's command under the session's policy, in ``cwd``.

        Raises:
            SandboxUnavailable: the policy's read deny rules cannot be applied.
        """
        from ..tools.sandbox import bwrap_argv

        env = {**self._environment, **params["env"]}  # scrubbed of credentials by bwrap_argv
        command = [params["command"], *params["args"]]
        if os.path.realpath(cwd) != os.path.realpath(self.workspace):  # bwrap starts it in the workspace
            command = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', os.path.realpath(cwd), *command]
        return bwrap_argv(self.sandbox, self.workspace, env, command, bwrap=self.bwrap or "bwrap")

    async def _supervise(self) -> None:
        if self.sandboxed and self.bwrap is None:
            self._give_up("a project's MCP server runs in the sandbox, and no bubblewrap was found; install bubblewrap")
            return
        attempt = 0
        while True:
            try:
                params = expanded(self.spec, self._environment)
            except KeyError as exc:
                self._give_up(f"needs ${{{exc.args[0]}}} in your environment (set it where you run musec)")
                return
            self.state = "starting" if self.restarts == 0 and attempt == 0 else "restarting"
            started = False
            self._not_mcp = ""
            with tempfile.TemporaryFile() as errlog:
                self._errlog = errlog
                try:
                    started = await self._connected(params, errlog)
                    error = "the connection closed"
                except FileNotFoundError:
                    error = f"command not found: {params['command']}"
                except Exception as exc:  # any failure of the server is this server's, never the session's
                    error = _describe(exc)
                error = self._not_mcp or error
                tail = self.stderr_tail()
                self._errlog = None
            if tail:
                error += f"; its stderr ends: {tail}"
            self._fail_inflight(error)
            attempt = 1 if started else attempt + 1
            if attempt > self.max_restarts:
                self._give_up(f"{error} (gave up after {self.max_restarts} attempts)" if self.max_restarts else error)
                return
            delay = min(self.backoff_s * 2 ** (attempt - 1), 30.0)
            self.state, self.error = "restarting", error
            self.restarts += 1
            self.on_event(McpServerRestarting(server=self.spec.name, attempt=attempt, delay_s=delay, error=error))
            await anyio.sleep(delay)

    def stderr_tail(self) -> str:
        """The last lines of the running attempt's stderr, on one line, secrets masked ("" when none)."""
        if self._errlog is None:
            return ""
        try:
            fd = self._errlog.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, STDERR_TAIL, max(0, size - STDERR_TAIL))
        except (OSError, ValueError):
            return ""
        text = " | ".join(line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip())
        for secret in self.secret_values():
            text = text.replace(secret, "***")
        return ("…" if size > STDERR_TAIL else "") + text if text else ""

    def _give_up(self, error: str) -> None:
        self.state, self.error = "failed", error
        self._fail_inflight(error)
        self.on_event(McpServerFailed(server=self.spec.name, error=error))
        self.ready.set()

    def _fail_inflight(self, error: str) -> None:
        for call in list(self._inflight):
            call.content = f"the MCP server {self.spec.name} stopped during the call ({error}); it is being restarted"
            call.is_error = True
            call.done.set()
        self._inflight.clear()

    def _target(self, params: dict[str, Any], stack: contextlib.AsyncExitStack) -> Any:
        if self.spec.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers=params["headers"],
                                      timeout=httpx2.Timeout(self.spec.tool_timeout_s, connect=self.spec.startup_timeout_s))
            stack.push_async_callback(http.aclose)
            return streamable_http_client(params["url"], http_client=http)
        from mcp.client.stdio import StdioServerParameters

        cwd = (self.workspace / self.spec.cwd) if self.spec.cwd else self.workspace
        if self.sandboxed:
            argv = self._sandboxed_argv(params, cwd)
            return StdioServerParameters(command=argv[0], args=argv[1:], env={}, cwd=str(self.workspace),
                                         encoding_error_handler="replace")
        # "replace": bytes that are not UTF-8 must not stop the reading of the server's stdout
        return StdioServerParameters(command=params["command"], args=params["args"], env=params["env"], cwd=str(cwd),
                                     encoding_error_handler="replace")

    @contextlib.asynccontextmanager
    async def _checked(self, transport: Any) -> Any:
        """``transport`` with its unreadable lines dealt with at once (the SDK drops them, so a
        call would wait for its whole timeout): an answer to a request becomes an error answer
        to it; anything else before the server is up ends the start (``_not_mcp``)."""
        from mcp.shared.message import SessionMessage
        from mcp.types import ErrorData, JSONRPCError

        async with transport as (read, write):
            tx, rx = anyio.create_memory_object_stream[Any](0)

            async def forward() -> None:
                async with tx:
                    async for item in read:
                        if isinstance(item, Exception):
                            request = _answer_id(item)
                            if request is not None:
                                error = ErrorData(code=INVALID_ANSWER, message=f"an invalid answer: {_what_is_wrong(item)}")
                                item = SessionMessage(JSONRPCError(jsonrpc="2.0", id=request, error=error))
                            elif self.state != "running":
                                self._not_mcp = f"not an MCP server: {_what_is_wrong(item)}"
                                return
                            else:
                                continue
                        await tx.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(forward)
                try:
                    yield rx, write
                finally:
                    tg.cancel_scope.cancel()

    async def _connected(self, params: dict[str, Any], errlog: Any) -> bool:
        """Connect, list the tools, serve calls until the connection is gone.

        Returns:
            Whether it got as far as serving (a start that succeeded).
        """
        from mcp import Client

        async with contextlib.AsyncExitStack() as stack:
            target = self._target(params, stack)
            if self.spec.transport == "stdio":
                from mcp.client.stdio import stdio_client

                # its stderr is kept for its tail on failure, never printed (it may print its secrets)
                target = self._checked(stdio_client(target, errlog=errlog))
            client = await stack.enter_async_context(Client(target, read_timeout_seconds=self.spec.startup_timeout_s))
            tools = await self._list_tools(client)
            if not self.tools:
                self.tools = tools  # the first listing is what the model is offered for the session
            self.state, self.error = "running", ""
            self.on_event(McpServerStarted(
                server=self.spec.name, transport=self.spec.transport, source=self.spec.source,
                restarts=self.restarts,
                tools=[{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools],
            ))
            self.ready.set()
            try:
                async with anyio.create_task_group() as tg:
                    async for call in self._rx:
                        self._inflight.add(call)
                        tg.start_soon(self._do_call, client, call)
            except _Gone:
                pass
            except ExceptionGroup as group:
                rest = group.split(_Gone)[1]
                if rest is not None:
                    raise rest from None
            return True

    async def _list_tools(self, client: Any) -> list[ToolInfo]:
        out: list[ToolInfo] = []
        cursor = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            for t in page.tools:
                out.append(ToolInfo(t.name, t.description or "", dict(t.input_schema or {"type": "object"})))
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                break
        return out

    async def _do_call(self, client: Any, call: _Call) -> None:
        from mcp.shared.exceptions import MCPError

        try:
            result = await client.call_tool(call.tool, call.arguments, read_timeout_seconds=self.spec.tool_timeout_s)
            call.content, call.is_error = _result_text(result)
            call.answered = True
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise _Gone from exc
            if exc.code == INVALID_ANSWER:
                call.content = f"the MCP server {self.spec.name} sent {exc.error.message}"
            else:
                call.content = f"the MCP server {self.spec.name} answered with an error: {exc}"
            call.is_error, call.answered = True, True
        except Exception as exc:  # the SDK could not read the answer (e.g. ``content`` not a list)
            call.content = f"the MCP server {self.spec.name} sent an invalid answer: {_what_is_wrong(exc)}"
            call.is_error, call.answered = True, True
        finally:
            if not call.answered:
                self._inflight.discard(call)
                call.content = f"the MCP server {self.spec.name} stopped during the call; it is being restarted"
                call.is_error = True
            self._inflight.discard(call)
            call.done.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Call ``tool`` with ``arguments``; returns ``(text, is_error)``. Never raises for
        what the server did; waits for a (re)start up to its startup deadline."""
        if not self.ready.is_set():
            with anyio.move_on_after(self.spec.startup_timeout_s):
                await self.ready.wait()
        if self.state == "failed":
            return f"the MCP server {self.spec.name} is not available: {self.error}", True
        call = _Call(tool, arguments)
        with anyio.move_on_after(self.spec.startup_timeout_s + self.spec.tool_timeout_s + 5) as scope:
            try:
                await self._tx.send(call)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return f"the MCP server {self.spec.name} is stopped", True
            await call.done.wait()
        if scope.cancelled_caught:
            return f"the MCP server {self.spec.name} did not answer within {self.spec.tool_timeout_s:g} s", True
        return call.content, call.is_error


class McpManager:
    """The MCP servers of one session.

    Args:
        specs: the servers (the person's and, in a trusted workspace, the project's).
        workspace, environment, on_event, sandbox, bwrap: as for ``McpServer``.
    """

    def __init__(self, specs: Sequence[ServerSpec], *, workspace: Path, environment: Mapping[str, str],
                 on_event: OnEvent, backoff_s: float = 0.5, sandbox: SandboxPolicy = _DEFAULT_SANDBOX,
                 bwrap: str | None = None, max_restarts: int = 5) -> None:
        self.servers = {s.name: McpServer(s, workspace=workspace, environment=environment, on_event=on_event,
                                          backoff_s=backoff_s, sandbox=sandbox, bwrap=bwrap, max_restarts=max_restarts)
                        for s in specs}

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run every server until cancelled (the session ends); the SDK stops each one."""
        async with anyio.create_task_group() as tg:
            for server in self.servers.values():
                await tg.start(server.run)
            task_status.started()

    async def wait_ready(self, limit_s: float | None = None) -> list[McpServer]:
        """Wait, for all servers at once, until each is up or given up, within its startup
        deadline and at most ``limit_s``; returns those still starting."""

        async def one(server: McpServer) -> None:
            with anyio.move_on_after(server.spec.startup_timeout_s):
                await server.ready.wait()

        with anyio.move_on_after(float("inf") if limit_s is None else limit_s):
            async with anyio.create_task_group() as tg:
                for server in self.servers.values():
                    tg.start_soon(one, server)
        return [s for s in self.servers.values() if not s.ready.is_set()]

    def secret_values(self) -> list[str]:
        return sorted({v for s in self.servers.values() for v in s.secret_values()})

    def status(self) -> list[dict[str, Any]]:
        """``musec mcp list``: each server's name, transport, source, state, error, restarts and tools."""
        return [{"server": s.spec.name, "transport": s.spec.transport, "source": s.spec.source, "state": s.state,
                 "error": s.error, "restarts": s.restarts, "tools": [t.name for t in s.tools]}
                for s in self.servers.values()]
