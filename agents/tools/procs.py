"""Running a tool's subprocess in its own session, with a deadline and a kill that sticks.

The process gets closed stdin, stdout and stderr merged into one pipe, and its own
session (so its process group id is its pid). On timeout or cancellation the whole group
gets SIGTERM, ``kill_grace_s`` seconds, then SIGKILL; cancellation is re-raised. When the
main process exits, what is left of its group (``cmd &``) is killed so it can neither
hold the call open through the pipe nor outlive it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from .spawn import open_process

__all__ = ["OutputBuffer", "ProcessExit", "run_process_group"]

DEFAULT_KEEP_MAX_BYTES = 32 * 1024 * 1024
"""``OutputBuffer`` keeps at most this much of a stream in memory (head and tail halves)."""

DRAIN_TIMEOUT_S = 2.0
"""After the process group is gone, how long to wait for the pipe to reach end of file
(a process that left the group may still hold it)."""


class OutputBuffer:
    """Collects a stream; renders it capped to ``max_bytes`` keeping its head and tail.

    At most ``keep_max_bytes`` are held in memory (the first and last halves), so
    ``full()`` is the whole stream whenever it was no longer than that.

    Args:
        max_bytes: the cap on ``text()`` (bytes of the stream shown; the marker is extra).
        keep_max_bytes: the cap on memory held, at least ``2 * max_bytes``.
    """

    def __init__(self, max_bytes: int, keep_max_bytes: int = DEFAULT_KEEP_MAX_BYTES):
        self.max_bytes = max(1, max_bytes)
        self._half = max(keep_max_bytes // 2, self.max_bytes)
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self.total_bytes = 0

    def feed(self, chunk: bytes) -> None:
        """Append ``chunk`` to the stream."""
        self.total_bytes += len(chunk)
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail.append(chunk)
            self._tail_bytes += len(chunk)
            while self._tail_bytes - len(self._tail[0]) >= self._half:
                self._tail_bytes -= len(self._tail.popleft())

    @property
    def capped(self) -> bool:
        """Whether the stream is longer than ``max_bytes``."""
        return self.total_bytes > self.max_bytes

    def _last(self, n: int) -> bytes:
        tail = b"".join(self._tail)
        return tail[-n:] if len(tail) >= n else (bytes(self._head) + tail)[-n:]

    def text(self) -> str:
        """The stream as text (UTF-8; a byte that is not UTF-8 as ``\\xNN``, as tools show
        file names), capped with an omission marker."""
        if not self.capped:
            return (bytes(self._head) + b"".join(self._tail)).decode("utf-8", errors="backslashreplace")
        head_n = self.max_bytes // 2
        tail_n = self.max_bytes - head_n
        omitted = self.total_bytes - head_n - tail_n
        head = bytes(self._head[:head_n]).decode("utf-8", errors="backslashreplace")
        tail = self._last(tail_n).decode("utf-8", errors="backslashreplace")
        return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}"

    def full(self) -> bytes:
        """The whole stream, or its kept head and tail with a marker when it was longer."""
        tail = b"".join(self._tail)
        dropped = self.total_bytes - len(self._head) - len(tail)
        if dropped == 0:
            return bytes(self._head) + tail
        return bytes(self._head) + f"\n[... {dropped} bytes omitted ...]\n".encode() + tail


@dataclass(frozen=True)
class ProcessExit:
    """How a process ended: its exit status (negative: killed by that signal), and whether
    it was killed for running past its timeout."""

    exit_status: int | None
    timed_out: bool


def _signal_group(process: Process, sig: int) -> None:
    """Send ``sig`` to the process group of ``process`` (a warm sandbox's command through
    its sandbox: its PID is one of the sandbox's namespace)."""
    signal_group = getattr(process, "signal_group", None)
    if signal_group is not None:
        signal_group(sig)
        return
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_for_eof(sock: socket.socket) -> None:
    """Wait until every holder of the peer of ``sock`` has closed it (or exited)."""
    wait_readable = getattr(anyio, "wait_readable", None) or anyio.wait_socket_readable
    while True:
        await wait_readable(sock)
        try:
            if not sock.recv(4096):
                return
        except BlockingIOError:
            continue
        except OSError:
            return


async def _discard(stream: ByteReceiveStream | None) -> None:
    """Read ``stream`` to its end, dropping the data."""
    if stream is None:
        return
    try:
        async for _ in stream:
            pass
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass


async def _feed_stdin(process: Process, data: bytes) -> None:
    """Write ``data`` to the process's stdin and close it; a reader that exits early is fine."""
    assert process.stdin is not None
    try:
        async with process.stdin:
            await process.stdin.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


async def _terminate_group(process: Process, kill_grace_s: float) -> None:
    """SIGTERM the process group, wait up to ``kill_grace_s``, then SIGKILL it."""
    _signal_group(process, signal.SIGTERM)
    with anyio.move_on_after(kill_grace_s):
        await process.wait()
        return
    _signal_group(process, signal.SIGKILL)
    await process.wait()


async def run_process_group(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout_s: float,
    sink: Callable[[bytes], bool | None],
    stderr_sink: Callable[[bytes], object] | None = None,
    kill_grace_s: float = 2.0,
    stdin_data: bytes | None = None,
    warm: bool = False,
) -> ProcessExit:
    """Run ``argv`` in a new session, feeding its output to ``sink``.

    Args:
        argv: the program and its arguments.
        cwd: the working directory.
        env: the complete environment.
        timeout_s: seconds before the process group is terminated.
        sink: called with each chunk of output; returning ``False`` says it wants no more,
            and the process group is killed (the result is then not a timeout).
        stderr_sink: called with each chunk of stderr; when ``None``, stderr is merged
            into stdout (one pipe, so the two keep their relative order).
        kill_grace_s: seconds between SIGTERM and SIGKILL.
        stdin_data: written to the process's stdin, which is then closed (default: stdin
            is ``/dev/null``). A process that does not read it all is not waited for.
        warm: ``argv`` is a bubblewrap argv (``sandbox.bwrap_argv``) whose command may run
            in a warm sandbox of the same policy (``warm.open_warm``); else, or where none
            can start, bwrap runs as usual.

    Returns:
        The exit status and whether the deadline was hit.

    Raises:
        OSError: the program could not be started.
    """
    process, sentinel = await _start(argv, cwd, env, merge_stderr=stderr_sink is None, pipe_stdin=stdin_data is not None, warm=warm)
    timed_out = False
    try:
        streams = [(process.stdout, sink)]
        if stderr_sink is not None:
            streams.append((process.stderr, stderr_sink))
        eofs = [anyio.Event() for _ in streams]
        async with anyio.create_task_group() as tg:
            for (stream, feed), eof in zip(streams, eofs, strict=True):
                assert stream is not None
                tg.start_soon(_pump, process, stream, feed, eof)
            if stdin_data is not None:
                tg.start_soon(_feed_stdin, process, stdin_data)
            with anyio.move_on_after(timeout_s) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                await _terminate_group(process, kill_grace_s)
            _signal_group(process, signal.SIGKILL)  # what is left, e.g. `cmd &`
            with anyio.move_on_after(DRAIN_TIMEOUT_S):
                for eof in eofs:
                    await eof.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _clean_up(process, sentinel, kill_grace_s)
    return ProcessExit(exit_status=process.returncode, timed_out=timed_out)


async def _start(argv: Sequence[str], cwd: Path | str, env: Mapping[str, str], *,
                 merge_stderr: bool, pipe_stdin: bool, warm: bool = False) -> tuple[Process, socket.socket]:
    """Start ``argv`` in a new session; return it and the sentinel socket whose end of
    file says every descendant has exited.

    Raises:
        OSError: the program could not be started.
    """
    # Every descendant inherits the child end of this socket pair unless it closes it, so
    # its end of file says they have all exited, even those that redirected stdout.
    sentinel, child_end = socket.socketpair()
    stdin = subprocess.PIPE if pipe_stdin else subprocess.DEVNULL
    stderr = subprocess.STDOUT if merge_stderr else subprocess.PIPE
    try:
        process: Process | None = None
        if warm:
            from .warm import open_warm

            process = await open_warm(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr,
                                      pass_fds=(child_end.fileno(),))
        if process is None:
            process = await open_process(  # vfork, not uvloop's fork of the whole daemon
                list(argv),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                pass_fds=(child_end.fileno(),),
            )
    except BaseException:
        sentinel.close()
        raise
    finally:
        child_end.close()
    sentinel.setblocking(False)
    return process, sentinel


async def _pump(process: Process, stream: ByteReceiveStream, feed: Callable[[bytes], object],
                eof: anyio.Event) -> None:
    """Feed ``stream`` to ``feed`` until its end (or ``feed`` returns False: the group is killed)."""
    try:
        async for chunk in stream:
            if feed(chunk) is False:
                _signal_group(process, signal.SIGKILL)
                break
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        eof.set()


async def _clean_up(process: Process, sentinel: socket.socket, kill_grace_s: float) -> None:
    """Kill what is left of the group, wait for every holder of the pipes and the sentinel
    to go (bounded by ``DRAIN_TIMEOUT_S``), and release the process. Run shielded."""
    if process.returncode is None:
        await _terminate_group(process, kill_grace_s)
    _signal_group(process, signal.SIGKILL)
    with anyio.move_on_after(DRAIN_TIMEOUT_S):
        # Processes outside the group (a sandbox's own session) die with their
        # parent but not at once; the end of file of the pipes says they are gone.
        for stream in (process.stdout, process.stderr):
            await _discard(stream)
        await _wait_for_eof(sentinel)
    sentinel.close()
    await process.aclose()
