"""Esc while a turn runs: the terminal in cbreak mode (keys come one by one, Ctrl-C still
raises), watched beside the daemon's socket. Other keys are typed ahead (``TypeAhead``):
a line ended with Enter is queued as the next message, as Claude Code does."""

from __future__ import annotations

import os
import select
import sys
from typing import Any

from .connection import Connection


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
        except (OSError, ValueError):
            pass
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
