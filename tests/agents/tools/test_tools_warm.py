"""Warm bubblewrap sandboxes (agents/tools/warm.py, zygote.py): real bubblewrap, real processes.

What a command sees must be what the one-shot sandbox shows it, except that /tmp lasts
between the commands of one sandbox; what it leaves behind dies with it; and nothing it
does inside (kill everything, pkill python) breaks the next command.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from musec.agents.tools import BashTool
from musec.agents.tools import warm
from musec.agents.tools.procs import run_process_group
from musec.agents.tools.sandbox import bwrap_argv, find_bwrap


def _state(pid: int | str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def is_alive(pid: int) -> bool:
    return _state(pid) not in ("Z", "X")


def live_processes_with(token: str) -> list[int]:
    """Pids of live processes whose command line holds ``token``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline and is_alive(int(entry)):
            found.append(int(entry))
    return found


def settled(check, timeout_s: float = 10.0) -> bool:
    """Whether ``check()`` becomes true within ``timeout_s`` (a killed process leaves /proc
    once the kernel has run it to its end, which a loaded machine delays)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def sleep_token() -> str:
    """A `sleep` duration no other process uses, to find the process in /proc."""
    return f"300.{secrets.randbelow(10**9):09d}"

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)"),
]

bash = BashTool(kill_grace_s=0.5)


async def run(ctx, command: str, **input) -> tuple[str, int | None]:
    out = await bash.run({"command": command, **input}, ctx)
    return out.content.rsplit("\nexit status", 1)[0].removeprefix("(no output)"), out.exit_status


async def test_tmp_lasts_between_the_commands_of_one_sandbox(ctx) -> None:
    name = secrets.token_hex(6)
    assert await run(ctx, f"echo kept > /tmp/{name}") == ("", 0)
    assert await run(ctx, f"cat /tmp/{name}") == ("kept", 0)
    assert not Path("/tmp", name).exists()  # still the sandbox's own /tmp


async def test_the_off_switch_gives_each_command_a_fresh_tmp(ctx, monkeypatch) -> None:
    monkeypatch.setenv("MUSEC_SANDBOX_WARM", "0")
    name = secrets.token_hex(6)
    await run(ctx, f"echo kept > /tmp/{name}")
    text, status = await run(ctx, f"cat /tmp/{name}")
    assert status == 1 and "No such file" in text


async def test_env_cwd_and_exit_status_are_per_command(make_ctx, workspace: Path) -> None:
    one, two = make_ctx(env={"WARM_TEST": "one"}), make_ctx(env={"WARM_TEST": "two", "OPENAI_API_KEY": "sk-x"})
    assert await run(one, "echo $WARM_TEST; pwd; export LEFT=1; cd /; exit 7") == (f"one\n{workspace}", 7)
    assert await run(two, 'echo "$WARM_TEST ${LEFT:-unset} ${OPENAI_API_KEY:-scrubbed}"; pwd') == (
        f"two unset scrubbed\n{workspace}", 0)


async def test_a_session_escapee_dies_with_its_command(ctx) -> None:
    token = sleep_token()
    assert await run(ctx, f"setsid sleep {token} > /dev/null 2>&1 & echo started") == ("started", 0)
    assert settled(lambda: live_processes_with(token) == [])


async def test_a_new_deny_rule_applies_at_once(make_ctx, workspace: Path) -> None:
    (workspace / "secret.txt").write_text("s3cret\n")
    assert await run(make_ctx(), "cat secret.txt") == ("s3cret", 0)
    text, _ = await run(make_ctx(read_deny=(str(workspace / "secret.txt"),)), "cat secret.txt")
    assert "s3cret" not in text


async def test_a_masked_file_replaced_on_disk_stays_masked(make_ctx, workspace: Path) -> None:
    secret = workspace / "secret.txt"
    secret.write_text("old\n")
    ctx = make_ctx(read_deny=(str(secret),))
    text, status = await run(ctx, "cat secret.txt")
    assert "old" not in text and status is not None
    fresh = workspace / "fresh.tmp"
    fresh.write_text("new s3cret\n")
    os.replace(fresh, secret)  # a new inode: the old sandbox's mount covers the old one only
    text, _ = await run(ctx, "cat secret.txt")
    assert "s3cret" not in text


async def test_pkill_python_in_a_command_does_not_break_the_next(ctx) -> None:
    name = secrets.token_hex(6)
    await run(ctx, f"echo kept > /tmp/{name}")
    await run(ctx, "pkill python3; pkill -9 -f 'pyth[o]n'; pkill -f musec-sandbox; true")
    assert await run(ctx, f"cat /tmp/{name}") == ("kept", 0)  # the same sandbox, still serving


async def test_kill_everything_in_a_command_does_not_break_the_next(ctx) -> None:
    text, status = await run(ctx, "kill -9 -1; echo survived")
    assert text.endswith("survived") and status == 0
    assert await run(ctx, "echo next") == ("next", 0)


async def test_concurrent_commands_in_one_sandbox(ctx) -> None:
    results: dict[int, tuple[str, int | None]] = {}

    async def one(i: int) -> None:
        results[i] = await run(ctx, f"sleep 0.{i}; echo {i}; exit {i}")

    await run(ctx, "true")  # the sandbox is warm
    async with anyio.create_task_group() as tg:
        for i in range(1, 5):
            tg.start_soon(one, i)
    assert results == {i: (str(i), i) for i in range(1, 5)}


async def test_a_command_ignoring_sigterm_is_killed_at_its_timeout(ctx) -> None:
    token = sleep_token()
    out = await bash.run({"command": f"trap '' TERM; sleep {token}", "timeout_s": 1}, ctx)
    assert out.timed_out and out.exit_status == -9
    assert settled(lambda: live_processes_with(token) == [])
    assert await run(ctx, "echo next") == ("next", 0)


async def test_stdin_data_and_separate_stderr(workspace: Path, ctx) -> None:
    argv = bwrap_argv(ctx.sandbox, workspace, ctx.env, ["bash", "-c", "cat; echo oops >&2; exit 3"],
                      bwrap=find_bwrap() or "bwrap")
    out, err = bytearray(), bytearray()
    for _ in range(2):  # the second runs in the warm sandbox the first started
        out.clear(), err.clear()
        done = await run_process_group(argv, cwd=workspace, env=ctx.env, timeout_s=30, sink=out.extend,
                                       stderr_sink=err.extend, stdin_data=b"fed\n", warm=True)
        assert (bytes(out), bytes(err), done.exit_status) == (b"fed\n", b"oops\n", 3)


async def test_a_missing_program_is_file_not_found(workspace: Path, ctx) -> None:
    argv = bwrap_argv(ctx.sandbox, workspace, ctx.env, ["no-such-program-here"], bwrap=find_bwrap() or "bwrap")
    await run(ctx, "true")  # the sandbox is warm
    with pytest.raises(FileNotFoundError):
        await run_process_group(argv, cwd=workspace, env=ctx.env, timeout_s=30, sink=lambda _: None, warm=True)


def test_the_split_keeps_per_command_parts_out_of_the_key(workspace: Path) -> None:
    from musec.agents.tools import SandboxPolicy

    argv = bwrap_argv(SandboxPolicy(), workspace, {"A": "1"}, ["bash", "-c", "x"], bwrap="bwrap")
    split = warm.split_bwrap_argv(argv)
    assert split is not None and split.command == ("bash", "-c", "x") and split.cwd == str(workspace)
    assert split.env["A"] == "1" and "--setenv" not in split.sandbox_args
    assert warm.split_bwrap_argv([*argv[:-4], "--unknown-option", *argv[-4:]]) is None


async def test_the_sandbox_goes_when_the_daemon_does(workspace: Path) -> None:
    """A process that ran a warm command dies without cleaning up: its sandbox goes too."""
    script = textwrap.dedent(f"""
        import anyio, os
        from musec.agents.tools import BashTool, SandboxPolicy, ToolContext
        from musec.agents.tools import warm
        async def main():
            ctx = ToolContext(workspace={str(workspace)!r}, env={{"PATH": "/usr/bin:/bin"}}, sandbox=SandboxPolicy())
            out = await BashTool().run({{"command": "true"}}, ctx)
            assert out.exit_status == 0, out
            print(*[box.popen.pid for box in warm._sandboxes.values()], flush=True)
            os._exit(0)  # no atexit, no close: as a daemon killed
        anyio.run(main)
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 1, proc.stdout + proc.stderr
    assert settled(lambda: not is_alive(pids[0]))
