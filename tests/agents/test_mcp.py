"""The MCP client against a real server built with the SDK: stdio and streamable HTTP,
tool listing, calls, a crash mid-session and the restart, secrets kept out of events."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from musec.agents.core.events import AnyEvent, ToolFinished, event_type, line_fields
from musec.agents.history import is_untrusted_result
from musec.agents.mcp import (
    McpConfigError,
    McpManager,
    ServerSpec,
    load_project_servers,
    mcp_tools,
    parse_servers,
    tool_name,
)
from musec.agents.tools.base import ToolContext

pytestmark = pytest.mark.timeout(180)

SERVER = textwrap.dedent('''
    import os, socket, sys
    from pathlib import Path
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("demo")
    COUNT = Path(os.environ.get("START_COUNT", "/dev/null"))

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def whoami() -> str:
        """Says whether the server got its token."""
        return "token set" if os.environ.get("DEMO_TOKEN") else "no token"

    @app.tool()
    def crash() -> str:
        """Exit the server process at once."""
        os._exit(3)

    @app.tool()
    def fail() -> str:
        """Raise an error."""
        raise ValueError("deliberate failure")

    if __name__ == "__main__":
        if str(COUNT) != "/dev/null":
            with COUNT.open("a") as f:
                f.write("start\\n")
        if sys.argv[1:2] == ["http"]:
            import anyio, uvicorn
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", int(sys.argv[3]) if len(sys.argv) > 3 else 0))
            sock.listen(16)
            Path(sys.argv[2]).write_text(str(sock.getsockname()[1]))
            server = uvicorn.Server(uvicorn.Config(app.streamable_http_app(), log_level="warning"))
            anyio.run(lambda: server.serve(sockets=[sock]))
        else:
            app.run()
''')


@pytest.fixture
def server_py(tmp_path: Path) -> Path:
    path = tmp_path / "demo_server.py"
    path.write_text(SERVER)
    return path


@pytest.fixture
def http_server(server_py: Path, tmp_path: Path) -> Iterator[str]:
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, str(server_py), "http", str(port_file)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if port_file.exists() and port_file.read_text():
                break
            if proc.poll() is not None:
                raise RuntimeError("the HTTP MCP server exited")
            subprocess.run(["sleep", "0.1"])  # polling a subprocess's readiness file, not synchronising threads
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        proc.kill()
        proc.wait()


def test_config_shapes_and_errors(tmp_path: Path) -> None:
    specs = parse_servers({"gh": {"command": "npx", "args": ["-y", "x"], "env": {"T": "${GH_TOKEN}"}},
                           "docs": {"url": "https://d.example/mcp", "headers": {"A": "Bearer ${D}"}},
                           "off": {"command": "x", "enabled": False}}, source="user", origin="c.toml")
    assert [(s.name, s.transport) for s in specs] == [("gh", "stdio"), ("docs", "http")]
    assert specs[0].describe() == "gh (stdio npx -y x, user)"
    for bad, msg in [({"a__b": {"command": "x"}}, "server name"), ({"x": {"command": "x", "url": "http://y"}}, "exactly one"),
                     ({"x": {"url": "ftp://y"}}, "http://"), ({"x": {"command": "x", "args": "y"}}, "list of strings"),
                     ({"x": {"command": "x", "bogus": 1}}, "unknown key")]:
        with pytest.raises(McpConfigError, match=msg):
            parse_servers(bad, source="user", origin="c.toml")
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"p": {"type": "stdio", "command": "srv"}}}))
    assert [(s.name, s.source) for s in load_project_servers(tmp_path)] == [("p", "project")]
    (tmp_path / ".mcp.json").write_text("{nope")
    with pytest.raises(McpConfigError, match="cannot be read as JSON"):
        load_project_servers(tmp_path)
    assert tool_name("gh", "create.issue") == "mcp__gh__create_issue" and tool_name("gh", "x" * 80) is None


async def _session(manager: McpManager, body: Any) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        await manager.wait_ready()
        await body()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_tools_listed_called_and_restarted_after_a_crash(transport: str, server_py: Path, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    count = tmp_path / "starts"
    secret = "s3cr3t-value-" + transport
    if transport == "stdio":
        spec = ServerSpec("demo", "stdio", command=sys.executable, args=(str(server_py),),
                          env={"DEMO_TOKEN": "${DEMO_TOKEN}", "START_COUNT": str(count)}, tool_timeout_s=30)
    else:
        url = request.getfixturevalue("http_server")
        spec = ServerSpec("demo", "http", url=url, headers={"X-Token": "${DEMO_TOKEN}"}, tool_timeout_s=30)
    events: list[AnyEvent] = []
    manager = McpManager([spec], workspace=tmp_path, environment={"DEMO_TOKEN": secret},
                         on_event=events.append, backoff_s=0.05)
    ctx = ToolContext(workspace=tmp_path, env={})

    async def body() -> None:
        tools, problems = mcp_tools(manager)
        assert problems == []
        by_name = {t.name: t for t in tools}
        assert sorted(by_name) == ["mcp__demo__add", "mcp__demo__crash", "mcp__demo__fail", "mcp__demo__whoami"]
        add = by_name["mcp__demo__add"]
        assert add.spec.input_schema["required"] == ["a", "b"] and "Add two integers" in add.spec.description
        out = await add.run({"a": 2, "b": 40}, ctx)
        assert (out.content, out.is_error) == ("42", False)
        out = await by_name["mcp__demo__fail"].run({}, ctx)
        assert out.is_error and "fail" in out.content
        if transport == "stdio":
            assert (await by_name["mcp__demo__whoami"].run({}, ctx)).content == "token set"
            crashed = await by_name["mcp__demo__crash"].run({}, ctx)
            assert crashed.is_error and "stopped during the call" in crashed.content
            out = await add.run({"a": 1, "b": 1}, ctx)  # waits for the restart
            assert (out.content, out.is_error) == ("2", False)
            assert count.read_text().count("start") == 2
            assert manager.status()[0]["restarts"] == 1 and manager.status()[0]["state"] == "running"

    anyio.run(_session, manager, body)
    kinds = [event_type(e) for e in events]
    assert kinds[0] == "mcp_server_started"
    if transport == "stdio":
        assert kinds == ["mcp_server_started", "mcp_server_restarting", "mcp_server_started"]
    assert secret not in json.dumps([line_fields(e) for e in events]) and manager.secret_values() == [secret]


def test_missing_variable_and_dead_command_give_up_with_a_message(tmp_path: Path) -> None:
    specs = [ServerSpec("needs", "stdio", command="true", env={"T": "${NOT_SET_ANYWHERE}"}),
             ServerSpec("dead", "stdio", command=str(tmp_path / "missing-binary"), startup_timeout_s=5)]
    events: list[AnyEvent] = []
    manager = McpManager(specs, workspace=tmp_path, environment={}, on_event=events.append,
                         backoff_s=0.01)

    async def body() -> None:
        with anyio.fail_after(60):
            while any(s["state"] != "failed" for s in manager.status()):
                await manager.servers["dead"].ready.wait()
                await anyio.sleep(0.05)
        status = {s["server"]: s for s in manager.status()}
        assert "needs ${NOT_SET_ANYWHERE}" in status["needs"]["error"]
        assert "gave up after 5 attempts" in status["dead"]["error"]
        out = await manager.servers["dead"].call("x", {})
        assert out[1] and "not available" in out[0]

    anyio.run(_session, manager, body)


def test_results_are_marked_untrusted() -> None:
    assert is_untrusted_result(ToolFinished(call_id="c1", tool="mcp__demo__add", untrusted=True))


def _start_http(server_py: Path, port_file: Path, port: int = 0) -> subprocess.Popen:
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, str(server_py), "http", str(port_file), str(port)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if port_file.exists() and port_file.read_text():
            return proc
        if proc.poll() is not None:
            raise RuntimeError("the HTTP MCP server exited")
        subprocess.run(["sleep", "0.1"])  # polling a subprocess's readiness file
    raise RuntimeError("the HTTP MCP server did not start")


def test_http_server_that_goes_away_is_reconnected(server_py: Path, tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    first = _start_http(server_py, port_file)
    port = int(port_file.read_text())
    spec = ServerSpec("web", "http", url=f"http://127.0.0.1:{port}/mcp", tool_timeout_s=20, startup_timeout_s=20)
    events: list[str] = []
    manager = McpManager([spec], workspace=tmp_path, environment={}, on_event=lambda e: events.append(event_type(e)), backoff_s=0.2)
    ctx = ToolContext(workspace=tmp_path, env={})
    procs = [first]

    async def body() -> None:
        tools, _ = mcp_tools(manager)
        add = next(t for t in tools if t.name == "mcp__web__add")
        assert (await add.run({"a": 1, "b": 2}, ctx)).content == "3"
        crashed = await next(t for t in tools if t.name == "mcp__web__crash").run({}, ctx)
        assert crashed.is_error
        procs.append(_start_http(server_py, port_file, port))
        with anyio.fail_after(90):
            while True:
                out = await add.run({"a": 20, "b": 22}, ctx)
                if not out.is_error:
                    break
                await anyio.sleep(0.2)
        assert out.content == "42"
        assert manager.status()[0]["restarts"] >= 1

    try:
        anyio.run(_session, manager, body)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert events.count("mcp_server_started") >= 2 and "mcp_server_restarting" in events


PROBE = textwrap.dedent('''
    import os, sys
    from pathlib import Path
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("probe")
    tried = {}
    for name in ("inside", "outside"):
        try:
            Path(os.environ["PROBE_" + name.upper()]).write_text("written")
            tried[name] = "written"
        except OSError as exc:
            tried[name] = type(exc).__name__

    @app.tool()
    def probe() -> str:
        """What the server could write, and where it runs."""
        return f"{tried['inside']} {tried['outside']} cwd={os.getcwd()} token={os.environ.get('PROBE_TOKEN', '-')}"

    if __name__ == "__main__":
        app.run()
''')


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")
def test_a_projects_stdio_server_runs_in_the_sandbox_and_the_persons_own_does_not(tmp_path: Path) -> None:
    from musec.agents.tools.base import SandboxPolicy
    from musec.agents.tools.sandbox import find_bwrap

    ws = (tmp_path / "ws").resolve()
    (ws / "sub").mkdir(parents=True)
    (ws / "probe.py").write_text(PROBE)
    outside = tmp_path.resolve() / "outside"
    outside.mkdir()
    results: dict[str, str] = {}
    for source in ("project", "user"):
        env = {"PROBE_INSIDE": str(ws / f"inside-{source}"), "PROBE_OUTSIDE": str(outside / f"escaped-{source}"),
               "PROBE_TOKEN": "tok-abc"}
        spec = ServerSpec("probe", "stdio", command=sys.executable, args=("../probe.py",), cwd="sub", env=env,
                          source=source)
        manager = McpManager([spec], workspace=ws, environment={"PATH": "/usr/bin:/bin"}, on_event=lambda e: None,
                             sandbox=SandboxPolicy(), bwrap=find_bwrap())

        async def body(manager: McpManager = manager, source: str = source) -> None:
            assert manager.status()[0]["state"] == "running", manager.status()
            results[source] = (await manager.servers["probe"].call("probe", {}))[0]

        anyio.run(_session, manager, body)
    inside, escaped, cwd, token = results["project"].split()
    assert (inside, cwd, token) == ("written", f"cwd={ws / 'sub'}", "token=-")  # credentials scrubbed too
    assert escaped in ("PermissionError", "FileNotFoundError", "OSError")  # read-only, or the private /tmp
    assert (ws / "inside-project").exists() and not (outside / "escaped-project").exists()
    assert results["user"] == f"written written cwd={ws / 'sub'} token=tok-abc"  # the person's own: unsandboxed
    assert (outside / "escaped-user").exists()


def test_a_projects_stdio_server_does_not_start_without_a_sandbox(tmp_path: Path) -> None:
    spec = ServerSpec("probe", "stdio", command="touch", args=(str(tmp_path / "ran"),), source="project")
    manager = McpManager([spec], workspace=tmp_path, environment={}, on_event=lambda e: None, bwrap=None)

    async def body() -> None:
        status = manager.status()[0]
        assert status["state"] == "failed" and "no bubblewrap was found" in status["error"]

    anyio.run(_session, manager, body)
    assert not (tmp_path / "ran").exists()


RAW_SERVER = textwrap.dedent('''
    import sys, json
    def send(o): sys.stdout.write(json.dumps(o) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        m = json.loads(line); mid = m.get("id"); meth = m.get("method")
        if meth == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": m["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}})
        elif meth == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                {"name": n, "inputSchema": {"type": "object"}} for n in ("weird", "nullres", "bytes", "fine")]}})
        elif meth == "tools/call":
            n = m["params"]["name"]
            if n == "weird":
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": "not a list", "isError": "maybe"}})
            elif n == "nullres":
                send({"jsonrpc": "2.0", "id": mid, "result": None})
            elif n == "bytes":
                sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"\\xff\\xfe bad"}]}}\\n' % mid)
                sys.stdout.flush()
            else:
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "ok " + n}]}})
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
''')


def test_a_malformed_tool_answer_is_an_error_at_once_and_the_server_goes_on(tmp_path: Path) -> None:
    """fresh2 K12: a null result, bytes that are not UTF-8 and a ``content`` that is not a
    list each waited the whole tool timeout or were taken for a crash of the server."""
    raw = tmp_path / "raw.py"
    raw.write_text(RAW_SERVER)
    spec = ServerSpec("raw", "stdio", command=sys.executable, args=(str(raw),), tool_timeout_s=60)
    manager = McpManager([spec], workspace=tmp_path, environment={}, on_event=lambda e: None, backoff_s=0.01)
    server = manager.servers["raw"]

    async def body() -> None:
        with anyio.fail_after(20):  # each answer comes at once; the old code waited 60 s on nullres
            weird = await server.call("weird", {})
            nullres = await server.call("nullres", {})
            bad = await server.call("bytes", {})
            fine = await server.call("fine", {})
        assert weird[1] and "raw sent an invalid answer: content" in weird[0], weird
        assert nullres[1] and "raw sent an invalid answer: result" in nullres[0], nullres
        assert not bad[1] and "bad" in bad[0], bad
        assert fine == ("ok fine", False)
        assert server.restarts == 0  # none of it was taken for a crash

    anyio.run(_session, manager, body)


def test_a_server_that_is_stuck_or_not_mcp_does_not_hold_up_the_others(tmp_path: Path) -> None:
    """fresh2 K2/K1: servers were waited for one after the other, each up to its whole startup
    deadline; junk on stdout was only noticed at that deadline; the server's stderr was lost."""
    (tmp_path / "hang.py").write_text("import sys, time\nprint('hanging here', file=sys.stderr, flush=True)\ntime.sleep(600)\n")
    (tmp_path / "junk.py").write_text(
        "import sys\nfor line in sys.stdin:\n    sys.stdout.write('this is not json-rpc\\n'); sys.stdout.flush()\n")
    (tmp_path / "crash.py").write_text("import sys\nprint('crashing on purpose', file=sys.stderr)\nsys.exit(1)\n")
    specs = [ServerSpec(n, "stdio", command=sys.executable, args=(str(tmp_path / f"{n}.py"),), startup_timeout_s=60)
             for n in ("hang", "junk", "crash")]
    manager = McpManager(specs, workspace=tmp_path, environment={}, on_event=lambda e: None, max_restarts=0)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            start = anyio.current_time()
            slow = await manager.wait_ready(3)
            assert anyio.current_time() - start < 10
            assert [s.spec.name for s in slow] == ["hang"]
            assert "hanging here" in manager.servers["hang"].stderr_tail()
            status = {s["server"]: s for s in manager.status()}
            assert status["junk"]["state"] == "failed" and "'this is not json-rpc'" in status["junk"]["error"], status
            assert status["crash"]["state"] == "failed" and "crashing on purpose" in status["crash"]["error"], status
            tg.cancel_scope.cancel()

    anyio.run(main)
