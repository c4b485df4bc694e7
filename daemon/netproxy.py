"""The session's filtering HTTP proxy: how a sandboxed command reaches an allowed host.

The sandbox keeps its network unshared (no interface but loopback, no DNS). When the
person's rules (or a trusted project's) open the network for some hosts (``net(HOST)``,
``agents/permissions.py``), the daemon serves this proxy on a Unix socket in a private
folder that the sandbox binds in; inside, ``agents/tools/netbridge.py`` listens on
127.0.0.1 and forwards each connection to the socket, with ``HTTP_PROXY``/``HTTPS_PROXY``
set for the command. The proxy speaks plain HTTP with an absolute URI (``GET
http://host:port/path``) and HTTPS ``CONNECT host:port``; it decides by host name and port
(``agents/netrules.decide_host``), resolves the name itself, and logs every connection
(``net_connection``: host, port, decision, the rule). Nothing else leaves the sandbox.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import structlog
from musec.agents.core.events import NetConnection

log = structlog.get_logger("musec.netproxy")

MAX_HEAD_BYTES = 64 * 1024
CONNECT_TIMEOUT_S = 15.0
_CHUNK = 64 * 1024


class NetProxy:
    """One session's proxy.

    Args:
        decide: ``(host, port) -> Verdict`` (``netrules.decide_host`` over the rules).
        record: where the ``NetConnection`` events go (the session's ``record``).
        ask: ``(host, port, verdict) -> allowed`` for an ``ask`` rule (the session's
            approval, like a tool call's); None denies.
        durable: awaited before a connection is made: returns once its ``NetConnection``
            is on disk (the session's ``durable``); None: ``record`` made it durable.

    Attributes:
        socket_path: the Unix socket (in a private folder); set by ``serve``.
    """

    def __init__(self, decide: Callable[[str, int], Any], record: Callable[[NetConnection], object],
                 ask: Callable[[str, int, Any], Awaitable[bool]] | None = None,
                 durable: Callable[[], Awaitable[None]] | None = None) -> None:
        self.decide = decide
        self.record = record
        self.ask = ask
        self.durable = durable
        self.folder = Path(tempfile.mkdtemp(prefix="musec-net-"))
        self.socket_path = self.folder / "proxy.sock"

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; ready (``task_status.started()``) once the socket is bound."""
        listener = await anyio.create_unix_listener(self.socket_path)
        try:
            task_status.started()
            await listener.serve(self._handle)
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()
            shutil.rmtree(self.folder, ignore_errors=True)

    async def _handle(self, client: anyio.abc.ByteStream) -> None:
        try:
            async with client:
                await self._proxy(client)
        except Exception:  # supervision at the edge: one bad connection never stops the proxy
            log.exception("net_proxy_connection_failed")

    async def _proxy(self, client: anyio.abc.ByteStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            if len(head) > MAX_HEAD_BYTES:
                return await _reply(client, 431, "request head too large")
            try:
                head += await client.receive(_CHUNK)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return
        request, rest = head.split(b"\r\n\r\n", 1)
        lines = request.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return await _reply(client, 400, "malformed request line")
        method, target, version = parts
        tunnel = method.upper() == "CONNECT"
        host, port, path = _target(target, tunnel)
        if not host:
            return await _reply(client, 400, "the proxy takes CONNECT host:port or an absolute http:// URI")
        verdict = self.decide(host, port)
        decision = verdict.decision
        if decision == "ask":
            decision = "allow" if self.ask is not None and await self.ask(host, port, verdict) else "deny"
        self.record(NetConnection(host=host, port=port, method=method.upper(), decision=decision,
                                  rule=verdict.rule, source=verdict.source))  # write-ahead: it leaves the sandbox
        if decision != "allow":
            why = f"denied by the rule {verdict.rule}" if verdict.rule else "no net(...) rule allows it"
            return await _reply(client, 403, f"musec: the sandbox may not reach {host}:{port}: {why}")
        if self.durable is not None:
            await self.durable()
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_S):
                upstream = await anyio.connect_tcp(host, port)
        except (OSError, TimeoutError) as exc:
            return await _reply(client, 502, f"musec: cannot reach {host}:{port}: {exc}")
        async with upstream:
            if tunnel:
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    await upstream.send(rest)
            else:  # origin-form to the server, one request per connection
                kept = [ln for ln in lines[1:] if ln.split(":", 1)[0].strip().lower()
                        not in ("proxy-connection", "connection", "keep-alive", "proxy-authorization")]
                out = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"]) + "\r\n\r\n"
                await upstream.send(out.encode("latin-1") + rest)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pipe, client, upstream, None)  # the client may half-close and still read
                await _pipe(upstream, client, tg.cancel_scope)  # the server is done: so is the connection


def _target(target: str, tunnel: bool) -> tuple[str, int, str]:
    """``(host, port, path)`` of a request target; host empty when it is not one the proxy
    takes."""
    if tunnel:
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        return (host.lower(), int(port), "") if host and port.isdigit() else ("", 0, "")
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        return "", 0, ""
    try:
        port = parts.port or 80
    except ValueError:
        return "", 0, ""
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.hostname.lower(), port, path


async def _pipe(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream, scope: anyio.CancelScope | None) -> None:
    try:
        while True:
            data = await source.receive(_CHUNK)
            await sink.send(data)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    with contextlib.suppress(Exception):
        await sink.send_eof()
    if scope is not None:
        scope.cancel()


async def _reply(client: anyio.abc.ByteStream, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await client.send(head.encode() + body)
