"""Esc while a turn runs: the terminal in cbreak mode (keys come one by one, Ctrl-C still
raises), watched beside the daemon's socket."""

from __future__ import annotations

import os
import select
import sys
from typing import Any

from .connection import Connection


class EscWatch:
    """Watches the terminal for a lone Esc while waiting for the daemon.

    Outside a terminal it does nothing (``wait`` returns False at once).
    """

    def __init__(self) -> None:
        self._saved: Any = None

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
            tty.setcbreak(fd)
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

    def wait(self, conn: Connection) -> bool:
        """Block until the daemon has sent something (False) or the person pressed Esc (True);
        other keys are dropped."""
        if conn.pending() or not self.on():
            return False
        fd = sys.stdin.fileno()
        while True:
            ready, _, _ = select.select([conn.sock, fd], [], [])
            if conn.sock in ready:
                return False
            data = os.read(fd, 64)
            if not data:  # the terminal went away: the daemon's messages still come
                return False
            if data == b"\x1b":
                return True
