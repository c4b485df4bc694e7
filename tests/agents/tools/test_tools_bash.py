"""bash in the real bubblewrap sandbox (and unsandboxed), with real processes."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from musec.agents.tools import BashTool, ToolContext

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)"
    ),
]

bash = BashTool(kill_grace_s=0.5)


def live_processes_with(token: str) -> list[int]:
    """Pids of processes (zombies excluded) whose command line contains ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def is_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def settled(check, timeout_s: float = 10.0) -> bool:
    """Whether ``check()`` becomes true within ``timeout_s``: a SIGKILLed process leaves
    /proc only once the kernel has run it to its end, which a loaded machine delays."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def sleep_token() -> str:
    """A `sleep` duration no other process uses, to find the process in /proc."""
    return f"300.{secrets.randbelow(10**9):09d}"


@pytest.fixture
def outside_dir() -> Iterator[Path]:
    """A directory outside the workspace and outside /tmp (which the sandbox replaces)."""
    path = Path(tempfile.mkdtemp(prefix="musec-outside-", dir="/var/tmp")).resolve()
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_output_and_exit_status(ctx: ToolContext) -> None:
    result = await bash.run({"command": "echo out; echo err >&2; exit 7"}, ctx)
    assert result.content == "out\nerr\nexit status: 7"
    assert result.exit_status == 7
    assert not result.is_error and not result.timed_out and result.full_output is None


async def test_no_output(ctx: ToolContext) -> None:
    result = await bash.run({"command": "true"}, ctx)
    assert result.content == "(no output)\nexit status: 0"


async def test_runs_in_the_workspace_and_writes_there(ctx: ToolContext) -> None:
    result = await bash.run({"command": "pwd; echo made > made.txt"}, ctx)
    assert result.content.splitlines()[0] == str(ctx.workspace)
    assert (ctx.workspace / "made.txt").read_text() == "made\n"


async def test_network_is_off_unless_allowed(make_ctx) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = (
            f'python3 -c "import socket; '
            f"socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\""
        )
        closed = await bash.run({"command": probe}, make_ctx())
        assert "connected" not in closed.content.replace("exit status", "")
        assert closed.exit_status != 0
        assert "Error" in closed.content  # ConnectionRefusedError or OSError: unreachable
        opened = await bash.run({"command": probe}, make_ctx(network=True))
        assert opened.content == "connected\nexit status: 0"


async def test_writes_outside_the_workspace_fail_at_os_level(
    ctx: ToolContext, outside_dir: Path
) -> None:
    target = outside_dir / "escaped.txt"
    result = await bash.run({"command": f"ls -d {outside_dir} && echo x > {target}"}, ctx)
    assert str(outside_dir) in result.content  # visible, read-only
    assert "Read-only file system" in result.content
    assert result.exit_status != 0
    assert not target.exists()


async def test_writable_roots_are_writable(make_ctx, outside_dir: Path) -> None:
    ctx = make_ctx(writable_roots=(str(outside_dir),))
    result = await bash.run({"command": f"echo ok > {outside_dir}/allowed.txt"}, ctx)
    assert result.exit_status == 0, result.content
    assert (outside_dir / "allowed.txt").read_text() == "ok\n"


async def test_read_only_profile_mounts_the_workspace_read_only(make_ctx) -> None:
    ctx = make_ctx(profile="read-only")
    (ctx.workspace / "present.txt").write_text("readable\n")
    result = await bash.run({"command": "cat present.txt; touch new.txt"}, ctx)
    assert "readable" in result.content and "Read-only file system" in result.content
    assert not (ctx.workspace / "new.txt").exists()


async def test_tmp_is_private(ctx: ToolContext) -> None:
    name = f"musec-private-{secrets.token_hex(4)}"
    result = await bash.run({"command": f"echo x > /tmp/{name} && cat /tmp/{name}"}, ctx)
    assert result.content == "x\nexit status: 0"
    assert not Path("/tmp", name).exists()


async def test_credentials_are_not_in_the_environment(make_ctx) -> None:
    secret_env = {
        "OPENAI_API_KEY": "sk-openai-SECRET1",
        "ANTHROPIC_API_KEY": "sk-ant-SECRET2",
        "ANTHROPIC_BASE_URL": "http://proxy.invalid",
        "AZURE_OPENAI_ENDPOINT": "https://azure.invalid",
        "GITHUB_TOKEN": "ghp_SECRET3",
        "DB_PASSWORD": "SECRET4",
        "CLIENT_SECRET": "SECRET5",
        "MY_SERVICE_KEY": "SECRET6",
    }
    ctx = make_ctx(env={**secret_env, "PLAIN_SETTING": "visible"})
    result = await bash.run({"command": "env"}, ctx)
    assert "PLAIN_SETTING=visible" in result.content
    for name, value in secret_env.items():
        assert name not in result.content
        assert value not in result.content


async def test_stdin_is_closed(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await bash.run({"command": 'cat; echo "cat=$?"; read -r line; echo "read=$?"'}, ctx)
    assert result.content == "cat=0\nread=1\nexit status: 0"
    assert time.monotonic() - started < 10


async def test_output_keeps_head_and_tail(make_ctx) -> None:
    ctx = make_ctx(max_output_bytes=1000)
    command = "printf HEAD; head -c 100000 /dev/zero | tr '\\0' x; printf TAIL"
    result = await bash.run({"command": command}, ctx)
    assert result.content.startswith("HEAD" + "x" * 496 + "\n[... 99008 bytes omitted ...]\n")
    assert result.content.endswith("x" * 496 + "TAIL\nexit status: 0")
    assert result.full_output == b"HEAD" + b"x" * 100_000 + b"TAIL"


@pytest.mark.parametrize("mode", ["bwrap", "off"])
async def test_background_processes_neither_hang_the_call_nor_outlive_it(
    make_ctx, mode: str
) -> None:
    token, quiet = sleep_token(), sleep_token()
    command = f"sleep {token} & sleep {quiet} >/dev/null 2>&1 & echo started"
    started = time.monotonic()
    result = await bash.run({"command": command}, make_ctx(mode=mode))
    assert result.content == "started\nexit status: 0"
    assert time.monotonic() - started < 10
    assert settled(lambda: live_processes_with(token) == [] and live_processes_with(quiet) == [])


async def test_timeout_kills_the_sandboxed_process_tree(make_ctx) -> None:
    token = sleep_token()
    ctx = make_ctx()
    result = await bash.run(
        {"command": f"echo begun; (sleep {token}; echo never) & sleep {token}", "timeout_s": 2},
        ctx,
    )
    assert result.timed_out and result.is_error
    assert result.content.startswith("begun\n[timed out after 2 s")
    assert "never" not in result.content
    assert result.exit_status is not None and result.exit_status != 0
    assert settled(lambda: live_processes_with(token) == [])


async def test_timeout_kills_the_whole_process_group_unsandboxed(make_ctx) -> None:
    ctx = make_ctx(mode="off")
    command = "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; sleep 300"
    # 2 s, not less: on a loaded machine the shell must get to write its pid files first.
    result = await bash.run({"command": command, "timeout_s": 2}, ctx)
    assert result.timed_out
    assert result.content.endswith("exit status: -15 (killed by SIGTERM)")
    for pid_file in ("child.pid", "shell.pid"):
        pid = int((ctx.workspace / pid_file).read_text())
        assert settled(lambda pid=pid: not is_alive(pid)), pid_file


async def test_sigterm_ignored_gets_sigkill_after_the_grace(make_ctx) -> None:
    ctx = make_ctx(mode="off")
    result = await BashTool(kill_grace_s=0.2).run(
        {"command": "trap '' TERM; while :; do :; done", "timeout_s": 0.3}, ctx
    )
    assert result.timed_out and result.exit_status == -9
    assert result.content.endswith("exit status: -9 (killed by SIGKILL)")


@pytest.mark.parametrize("mode", ["bwrap", "off"])
async def test_cancellation_kills_the_command_and_is_reraised(make_ctx, mode: str) -> None:
    ctx = make_ctx(mode=mode)
    token = sleep_token()
    finished = False

    async def call() -> None:
        nonlocal finished
        await bash.run({"command": f"touch ready; sleep {token}"}, ctx)
        finished = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(10):
            while not (ctx.workspace / "ready").exists():
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert not finished
    assert settled(lambda: live_processes_with(token) == [])


async def test_missing_bwrap_names_the_fix(ctx: ToolContext) -> None:
    result = await BashTool(bwrap="/nonexistent/bwrap").run({"command": "touch ran"}, ctx)
    assert result.is_error
    assert "did not run" in result.content
    assert "apt-get install bubblewrap" in result.content and "--sandbox off" in result.content
    assert not (ctx.workspace / "ran").exists()


async def test_refused_user_namespaces_name_the_fix(ctx: ToolContext, tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    result = await BashTool(bwrap=str(fake)).run({"command": "touch ran"}, ctx)
    assert result.is_error
    assert "setting up uid map" in result.content
    assert "user namespaces" in result.content and "--sandbox off" in result.content
    assert "\n" not in result.content
    assert not (ctx.workspace / "ran").exists()


async def test_seatbelt_off_macos_is_refused(make_ctx) -> None:
    if sys.platform == "darwin":
        pytest.skip("Seatbelt exists here")
    result = await bash.run({"command": "true"}, make_ctx(mode="seatbelt"))
    assert result.is_error and "only on macOS" in result.content


@pytest.mark.parametrize(
    ("input", "message"),
    [
        ({}, "`command` is required"),
        ({"command": ""}, "`command` must not be empty"),
        ({"command": "true", "timeout_s": 0}, "`timeout_s` must be more than 0"),
        ({"command": "true", "timeout_s": "10"}, "`timeout_s` must be a number"),
    ],
)
async def test_bad_input(ctx: ToolContext, input: dict, message: str) -> None:
    result = await bash.run(input, ctx)
    assert result.is_error and message in result.content
