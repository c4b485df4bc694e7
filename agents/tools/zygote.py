"""The helper that lives inside a warm bubblewrap sandbox and starts its commands.

``warm.py`` starts it once per sandbox policy as the PID namespace's init (``bwrap
--as-pid-1``), with this file's source in a memfd (nothing of musec need be visible in
the sandbox) and one end of a ``SOCK_SEQPACKET`` socket pair, the control socket, whose
number is ``argv[1]``. Standard library only; run as ``python3 -I -S``.

Being the namespace's init protects it: the kernel drops every signal a process of the
namespace sends it unless it has a handler, and it has one only for SIGCHLD, so neither
``pkill python3`` nor ``kill -9 -1`` in a command can stop it. Its exit kills every
process of the sandbox.

Protocol (every message is one JSON object in one datagram):

- control socket, daemon -> here: ``{"argv": [...], "env": {...}, "cwd": "..."}`` with the
  descriptors ``[stdin, stdout, stderr, sentinel, reply]`` attached (``SCM_RIGHTS``);
  ``{"payload": true}`` instead says the request is in a sixth descriptor (a memfd), for
  a request too large for one datagram. ``reply`` is a per-command ``SOCK_SEQPACKET``
  socket; ``sentinel`` becomes the command's descriptor 3 (see ``procs._start``).
- reply socket, here -> daemon: ``{"pid": N}`` (the command started, in its own session;
  N is a PID of the sandbox's namespace) or ``{"errno": E, "strerror": "..."}`` (it did
  not start), then ``{"status": S}`` (the raw wait status) once it has exited.
- reply socket, daemon -> here: ``{"signal": SIG}`` sends SIG to the command's process
  group; end of file (the daemon gave the command up) kills it.

When a command exits, what is left of it is killed before its status is sent: every
process of the sandbox when no other command runs (as the one-shot sandbox kills its
namespace), else the processes of its session and those holding its sentinel. End of
file on the control socket (the daemon is gone), or ``IDLE_EXIT_S`` without a command,
ends the helper and with it the sandbox.
"""

import json
import os
import selectors
import signal
import socket
import sys
import time

IDLE_EXIT_S = 300.0
MAX_REQUEST_BYTES = 65536
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SPAWN_SIGNALS = sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP})


def find_program(name, path):
    """The file ``execvp`` would run for ``name`` under ``PATH`` ``path``.

    Raises:
        FileNotFoundError: no such program on ``path``.
    """
    if "/" in name:
        return name
    for folder in (path or DEFAULT_PATH).split(":"):
        candidate = os.path.join(folder or ".", name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError(2, "No such file or directory", name)


def send(sock, message):
    try:
        sock.send(json.dumps(message).encode())
    except OSError:  # the daemon gave the command up
        pass


def proc_stat(pid):
    """``(state, session)`` of ``pid``, or ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0], int(fields[4])
    except (OSError, IndexError, ValueError):
        return None


def holds_socket(pid, inode):
    """Whether ``pid`` has the socket ``inode`` open."""
    target = f"socket:[{inode}]"
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    except OSError:
        pass
    return False


class Command:
    def __init__(self, pid, reply, sentinel_inode):
        self.pid = pid
        self.reply = reply
        self.sentinel_inode = sentinel_inode


class Zygote:
    def __init__(self, ctl):
        self.ctl = ctl
        self.me = os.getpid()
        self.commands = {}
        self.selector = selectors.DefaultSelector()
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.selector.register(ctl, selectors.EVENT_READ, None)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        self.idle_since = time.monotonic()

    def serve(self):
        while True:
            timeout = None if self.commands else max(0.0, self.idle_since + IDLE_EXIT_S - time.monotonic())
            events = self.selector.select(timeout)
            if not events and not self.commands and time.monotonic() - self.idle_since >= IDLE_EXIT_S:
                return
            for key, _ in events:
                if key.fileobj is self.ctl:
                    if not self.request():
                        return
                elif key.fileobj == self.wake_r:
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self.from_daemon(key.data)
            self.reap()

    def request(self):
        """Handle one datagram of the control socket; ``False`` at its end of file."""
        try:
            data, ancdata, _flags, _addr = self.ctl.recvmsg(
                MAX_REQUEST_BYTES, socket.CMSG_SPACE(8 * 4), socket.MSG_CMSG_CLOEXEC)
        except InterruptedError:
            return True
        fds = []
        for level, kind, blob in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += [int.from_bytes(blob[i:i + 4], sys.byteorder) for i in range(0, len(blob) - len(blob) % 4, 4)]
        if not data and not fds:
            return False
        try:
            message = json.loads(data)
            if message.get("payload"):
                message = json.loads(read_all(fds.pop()))
            stdin, stdout, stderr, sentinel, reply = fds
        except (ValueError, TypeError, OSError):
            for fd in fds:
                os.close(fd)
            return True
        reply_sock = socket.socket(fileno=reply)
        try:
            pid = self.spawn(message, stdin, stdout, stderr, sentinel)
        except OSError as exc:
            send(reply_sock, {"errno": exc.errno or 0, "strerror": exc.strerror or str(exc)})
            reply_sock.close()
            return True
        finally:
            sentinel_inode = os.fstat(sentinel).st_ino
            for fd in (stdin, stdout, stderr, sentinel):
                os.close(fd)
        command = Command(pid, reply_sock, sentinel_inode)
        self.commands[pid] = command
        self.selector.register(reply_sock, selectors.EVENT_READ, command)
        send(reply_sock, {"pid": pid})
        return True

    def spawn(self, message, stdin, stdout, stderr, sentinel):
        argv = [str(a) for a in message["argv"]]
        env = {str(k): str(v) for k, v in message["env"].items()}
        program = find_program(argv[0], env.get("PATH"))
        os.chdir(message["cwd"])
        try:
            return os.posix_spawn(
                program, argv, env,
                file_actions=[(os.POSIX_SPAWN_DUP2, fd, target)
                              for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2), (sentinel, 3))],
                setsid=True, setsigdef=SPAWN_SIGNALS, setsigmask=())
        finally:
            os.chdir("/")

    def from_daemon(self, command):
        """A signal request for ``command``, or the end of its reply socket."""
        try:
            data = command.reply.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the daemon gave the command up: kill it, send nothing more
            self.selector.unregister(command.reply)
            command.reply.close()
            command.reply = None
            signal_group(command.pid, signal.SIGKILL)
            return
        try:
            signal_group(command.pid, int(json.loads(data)["signal"]))
        except (ValueError, KeyError, TypeError):
            pass

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            command = self.commands.pop(pid, None)
            if command is not None:
                self.finish(command, status)

    def finish(self, command, status):
        """Kill what is left of ``command``, then send its status."""
        if not self.commands:
            try:
                os.kill(-1, signal.SIGKILL)  # as init: every process of the sandbox but this one
            except ProcessLookupError:
                pass
            self.idle_since = time.monotonic()
        else:
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) == self.me:
                    continue
                stat = proc_stat(name)
                if stat and stat[0] != b"Z" and (stat[1] == command.pid or holds_socket(name, command.sentinel_inode)):
                    try:
                        os.kill(int(name), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        if command.reply is not None:
            send(command.reply, {"status": status})
            self.selector.unregister(command.reply)
            command.reply.close()


def signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def read_all(fd):
    chunks = []
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def main():
    ctl_fd = int(sys.argv[1])
    for fd in range(3, 256):  # the memfd of this source, and anything else bwrap passed on
        if fd != ctl_fd:
            try:
                os.close(fd)
            except OSError:
                pass
    try:
        with open("/proc/self/comm", "w") as f:
            f.write("musec-sandbox")
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # no handler: as init, the signal is dropped
    ctl = socket.socket(fileno=ctl_fd)
    ctl.set_inheritable(False)
    Zygote(ctl).serve()


if __name__ == "__main__":
    main()
