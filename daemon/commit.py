"""Group commit of a session's log: fsyncs off the event loop, shared by the events that
arrive together (issue 19 part 4).

A write-ahead event (DESIGN §5 rule 2, ``persistence``: a tool starting, a person's
message, an approval asked or answered, a spawn, the session's start and end...) must be
on disk before the effect it announces: the tool runs, the file is written, the model is
asked, the clients are told. The fsync used to run inside ``EventLog.append`` on the event
loop, so every session and every attached client waited for each one. Now ``append``
writes the line at once and whoever starts an effect awaits ``GroupCommit.durable()``
first: the first waiter fsyncs in a worker thread; events appended meanwhile (other
agents' calls, workers, background roles, a client's approval) wait for the next fsync,
which covers them all. The session (``daemon.session``) holds what it sends to clients
behind the first event not yet durable, and a committer task fsyncs soon after any
write-ahead event even when no one awaits it.

Ordering is unchanged: lines reach the file in ``seq`` order as before, an fsync makes
every line before it durable too, and nothing starts before the line that announces it
(and every line before that) is durable. A failed fsync is final (``failed``): the data
it covered may be lost whatever a later fsync says, so every later ``durable`` raises it
and the session pauses.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.to_thread


class _Log(Protocol):
    next_seq: int
    durable_through: int
    ahead_through: int

    def dup_fd(self) -> int: ...

    def fsync(self, fd: int) -> None: ...

    def synced(self, through_seq: int) -> None: ...


class GroupCommit:
    """The fsyncs of one log. Use from the event loop's thread only.

    Args:
        log: the session's ``EventLog``.
        on_durable: called on the loop after each fsync with the last seq now durable
            (the session sends the clients what it held back).

    Attributes:
        fsyncs: fsyncs made here (tests count them).
        failed: the error of a failed fsync; every later ``durable`` raises it.
    """

    def __init__(self, log: _Log, on_durable: Callable[[int], None] | None = None) -> None:
        self.log = log
        self.on_durable = on_durable
        self.fsyncs = 0
        self.failed: OSError | None = None
        self._running: anyio.Event | None = None

    async def durable(self, through_seq: int | None = None) -> None:
        """Return once the log is durable through ``through_seq``: by default the last
        write-ahead event appended (and so every line before it).

        Raises:
            OSError: the fsync failed, now or before (the effect must not start).
        """
        target = self.log.ahead_through if through_seq is None else through_seq
        while self.log.durable_through < target:
            if self.failed is not None:
                raise self.failed
            if self._running is not None:
                await self._running.wait()  # its fsync may cover us; if not, the loop starts the next
                continue
            done = self._running = anyio.Event()
            covers = self.log.next_seq - 1
            fd = self.log.dup_fd()  # the thread's own fd: closing the log cannot pull it away
            try:
                # Shielded: a cancel at the call's first checkpoint would leave the thread
                # unstarted and its descriptor open, holding the log's lock for good.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_fsync_and_close, self.log, fd)
            except OSError as exc:
                self.failed = exc
                raise
            finally:
                self._running = None
                done.set()
            self.fsyncs += 1
            self.log.synced(covers)
            if self.on_durable is not None:
                self.on_durable(self.log.durable_through)


def _fsync_and_close(log: _Log, fd: int) -> None:
    try:
        log.fsync(fd)
    finally:
        os.close(fd)
