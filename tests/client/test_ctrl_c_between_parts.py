"""A Ctrl-C that lands while the interactive client is between waits (showing an event of
the turn) interrupts the turn; it was taken as leaving (exit 130, seen once in a
clean-clone run, between an answered approval and the next question).

Deterministic: the client runs on a pseudo-terminal this test reads. A long answer holds
the client inside showing it (its writes block once the terminal's buffer is full, and
this test stops reading as soon as the answer starts to come); the turn itself is held by
the approval its next call needs. The Ctrl-C goes in then, as a terminal sends it (the
line discipline's SIGINT).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import shutil
import signal
import struct
import termios
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, Musec

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None and os.uname().sysname == "Linux",
                                reason="the scripted session's tool needs the sandbox")

MARK = "BIGANSWERSTARTS"


class Pty:
    """``musec`` on a pseudo-terminal of its own (its controlling terminal)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the client, with the terminal as stdin/stdout/stderr
            try:
                os.chdir(cwd)
                os.execve(argv[0], argv, {**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.seen = b""
        self.status: int | None = None

    def read_until(self, needle: bytes, timeout_s: float = 60) -> bytes:
        """Read what the client shows until ``needle`` comes; return all read so far."""
        deadline = time.monotonic() + timeout_s
        while needle not in self.seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            assert ready, f"no {needle!r} in {timeout_s} s; the terminal showed:\n{self.seen[-3000:].decode(errors='replace')}"
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the client exited and the terminal closed
                chunk = b""
            assert chunk, f"the client exited before {needle!r}:\n{self.seen[-3000:].decode(errors='replace')}"
            self.seen += chunk
        return self.seen

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait_exit(self, timeout_s: float = 60) -> int:
        """The client's exit code (what it shows is read meanwhile, so it never blocks)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            ready, _, _ = select.select([self.fd], [], [], 0.2)  # reading keeps its writes flowing
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536)
                except OSError:
                    pass
        raise AssertionError(f"the client did not exit; it showed:\n{self.seen[-3000:].decode(errors='replace')}")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


def test_a_ctrl_c_while_the_client_shows_a_turns_part_interrupts_the_turn(musec: Musec, buggy_repo: Path,
                                                                          tmp_path: Path) -> None:
    big = MARK + "\n\n" + "\n".join(f"line {n} of a long answer that fills the terminal's buffer" for n in range(6000))
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"turns": [[{"text": big}, {"tool": "bash", "input": {"command": "touch ran.txt"}}],
                                            [{"text": "never"}]]}))
    term = Pty([str(BIN / "musec"), "--model", f"scripted:{script}", "--approval", "ask", "--agents", "none"],
               musec.env, buggy_repo)
    try:
        term.read_until("›".encode())
        term.send(b"go\r")
        term.read_until(MARK.encode())  # the client is showing the answer: it cannot finish it unread
        term.send(b"\x03")  # Ctrl-C, as the terminal sends it: SIGINT to the client
        # Read again: the client finishes showing the answer and interrupts the turn.
        term.read_until("[interrupting…]".encode())
        term.read_until(b"interrupted")
        term.read_until("›".encode())
        term.send(b"/exit\r")
        assert term.wait_exit() == 0, term.seen[-3000:].decode(errors="replace")
    finally:
        term.close()
    assert not (buggy_repo / "ran.txt").exists()
    events = [json.loads(x) for x in musec("log", musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"],
                                           "--json").stdout.splitlines()]
    turn = next(e for e in events if e["type"] == "turn_ended")
    assert turn["exit_reason"] == "interrupted"
