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

_GONE_ERRNOS = (5, 32)  # EIO (a terminal hung up), EPIPE (the reader of a pipe went away)


def output_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says the terminal (or pipe) the client writes to is gone: a write
    or a terminal setting failing with EIO or EPIPE (``termios.error`` is not an
    ``OSError``; its first argument is the errno)."""
    import termios

    if isinstance(exc, OSError):
        return exc.errno in _GONE_ERRNOS
    return isinstance(exc, termios.error) and bool(exc.args) and exc.args[0] in _GONE_ERRNOS


def silence_gone_terminal() -> bool:
    """Point stdin, stdout and stderr at /dev/null where they are a terminal that hung up
    (or a pipe whose reader left): a write of nothing to it fails with EIO (EPIPE). Later
    writes (an unwinding live display, a note, the flush at exit) then go nowhere instead
    of raising, so nothing is written to the dead terminal and no such write ends the
    client before it has told the daemon (fresh-user s8 J10). True when one was gone."""
    import os
    import stat

    gone = []
    for fd in (1, 2, 0):
        try:
            os.write(fd, b"")
        except OSError as exc:
            if exc.errno in _GONE_ERRNOS:
                gone.append(fd)
            continue
        if fd != 0 and _reader_left(fd):
            gone.append(fd)
    if 1 in gone or 2 in gone:  # stdin on the same terminal is gone with it (it may be read-only: EBADF)
        try:
            if stat.S_ISCHR(os.fstat(0).st_mode) and not os.isatty(0):
                gone.append(0)  # a character device that no longer answers as a terminal: the hung-up one
        except OSError:
            pass
    if not gone:
        return False
    null = os.open(os.devnull, os.O_RDWR)
    for fd in set(gone):
        os.dup2(null, fd)
    os.close(null)
    return True


def _reader_left(fd: int) -> bool:
    """Whether ``fd`` is a pipe whose reader has closed it (``musec run ... | head`` once
    head is done): a write of nothing to a pipe succeeds whatever, but poll says POLLERR."""
    import os
    import select
    import stat

    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(revents & select.POLLERR for _, revents in poller.poll(0))
    except OSError:
        return False


def stop_cause(exc: BaseException) -> int | None:
    """The signal that stops the client, where ``exc`` comes of one: a ``Terminated`` (or
    an error raised while one unwound: a ``finally`` that wrote to the gone terminal), or
    the terminal found gone by a failing write before its SIGHUP came (the kernel makes the
    terminal fail first, then signals: taken as that SIGHUP, which is then ignored, and the
    terminal silenced; so is a pipe on stdout whose reader left: the output is gone). ``None``: an error of another kind."""
    seen = exc
    while seen is not None:
        if isinstance(seen, Terminated):
            return seen.signum
        seen = seen.__context__
    if output_gone(exc) and silence_gone_terminal():  # not a socket's EPIPE: a standard stream is gone
        after_stop_signal()
        return int(signal.SIGHUP)
    return None


def after_stop_signal() -> None:
    """What a second stop signal does once the client is stopping: SIGTERM kills at once,
    as the default does; a SIGHUP is ignored, as it carries nothing new (the terminal is
    gone; a shell also passes its own hang-up on to its jobs, so one closing brings two)
    and must not kill the client before it has interrupted its turn."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@contextmanager
def stop_signals_raise() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``Terminated`` in the main thread, so the client
    can tell the daemon what to do with the turn it drives before it exits (fresh-user G16:
    by default the process died and the turn ran on). A terminal that hung up is silenced
    first (``silence_gone_terminal``). A second SIGTERM kills at once, as the default does;
    a second SIGHUP is ignored (``after_stop_signal``). Outside the main thread it does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        after_stop_signal()
        silence_gone_terminal()
        raise Terminated(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
