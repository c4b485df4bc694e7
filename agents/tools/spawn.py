"""Starting a subprocess at a cost that does not grow with the daemon's memory.

Under uvloop, ``anyio.open_process`` (asyncio's ``create_subprocess_exec``) starts the
child with libuv's full ``fork()``, which copies the page tables of the whole daemon:
13.8 ms for a ``bash true`` at a small daemon, 20 ms at 107 MiB, 11x asyncio's path at
328 MiB (issue 19). CPython's ``subprocess.Popen`` uses ``vfork()`` whenever no
``preexec_fn`` and no uid/gid change is asked for (``start_new_session``, ``cwd``,
``pass_fds`` and ``close_fds`` are fine), so its cost stays flat. This module starts the
child with ``Popen`` and gives it back as an ``anyio.abc.Process`` whose pipes are read
through the event loop (non-blocking fds, ``anyio.wait_readable``) and whose exit is
awaited through a pidfd (Linux >= 5.3), on either loop.

Where ``os.pidfd_open`` is missing (macOS), ``open_process`` is ``anyio.open_process``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

__all__ = ["PipedProcess", "SpawnedProcess", "open_process"]

_READ_MAX_BYTES = 65536


async def open_process(argv: Sequence[str], *, stdin: int | None, stdout: int | None, stderr: int | None,
                       cwd: Path | str, env: Mapping[str, str], start_new_session: bool = False,
                       pass_fds: Sequence[int] = ()) -> Process:
    """Start ``argv`` like ``anyio.open_process``, through ``vfork`` where the OS allows.

    Args:
        argv: the program and its arguments.
        stdin, stdout, stderr: ``subprocess.PIPE``, ``DEVNULL``, ``STDOUT`` (stderr) or ``None``.
        cwd: the working directory.
        env: the complete environment.
        start_new_session: run the child in its own session (``setsid``).
        pass_fds: descriptors the child inherits (every other one is closed).

    Returns:
        The running process; ``aclose`` waits for it and closes its pipes.

    Raises:
        OSError: the program could not be started (not found, not executable, bad cwd).
    """
    if not hasattr(os, "pidfd_open"):  # pragma: no cover - macOS/BSD
        return await anyio.open_process(list(argv), stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd,
                                        env=dict(env), start_new_session=start_new_session, pass_fds=pass_fds)
    popen = subprocess.Popen(list(argv), stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=dict(env),
                             start_new_session=start_new_session, pass_fds=tuple(pass_fds), close_fds=True)
    try:
        pidfd = os.pidfd_open(popen.pid)
    except OSError:  # pragma: no cover - a kernel before 5.3: no pidfds
        pidfd = -1
    return SpawnedProcess(popen, pidfd)


class PipedProcess(Process):
    """What a process seen through the event loop shares, whichever way it was started
    (``SpawnedProcess`` here, ``warm.WarmProcess`` in a warm sandbox): its pipes as
    streams, ``terminate``/``kill`` through ``send_signal``, and ``aclose``. A subclass
    sets ``_stdin``, ``_stdout`` and ``_stderr`` and frees what it holds in ``_release``."""

    _stdin: ByteSendStream | None
    _stdout: ByteReceiveStream | None
    _stderr: ByteReceiveStream | None

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    @property
    def stdin(self) -> ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream | None:
        return self._stderr

    async def aclose(self) -> None:
        """Close the pipes, wait for the process (cancelled: kill it, then wait), then ``_release``."""
        for stream in (self._stdin, self._stdout, self._stderr):
            if stream is not None:
                await stream.aclose()
        try:
            await self.wait()
        except BaseException:
            self.kill()
            with anyio.CancelScope(shield=True):
                await self.wait()
            raise
        finally:
            self._release()

    def _release(self) -> None:
        """Free what the process holds once it has exited (called by ``aclose``, which may
        have been interrupted before the exit: check ``returncode``)."""


class SpawnedProcess(PipedProcess):
    """A ``subprocess.Popen`` seen through the event loop (see the module docstring).

    Args:
        popen: the started process (its pipes, if any, are made non-blocking here).
        pidfd: a pidfd of the process, or -1 to poll for its exit.
    """

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int) -> None:
        self._popen = popen
        self._pidfd = pidfd
        self._wait_lock = anyio.Lock()
        self._stdin = _PipeSend(popen.stdin) if popen.stdin else None
        self._stdout = _PipeReceive(popen.stdout) if popen.stdout else None
        self._stderr = _PipeReceive(popen.stderr) if popen.stderr else None

    async def wait(self) -> int:
        """Wait for the process to exit; its exit status (negative: killed by that signal)."""
        async with self._wait_lock:  # one waiter on the pidfd at a time
            while self._popen.poll() is None:
                if self._pidfd >= 0:
                    await anyio.wait_readable(self._pidfd)
                else:  # pragma: no cover - no pidfd
                    await anyio.sleep(0.005)
        return self._popen.returncode

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)  # a reaped process is not signalled (no pid reuse)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def _release(self) -> None:
        """Free the pidfd once the process is reaped."""
        if self._pidfd >= 0 and self._popen.returncode is not None:
            os.close(self._pidfd)
            self._pidfd = -1


class _PipeReceive(ByteReceiveStream):
    """The reading end of a child's pipe, non-blocking, read when the loop says it is readable."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._fd = pipe.fileno()
        os.set_blocking(self._fd, False)

    async def receive(self, max_bytes: int = _READ_MAX_BYTES) -> bytes:
        while True:
            if self._pipe.closed:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        if not self._pipe.closed:
            anyio.notify_closing(self._fd)
            self._pipe.close()


class _PipeSend(ByteSendStream):
    """The writing end of a child's stdin, non-blocking, written when the loop says it is writable."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._fd = pipe.fileno()
        os.set_blocking(self._fd, False)

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._pipe.closed:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view):]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        if not self._pipe.closed:
            anyio.notify_closing(self._fd)
            self._pipe.close()
