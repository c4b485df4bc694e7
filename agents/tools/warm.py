"""Warm bubblewrap sandboxes: one long-lived sandbox per policy runs many commands.

Setting up bubblewrap's namespaces and mounts costs about 9 ms a command (bubblewrap
0.8), most of a sandboxed ``bash true`` (issue 19, "Performance"). Here the daemon
starts one sandbox per distinct set of mount and namespace arguments, with
``zygote.py`` inside as the sandbox's init, and each command of that policy is started by
it (``posix_spawn``, its own session) instead of by a new ``bwrap``. What a command sees
is what the one-shot sandbox shows it (the same mounts, masks, read-only paths, network,
environment and working directory, which travel with each command), except that the
sandbox's private ``/tmp`` lasts from one command to the next of the same sandbox.

The registry's key is the bubblewrap arguments plus the identity (device, inode) of every
path they name, so a masked file replaced on disk, a new deny rule or a writable root
that appeared gives a new sandbox: a bind mount holds the inode it was made with.

``MUSEC_SANDBOX_WARM=0`` turns warm sandboxes off (every command gets a fresh bwrap).
Where one cannot start, the command runs the one-shot way, and warming that policy is
tried again after ``COLD_RETRY_S``.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from .sandbox import DEFAULT_PATH, _system_python
from .spawn import PipedProcess, _PipeReceive, _PipeSend

__all__ = ["MAX_WARM", "WarmProcess", "open_warm", "shutdown", "split_bwrap_argv", "warm_enabled"]

MAX_WARM = 8
"""Warm sandboxes kept at most; past it the least recently used idle one is closed."""

COLD_RETRY_S = 60.0
"""After a warm sandbox failed to start, seconds before that policy is warmed again."""

START_TIMEOUT_S = 30.0
"""How long a first command waits for a new sandbox to answer before running one-shot."""

_INLINE_MAX_BYTES = 32768
_FLAGS = frozenset({"--die-with-parent", "--new-session", "--unshare-user", "--unshare-pid",
                    "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup", "--as-pid-1"})
_ONE_PATH = frozenset({"--dev", "--proc", "--tmpfs", "--dir", "--remount-ro"})
_TWO_PATHS = frozenset({"--bind", "--ro-bind", "--bind-try", "--ro-bind-try", "--dev-bind", "--dev-bind-try"})
_ONE_VALUE = frozenset({"--cap-drop", "--cap-add"})


def warm_enabled() -> bool:
    """Whether warm sandboxes are on (``MUSEC_SANDBOX_WARM`` is not ``0``; Linux only)."""
    return sys.platform.startswith("linux") and os.environ.get("MUSEC_SANDBOX_WARM", "1").strip() != "0"


@dataclass(frozen=True)
class BwrapSplit:
    """A bubblewrap argv taken apart: what makes the sandbox, and what is per command."""

    bwrap: str
    sandbox_args: tuple[str, ...]
    paths: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    command: tuple[str, ...]


def split_bwrap_argv(argv: Sequence[str]) -> BwrapSplit | None:
    """Split an argv of ``sandbox.bwrap_argv`` into sandbox arguments and the command.

    Returns:
        The parts; ``None`` when the argv holds an option not known here, no
        ``--clearenv``, no ``--unshare-pid`` or no command (such an argv runs one-shot).
    """
    args: list[str] = []
    paths: list[str] = []
    env: dict[str, str] = {}
    cwd, cleared, i = "/", False, 1
    while i < len(argv):
        opt = argv[i]
        if opt == "--":
            command = tuple(argv[i + 1:])
            if not (cleared and command and "--unshare-pid" in args):
                return None
            return BwrapSplit(argv[0], tuple(args), tuple(paths), env, cwd, command)
        if opt == "--clearenv":
            cleared, i = True, i + 1
        elif opt == "--setenv" and i + 2 < len(argv):
            env[argv[i + 1]] = argv[i + 2]
            i += 3
        elif opt == "--chdir" and i + 1 < len(argv):
            cwd, i = argv[i + 1], i + 2
        elif opt in _FLAGS:
            args.append(opt)
            i += 1
        elif opt in _ONE_PATH and i + 1 < len(argv):
            args += argv[i:i + 2]
            paths.append(argv[i + 1])
            i += 2
        elif opt in _TWO_PATHS and i + 2 < len(argv):
            args += argv[i:i + 3]
            paths += argv[i + 1:i + 3]
            i += 3
        elif opt in _ONE_VALUE and i + 1 < len(argv):
            args += argv[i:i + 2]
            i += 2
        else:
            return None
    return None


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _key(split: BwrapSplit) -> tuple[object, ...]:
    return split.bwrap, split.sandbox_args, tuple(_identity(p) for p in split.paths)


@cache
def _zygote_source() -> bytes:
    return Path(__file__).with_name("zygote.py").read_bytes()


class _Sandbox:
    """One warm sandbox: the bwrap process and the daemon's end of its control socket."""

    def __init__(self, split: BwrapSplit) -> None:
        ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        memfd = os.memfd_create("musec-zygote")
        try:
            os.write(memfd, _zygote_source())
            flags = [] if "--as-pid-1" in split.sandbox_args else ["--as-pid-1"]
            bash = "/bin/bash" if os.access("/bin/bash", os.X_OK) else "bash"
            argv = [split.bwrap, *split.sandbox_args, *flags, "--clearenv", "--setenv", "PATH", DEFAULT_PATH,
                    "--chdir", "/", "--", bash, "-c", 'exec -a musec-sandbox "$0" "$@"',
                    _system_python(), "-I", "-S", f"/proc/self/fd/{memfd}", str(child.fileno())]
            self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, pass_fds=(child.fileno(), memfd),
                                          start_new_session=True, close_fds=True, env={"PATH": DEFAULT_PATH})
        except BaseException:
            ctl.close()
            raise
        finally:
            child.close()
            os.close(memfd)
        ctl.setblocking(False)
        self.ctl = ctl
        self.running = 0
        self.served = False

    @property
    def alive(self) -> bool:
        return self.ctl.fileno() >= 0 and self.popen.poll() is None

    def close(self) -> None:
        """Close the control socket: the sandbox's init exits, and every process in it dies.
        The bwrap process is reaped by a later ``_acquire`` (or ``shutdown``)."""
        self.ctl.close()
        if self.popen.poll() is None:
            _closing.append(self.popen)


_sandboxes: OrderedDict[tuple[object, ...], _Sandbox] = OrderedDict()
_cold_until: dict[tuple[object, ...], float] = {}
_closing: list[subprocess.Popen[bytes]] = []
"""bwrap processes of closed sandboxes not yet reaped."""


def _acquire(key: tuple[object, ...], split: BwrapSplit) -> _Sandbox | None:
    """The warm sandbox for ``key``, started if need be; ``None``: run one-shot."""
    _closing[:] = [p for p in _closing if p.poll() is None]
    for old_key, box in list(_sandboxes.items()):
        if not box.alive:
            del _sandboxes[old_key]
            box.close()
    now = time.monotonic()
    for old_key, until in list(_cold_until.items()):
        if until <= now:
            del _cold_until[old_key]
    if key in _cold_until:
        return None
    box = _sandboxes.get(key)
    if box is not None:
        _sandboxes.move_to_end(key)
        return box
    while len(_sandboxes) >= MAX_WARM:
        idle = next((k for k, b in _sandboxes.items() if b.running == 0), None)
        if idle is None:
            return None
        _sandboxes.pop(idle).close()
    if not _sandboxes and not _closing:
        atexit.unregister(shutdown)
        atexit.register(shutdown)
    try:
        box = _Sandbox(split)
    except OSError:
        _cold_until[key] = now + COLD_RETRY_S
        return None
    _sandboxes[key] = box
    return box


def _drop(key: tuple[object, ...], box: _Sandbox, *, cold: bool) -> None:
    if _sandboxes.get(key) is box:
        del _sandboxes[key]
    box.close()
    if cold:
        _cold_until[key] = time.monotonic() + COLD_RETRY_S


def shutdown(timeout_s: float = 2.0) -> None:
    """Close every warm sandbox (their processes die with them) and reap their bwrap
    processes, waiting at most ``timeout_s`` seconds in all."""
    while _sandboxes:
        _sandboxes.popitem()[1].close()
    _cold_until.clear()
    deadline = time.monotonic() + timeout_s
    for popen in _closing:
        try:
            popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    _closing[:] = [p for p in _closing if p.poll() is None]


async def open_warm(argv: Sequence[str], *, stdin: int | None, stdout: int | None, stderr: int | None,
                    pass_fds: Sequence[int] = ()) -> WarmProcess | None:
    """Start the command of the bubblewrap ``argv`` in a warm sandbox of the same policy.

    Args:
        argv: an argv of ``sandbox.bwrap_argv``.
        stdin: ``subprocess.PIPE`` or ``subprocess.DEVNULL``.
        stdout: ``subprocess.PIPE``.
        stderr: ``subprocess.PIPE`` or ``subprocess.STDOUT``.
        pass_fds: at most one descriptor (the sentinel), given to the command as fd 3.

    Returns:
        The running command, or ``None`` when it should run one-shot (warm sandboxes off,
        an argv not understood, a sandbox that would not start, all ``MAX_WARM`` busy).

    Raises:
        OSError: the sandbox could not start the program (missing, not executable, a
            working directory that is gone), as ``subprocess.Popen`` raises it.
    """
    if not warm_enabled() or len(pass_fds) > 1:
        return None
    split = split_bwrap_argv(argv)
    if split is None:
        return None
    key = _key(split)
    for _attempt in range(2):
        box = _acquire(key, split)
        if box is None:
            return None
        process = WarmProcess(box, stdin=stdin, stderr=stderr)
        try:
            started = await process._start(split, pass_fds[0] if pass_fds else None)
        except BaseException:
            process._close_all()
            raise
        if started:
            box.served = True
            return process
        process._close_all()
        _drop(key, box, cold=not box.served)  # a sandbox that once worked (idle exit, killed) is restarted once
        if not box.served:
            return None
    return None


class WarmProcess(PipedProcess):
    """A command running in a warm sandbox, seen as an ``anyio.abc.Process``.

    ``pid`` is the command's PID inside the sandbox's PID namespace: signal it with
    ``signal_group`` (the daemon cannot ``killpg`` it). ``returncode`` follows the
    one-shot sandbox: an exit code, ``128 + N`` for a command that died of signal N by
    itself, ``-N`` once the daemon has signalled it.
    """

    def __init__(self, box: _Sandbox, *, stdin: int | None, stderr: int | None) -> None:
        self._box = box
        self._pid = -1
        self._returncode: int | None = None
        self._signalled = False
        self._counted = False
        self._wait_lock = anyio.Lock()
        self._reply, self._reply_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._reply.setblocking(False)
        self._to_close: list[int] = []
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self._stdout: ByteReceiveStream = _PipeReceive(open(out_r, "rb", buffering=0))
        self._stderr: ByteReceiveStream | None = None
        self._stdin: ByteSendStream | None = None
        self._child_fds = [out_w, out_w]
        if stderr == subprocess.PIPE:
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            self._stderr = _PipeReceive(open(err_r, "rb", buffering=0))
            self._child_fds[1] = err_w
        if stdin == subprocess.PIPE:
            in_r, in_w = os.pipe2(os.O_CLOEXEC)
            self._stdin = _PipeSend(open(in_w, "wb", buffering=0))
            self._child_fds.insert(0, in_r)
        else:
            self._child_fds.insert(0, os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))

    async def _start(self, split: BwrapSplit, sentinel: int | None) -> bool:
        """Ask the sandbox to start the command; ``False`` when the sandbox is gone."""
        request = json.dumps({"argv": split.command, "env": split.env, "cwd": split.cwd}).encode()
        fds = [*self._child_fds, sentinel if sentinel is not None else self._child_fds[0], self._reply_child.fileno()]
        if len(request) > _INLINE_MAX_BYTES:
            payload = os.memfd_create("musec-request")
            self._to_close.append(payload)
            os.write(payload, request)
            request, fds = b'{"payload": true}', [*fds, payload]
        self._box.running += 1
        self._counted = True
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                while True:
                    try:
                        self._box.ctl.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                           b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds))])
                        break
                    except BlockingIOError:
                        await anyio.sleep(0.001)  # the control socket is full: rare, and shared
                    except OSError:
                        return False
                self._close_child_fds()
                reply = await self._receive()
        except TimeoutError:
            return False
        finally:
            self._close_child_fds()
        if reply is None:
            return False
        if "errno" in reply:
            self._uncount()
            raise OSError(int(reply["errno"]), str(reply.get("strerror", "")))
        self._pid = int(reply["pid"])
        return True

    def _close_child_fds(self) -> None:
        for fd in dict.fromkeys(self._child_fds + self._to_close):
            os.close(fd)
        self._child_fds, self._to_close = [], []
        if self._reply_child.fileno() >= 0:
            self._reply_child.close()

    def _uncount(self) -> None:
        if self._counted:
            self._counted = False
            self._box.running -= 1

    def _close_all(self) -> None:
        self._close_child_fds()
        self._uncount()
        self._reply.close()
        for stream in (self._stdout, self._stderr, self._stdin):
            if stream is not None:
                stream._pipe.close()  # type: ignore[attr-defined]

    async def _receive(self) -> dict[str, object] | None:
        """The next message of the reply socket; ``None`` at its end (the sandbox is gone)."""
        while True:
            try:
                data = self._reply.recv(4096)
            except BlockingIOError:
                await anyio.wait_readable(self._reply)
                continue
            except OSError:
                return None
            return json.loads(data) if data else None

    async def wait(self) -> int:
        """Wait for the command to exit; its status (see the class docstring)."""
        async with self._wait_lock:
            while self._returncode is None:
                message = await self._receive()
                if message is None:  # the sandbox died under the command
                    self._returncode = -signal.SIGKILL
                elif "status" in message:
                    raw = int(message["status"])  # type: ignore[call-overload]
                    if os.WIFSIGNALED(raw):
                        sig = os.WTERMSIG(raw)
                        self._returncode = -sig if self._signalled else 128 + sig
                    else:
                        self._returncode = os.waitstatus_to_exitcode(raw)
                if self._returncode is not None:
                    self._uncount()
        return self._returncode

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the command's process group (nothing once it has exited)."""
        if self._returncode is not None or self._reply.fileno() < 0:
            return
        self._signalled = True
        try:
            self._reply.send(json.dumps({"signal": int(sig)}).encode())
        except OSError:
            pass

    def send_signal(self, signal: int) -> None:
        self.signal_group(signal)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def _release(self) -> None:
        """Close the reply socket once the command's status is in."""
        if self._returncode is not None:
            self._reply.close()
