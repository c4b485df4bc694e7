"""The session's network proxy in-process: CONNECT to an allowed host is tunnelled, to
another refused with 403; every connection is recorded with its rule. Real sockets."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from musec.agents.core.events import event_type, line_fields
from musec.agents.netrules import decide_host
from musec.agents.permissions import parse_rule
from musec.daemon.netproxy import NetProxy

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"),
                        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


async def _echo(stream: Any) -> None:
    async with stream:
        async for data in stream:
            await stream.send(b"echo:" + data)


async def _request(path: str, text: bytes) -> bytes:
    out = b""
    async with await anyio.connect_unix(path) as conn:
        await conn.send(text)
        try:
            while True:
                out += await conn.receive()
                if b"echo:" in out or b"\r\n\r\n" in out and not out.startswith(b"HTTP/1.1 200"):
                    break
                if out.startswith(b"HTTP/1.1 200") and out.endswith(b"\r\n\r\n"):
                    await conn.send(b"ping")
        except anyio.EndOfStream:
            pass
    return out


async def test_connect_is_tunnelled_to_allowed_hosts_only() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        rules = [parse_rule(f"net(127.0.0.1:{port})", "allow")]
        proxy = NetProxy(lambda host, p: decide_host(host, p, rules), lambda e: events.append((event_type(e), line_fields(e))))
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, _echo)
            await tg.start(proxy.serve)
            with anyio.fail_after(30):
                tunnelled = await _request(str(proxy.socket_path), f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
                refused = await _request(str(proxy.socket_path), f"CONNECT 127.0.0.1:{port + 1} HTTP/1.1\r\n\r\n".encode())
                odd = await _request(str(proxy.socket_path), b"GET /relative HTTP/1.1\r\n\r\n")
            tg.cancel_scope.cancel()
    assert tunnelled == b"HTTP/1.1 200 Connection established\r\n\r\necho:ping"
    assert refused.startswith(b"HTTP/1.1 403") and b"no net(...) rule allows it" in refused
    assert odd.startswith(b"HTTP/1.1 400")
    assert [(f["port"], f["decision"], f["rule"]) for _, f in events] == [
        (port, "allow", f"net(127.0.0.1:{port})"), (port + 1, "deny", "")]
    assert all(t == "net_connection" for t, _ in events)
    assert not proxy.folder.exists()  # the socket's folder goes with the proxy


async def test_an_ask_rule_is_put_to_the_asker() -> None:
    events: list[dict[str, Any]] = []
    asked: list[tuple[str, int, str]] = []
    listening: list[int] = []

    async def ask(host: str, port: int, verdict: Any) -> bool:
        asked.append((host, port, verdict.rule))
        return port in listening  # the person says yes to the first, no to the second

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        listening.append(port)
        rules = [parse_rule("net(127.0.0.1)", "ask")]
        proxy = NetProxy(lambda host, p: decide_host(host, p, rules), lambda e: events.append(line_fields(e)), ask=ask)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, _echo)
            await tg.start(proxy.serve)
            with anyio.fail_after(30):
                answers = [await _request(str(proxy.socket_path), f"CONNECT 127.0.0.1:{p} HTTP/1.1\r\n\r\n".encode())
                           for p in (port, port + 1)]
            tg.cancel_scope.cancel()
    assert answers[0].endswith(b"echo:ping") and answers[1].startswith(b"HTTP/1.1 403")
    assert [a[2] for a in asked] == ["net(127.0.0.1)"] * 2
    assert [e["decision"] for e in events] == ["allow", "deny"]
