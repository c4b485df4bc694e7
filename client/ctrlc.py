"""Ctrl-C in the interactive client while the agent works: an interrupt of the turn, wherever
it lands.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be. The client waits
for the daemon or the person at a few places (``waiting``): a Ctrl-C there is caught and
interrupts the turn. Elsewhere (showing an event, sending an answer, between a turn's
parts) it escaped as leaving the client (exit 130), or tore a frame half sent. While the
session is busy (``busy``, from the daemon's events), a Ctrl-C outside ``waiting`` is kept
instead and raised at the next ``waiting``, where it is caught. When the session is idle a
Ctrl-C raises at once, as before (at the prompt: clear the line, or leave).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class CtrlC:
    """The interactive client's SIGINT handling (one per process: ``CTRL_C``).

    Attributes:
        pending: Ctrl-Cs kept while busy, not yet raised (two at most: the first interrupts
            the turn, a second leaves, as two pressed at a ``waiting`` place do).
    """

    def __init__(self) -> None:
        self.pending = 0
        self._waiting = 0
        self._busy: list[Callable[[], bool]] = []

    @contextmanager
    def while_busy(self, busy: Callable[[], bool]) -> Iterator[None]:
        """Keep a Ctrl-C that lands outside ``waiting`` while ``busy()`` (the session works)
        for the next ``waiting``. Outside the main thread it does nothing (signals go to the
        main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous: Any = signal.getsignal(signal.SIGINT)
        self._busy.append(busy)
        signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield
        finally:
            self._busy.pop()
            signal.signal(signal.SIGINT, previous)
            if not self._busy:
                self.pending = 0

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """A place where the client waits for the daemon or the person and catches
        ``KeyboardInterrupt``: a Ctrl-C kept since is raised on entering, one that comes
        while here is raised at once.

        Raises:
            KeyboardInterrupt: a Ctrl-C, kept or new.
        """
        if self.pending:
            self.pending -= 1
            raise KeyboardInterrupt
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1

    def forget(self) -> None:
        """Drop a kept Ctrl-C: the turn it was meant for ended before it was taken."""
        self.pending = 0

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._waiting or not (self._busy and self._busy[-1]()):
            raise KeyboardInterrupt
        self.pending = min(self.pending + 1, 2)


CTRL_C = CtrlC()
"""The process's Ctrl-C handling (a signal handler is per process)."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP (the terminal closed) reached the client: ``signum`` says which.
    A ``BaseException``, as ``KeyboardInterrupt`` is, so no guard for errors catches it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_signals_raise() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``Terminated`` in the main thread, so the client
    can tell the daemon what to do with the turn it drives before it exits (fresh-user G16:
    by default the process died and the turn ran on). A second one kills at once, as the
    default does. Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_DFL)
        raise Terminated(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
