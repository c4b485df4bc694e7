"""Group commit of a session's log: fsyncs off the event loop, shared by the events that
arrive together (issue 19 part 4).

A write-ahead event (DESIGN §5 rule 2: a tool starting) must be on disk before its side
effect starts. The fsync used to run inside ``EventLog.append`` on the event loop, so
every session and every attached client waited for each one. Now ``append`` writes the
line at once (readers see it) and the agent awaits ``GroupCommit.durable()`` before the
side effect: the first waiter fsyncs in a worker thread; events appended meanwhile (other
agents' calls, concurrent read-only calls, workers) wait for the next fsync, which covers
them all. Ordering is unchanged: nothing starts before the line that announces it is
durable, and lines reach the file in ``seq`` order as before.
"""

from __future__ import annotations

import os
from typing import Protocol

import anyio
import anyio.to_thread


class _Log(Protocol):
    next_seq: int
    durable_through: int

    def dup_fd(self) -> int: ...

    def synced(self, through_seq: int) -> None: ...


class GroupCommit:
    """The fsyncs of one log. Use from the event loop's thread only.

    Args:
        log: the session's ``EventLog``.
    """

    def __init__(self, log: _Log) -> None:
        self.log = log
        self.fsyncs = 0
        self._running: anyio.Event | None = None

    async def durable(self) -> None:
        """Return once every line appended so far is durable.

        Raises:
            OSError: the fsync failed (the side effect must not start).
        """
        target = self.log.next_seq - 1
        while self.log.durable_through < target:
            if self._running is not None:
                await self._running.wait()  # its fsync may cover us; if not, the loop starts the next
                continue
            done = self._running = anyio.Event()
            through = self.log.next_seq - 1
            fd = self.log.dup_fd()  # the thread's own fd: closing the log cannot pull it away
            try:
                await anyio.to_thread.run_sync(_fsync_and_close, fd)
                self.fsyncs += 1
                self.log.synced(through)
            finally:
                self._running = None
                done.set()


def _fsync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
