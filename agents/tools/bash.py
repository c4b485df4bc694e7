"""The ``bash`` tool: a shell command in the sandbox, with a deadline and capped output.

The command runs as ``bash -c COMMAND`` in the workspace, inside bubblewrap (Linux) or
Seatbelt (macOS) as ``ctx.sandbox.mode`` says, or unsandboxed when the person chose
``--sandbox off``. Where the sandbox cannot start, the command does not run and the error
names the fix. See ``procs.run_process_group`` for how the process is run and killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ..core.conversation import ToolSpec
from .base import Access, SandboxPolicy, ToolContext, ToolInputError, ToolOutput
from .common import error_output, get_number, get_str
from .errors import SandboxUnavailable
from .paths import workspace_gone
from .procs import OutputBuffer, ProcessExit, run_process_group
from .sandbox import (
    BWRAP_INSTALL_HINT,
    bwrap_argv,
    bwrap_failure,
    find_bwrap,
    scrub_env,
    seatbelt_argv,
)

__all__ = ["BashTool", "MAX_TIMEOUT_S"]

MAX_TIMEOUT_S = 1800.0
"""The longest ``timeout_s`` a call may ask for (30 minutes)."""

PROBE_TIMEOUT_S = 10.0


class BashTool:
    """``bash {command, timeout_s?}``: run a shell command in the sandbox.

    Args:
        bwrap: the bubblewrap executable (default: found on ``PATH``).
        kill_grace_s: seconds between SIGTERM and SIGKILL on timeout or cancellation.
    """

    name = "bash"
    access: Access = "execute"
    spec = ToolSpec(
        name="bash",
        description=(
            "Run a shell command with `bash -c` in the workspace directory, inside a sandbox: "
            "the workspace is writable, the rest of the filesystem read-only, /tmp private "
            "(kept between commands), and the network off unless allowed. stdin is closed (no interactive "
            "programs). stdout and stderr are merged; long output keeps its head and tail. "
            "The last line gives the exit status. The command and all its child processes "
            "are killed at the timeout (timeout_s, seconds), and background processes do not "
            "outlive the call."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command to run."},
                "timeout_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_TIMEOUT_S,
                    "description": "Seconds before the command is killed (default 120).",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    )

    def __init__(self, *, bwrap: str | None = None, kill_grace_s: float = 2.0):
        self._bwrap = bwrap
        self._kill_grace_s = kill_grace_s
        self._probed: set[tuple[str, bool]] = set()

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            command = get_str(input, "command")
            timeout_s = get_number(
                input, "timeout_s", default=ctx.default_timeout_s, minimum_exclusive=0
            )
        except ToolInputError as exc:
            return error_output(str(exc))
        timeout_s = min(timeout_s, MAX_TIMEOUT_S)
        try:
            argv, env = await self._sandboxed(["bash", "-c", command], ctx)
        except SandboxUnavailable as exc:
            return error_output(f"the command did not run: {exc}")
        output = OutputBuffer(ctx.max_output_bytes)
        sink = output.feed
        if ctx.faults.armed("during_tool"):  # a restart test: die once the command has printed

            def sink(chunk: bytes) -> None:
                output.feed(chunk)
                ctx.faults.crash_at("during_tool")

        try:
            done = await run_process_group(
                argv,
                cwd=ctx.workspace,
                env=env,
                timeout_s=timeout_s,
                sink=sink,
                kill_grace_s=self._kill_grace_s,
                warm=ctx.sandbox.mode == "bwrap",
            )
        except OSError as exc:
            if not os.path.isdir(ctx.workspace):
                return error_output(workspace_gone(ctx.workspace))
            return error_output(
                f"the command did not run: cannot start {argv[0]} ({exc.strerror or exc})"
            )
        return _result(output, done, timeout_s)

    async def _sandboxed(
        self, command: list[str], ctx: ToolContext
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run ``command`` under ``ctx.sandbox``.

        Raises:
            SandboxUnavailable: the sandbox is missing or cannot start here.
        """
        policy = ctx.sandbox
        env = scrub_env(ctx.env)
        if policy.mode == "off":
            if policy.profile == "read-only":
                raise SandboxUnavailable(
                    "the workspace is read-only in this mode (planning or --approval read-only), and without a "
                    "sandbox (--sandbox off) nothing keeps a command from writing; run musec with a sandbox"
                )
            return [shutil.which("bash", path=env["PATH"]) or "/bin/bash", *command[1:]], env
        if policy.mode == "bwrap":
            bwrap = self._bwrap or find_bwrap()
            if bwrap is None or not os.access(bwrap, os.X_OK):
                raise SandboxUnavailable(f"bubblewrap (bwrap) was not found; {BWRAP_INSTALL_HINT}")
            await self._probe_bwrap(bwrap, policy)
            return bwrap_argv(policy, ctx.workspace, env, command, bwrap=bwrap), env
        if policy.mode == "seatbelt":
            if sys.platform != "darwin" or not os.access("/usr/bin/sandbox-exec", os.X_OK):
                raise SandboxUnavailable(
                    "the Seatbelt sandbox (sandbox-exec) exists only on macOS; use bubblewrap "
                    "here, or run musec with `--sandbox off`"
                )
            return seatbelt_argv(policy, ctx.workspace, command), env
        raise SandboxUnavailable(
            f"unknown sandbox mode {policy.mode!r}; use bwrap, seatbelt or off"
        )

    async def _probe_bwrap(self, bwrap: str, policy: SandboxPolicy) -> None:
        """Run ``true`` in an empty sandbox once per (bwrap, network) to see that it starts.

        Raises:
            SandboxUnavailable: bwrap could not set up its namespaces (its message kept).
        """
        key = (bwrap, policy.network)
        if key in self._probed:
            return
        probe = SandboxPolicy(mode="bwrap", profile="read-only", network=policy.network)
        argv = bwrap_argv(probe, "/", {}, ["true"], bwrap=bwrap)
        output = OutputBuffer(4096)
        try:
            done = await run_process_group(
                argv, cwd="/", env={}, timeout_s=PROBE_TIMEOUT_S, sink=output.feed
            )
        except OSError as exc:
            raise SandboxUnavailable(
                f"cannot run {bwrap} ({exc.strerror or exc}); {BWRAP_INSTALL_HINT}"
            ) from exc
        if done.exit_status != 0:
            raise bwrap_failure(output.text(), bwrap=bwrap)
        self._probed.add(key)


def _describe_status(status: int | None) -> str:
    if status is None:
        return "exit status: unknown"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"exit status: {status} (killed by {name})"
    return f"exit status: {status}"


def _result(output: OutputBuffer, done: ProcessExit, timeout_s: float) -> ToolOutput:
    text = output.text() if output.total_bytes else "(no output)"
    if not text.endswith("\n"):
        text += "\n"
    if done.timed_out:
        text += (
            f"[timed out after {timeout_s:g} s: the command and its child processes were killed]\n"
        )
    text += _describe_status(done.exit_status)
    return ToolOutput(
        content=text,
        is_error=done.timed_out,
        exit_status=done.exit_status,
        full_output=output.full() if output.capped else None,
        timed_out=done.timed_out,
        produced_bytes=output.total_bytes if output.capped else None,
    )
