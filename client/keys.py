"""Esc while a turn runs: the terminal in cbreak mode (keys come one by one, Ctrl-C still
raises), watched beside the daemon's socket. Other keys are typed ahead (``TypeAhead``):
a line ended with Enter is queued as the next message, as Claude Code does.

The client's questions (an approval, a plan's, the workspace's trust, a home workspace)
are read the same way (``read_line``): the keys are echoed by the client, not the terminal,
so Esc is a key of its own (``EscPressed``) and never shows as ``^[``."""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable
from typing import Any

from .connection import Connection


class EscPressed(KeyboardInterrupt):
    """The person pressed Esc at a question: it means what Ctrl-C means there (interrupt
    the turn, or no), so it is a ``KeyboardInterrupt`` that says it came from Esc."""


def read_line(question: str, wake_fd: int | None = None, woken: Callable[[], bool] | None = None) -> str | None:
    """Ask ``question`` and read one line from the terminal, echoing what is typed
    (Backspace and Ctrl-U edit it; arrows and other escape sequences are ignored).

    With ``wake_fd`` (the daemon's socket), ``woken`` is called each time it becomes
    readable; when it returns True the question no longer stands and ``None`` is returned.
    Outside a terminal, a line of stdin (without the newline) is read as ``input`` does.

    Raises:
        EscPressed: Esc (alone, not the start of a key's sequence).
        KeyboardInterrupt: Ctrl-C.
        EOFError: Ctrl-D on an empty line, or stdin ended.
    """
    if not sys.stdin.isatty():
        return input(question)
    import codecs
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    decoder = codecs.getincrementaldecoder("utf-8")("ignore")
    line = ""
    _write(question)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        while True:
            watched = [fd] if wake_fd is None else [fd, wake_fd]
            ready, _, _ = select.select(watched, [], [])
            if wake_fd is not None and wake_fd in ready and woken is not None and woken():
                return None
            if fd not in ready:
                continue
            data = os.read(fd, 64)
            if not data:
                raise EOFError
            if data == b"\x1b":
                raise EscPressed
            for ch in decoder.decode(_without_sequences(data)):
                if ch in "\r\n":
                    _write("\n")
                    return line
                if ch == "\x04" and not line:
                    _write("\n")
                    raise EOFError
                if ch in "\x7f\x08" and line:
                    _write("\b \b" * _cells(line[-1]))
                    line = line[:-1]
                elif ch == "\x15":  # Ctrl-U
                    _write("\b \b" * sum(map(_cells, line)))
                    line = ""
                elif ch.isprintable():
                    line += ch
                    _write(ch)
    finally:
        try:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        except termios.error:
            pass  # the terminal is gone (hung up): nothing to give back


def discard_typeahead() -> str:
    """Take what was typed and not read yet (a line still being edited too) and drop it;
    return it ("" outside a terminal, where nothing is dropped).

    Called before a question is shown, and when one is withdrawn: keys typed before a
    question appeared were meant for something else (the question before it, answered in
    another terminal meanwhile), so they never answer it (G2)."""
    if not sys.stdin.isatty():
        return ""
    import termios
    import tty

    fd = sys.stdin.fileno()
    taken = b""
    try:
        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd, termios.TCSANOW)  # a line being edited becomes readable
        try:
            while select.select([fd], [], [], 0)[0]:
                data = os.read(fd, 4096)
                if not data:
                    break
                taken += data
            termios.tcflush(fd, termios.TCIFLUSH)
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)
    except (OSError, ValueError, termios.error):
        return taken.decode("utf-8", "ignore")
    return _without_sequences(taken).decode("utf-8", "ignore")


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _cells(ch: str) -> int:
    """The columns a character takes (East Asian wide ones take two)."""
    import unicodedata

    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def _without_sequences(data: bytes) -> bytes:
    """``data`` without the escape sequences of keys such as the arrows (``ESC [ A``,
    ``ESC O P``, ``ESC`` + a key for Alt)."""
    import re

    return re.sub(rb"\x1b(\[[0-?]*[ -/]*[@-~]|O.|.)?", b"", data, flags=re.S)


class TypeAhead:
    """What the person types while the agent works: the line being typed, and the lines
    ended with Enter (queued: sent as one message when the agent is idle)."""

    def __init__(self) -> None:
        self.line = ""
        self.queued: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        """Take keys (no escape sequences: arrows and the like are dropped); return the
        lines this completed (Enter), which are queued."""
        done = []
        for ch in data.decode("utf-8", "ignore"):
            if ch in "\r\n":
                if self.line.strip():
                    done.append(self.line.strip())
                self.line = ""
            elif ch in "\x7f\x08":
                self.line = self.line[:-1]
            elif ch == "\x15":  # Ctrl-U
                self.line = ""
            elif ch.isprintable():
                self.line += ch
        self.queued.extend(done)
        return done

    def take(self) -> tuple[list[str], str]:
        """The queued lines and the line being typed; both are then empty."""
        queued, line = self.queued, self.line
        self.queued, self.line = [], ""
        return queued, line


class EscWatch:
    """Watches the terminal for a lone Esc while waiting for the daemon; other keys go to
    ``ahead`` (``on_line`` is called with each line queued).

    Outside a terminal it does nothing (``wait`` returns False at once).
    """

    def __init__(self) -> None:
        self._saved: Any = None
        self.ahead = TypeAhead()
        self.on_line: Any = None

    def on(self) -> bool:
        """Put the terminal in cbreak mode (no echo, no line buffering); False when stdin
        is not a terminal."""
        if self._saved is not None:
            return True
        try:
            if not sys.stdin.isatty():
                return False
            import termios
            import tty

            fd = sys.stdin.fileno()
            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd, termios.TCSANOW)  # not TCSAFLUSH: keys typed just before are kept
            return True
        except (OSError, ValueError, ImportError):
            self._saved = None
            return False

    def off(self) -> None:
        """Give the terminal back as it was (before a question, and after the turn)."""
        if self._saved is None:
            return
        import termios

        try:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._saved)
        except (OSError, ValueError, termios.error):
            pass  # the terminal is gone (hung up): nothing to give back
        self._saved = None

    def wait(self, conn: Connection, tick: Any = None, every_s: float = 0.1) -> bool:
        """Block until the daemon has sent something (False) or the person pressed Esc (True);
        other keys are typed ahead (``ahead``). ``tick`` is called every ``every_s``
        seconds meanwhile (the spinner is drawn on this thread, never on another)."""
        if conn.pending() or not self.on():
            return False
        fd = sys.stdin.fileno()
        while True:
            ready, _, _ = select.select([conn.sock, fd], [], [], every_s if tick is not None else None)
            if not ready:
                tick()
                continue
            if conn.sock in ready:
                return False
            data = os.read(fd, 64)
            if not data:  # the terminal went away: the daemon's messages still come
                return False
            if data == b"\x1b":
                return True
            if not data.startswith(b"\x1b"):
                for line in self.ahead.feed(data):
                    if self.on_line is not None:
                        self.on_line(line)
