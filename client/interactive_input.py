"""Reading the person's message while the session's stream goes on: the prompt gives way
as soon as the daemon sends something (``Woken``), so a turn another terminal started is
shown at once, and the prompt comes back afterwards with what was typed so far."""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable
from typing import Any


class Woken(Exception):  # noqa: N818 - not an error: the prompt gave way
    """The daemon sent something while the prompt waited; ``text``: what was typed so far."""

    def __init__(self, text: str = "") -> None:
        super().__init__("the daemon sent something")
        self.text = text


def prompt_until(session: Any, wake_fd: int, default: str = "") -> str:
    """``session.prompt("› ")`` (prompt_toolkit) that gives way when ``wake_fd`` (the
    daemon's socket) becomes readable.

    Raises:
        Woken: the daemon sent something first (the prompt is erased; ``text`` is what was typed).
        EOFError, KeyboardInterrupt: Ctrl-D, Ctrl-C.
    """
    import asyncio

    from prompt_toolkit.application import get_app

    woken: list[str] = []
    loops: list[Any] = []

    def pre_run() -> None:
        loop = asyncio.get_running_loop()
        app = get_app()

        def on_readable() -> None:
            loop.remove_reader(wake_fd)
            if not woken and not app.future.done():
                woken.append(app.current_buffer.text)
                app.exit(result="")

        loop.add_reader(wake_fd, on_readable)
        loops.append(loop)

    try:
        text = session.prompt("› ", default=default, pre_run=pre_run)
    finally:
        for loop in loops:
            if not loop.is_closed():
                loop.remove_reader(wake_fd)
    if woken:
        raise Woken(woken[0])
    return str(text)


def line_reader(wake_fd: int) -> Callable[[str], str]:
    """A prompt for stdin that is not a terminal: one line at a time (read byte by byte,
    so nothing past it is taken from stdin), giving way when ``wake_fd`` is readable first.

    Raises (from the function returned):
        Woken: the daemon sent something before a whole line came.
        EOFError: stdin ended.
    """
    fd = sys.stdin.fileno()
    partial = bytearray()
    shown = [False]

    def read(default: str = "") -> str:
        if not shown[0]:
            sys.stdout.write("› ")
            sys.stdout.flush()
            shown[0] = True
        while True:
            ready, _, _ = select.select([fd, wake_fd], [], [])
            if fd in ready:
                byte = os.read(fd, 1)
                if not byte:
                    raise EOFError
                if byte != b"\n":
                    partial.extend(byte)
                    continue
                line = partial.decode("utf-8", "replace")
                partial.clear()
                shown[0] = False
                return line
            if wake_fd in ready:
                if not partial:  # the daemon's output goes on its own line; the prompt comes again
                    sys.stdout.write("\n")
                    shown[0] = False
                raise Woken("")

    return read
