"""A request the daemon is slow to answer: progress while waiting, then a one-line
``DaemonBusy`` (never a bare ``TimeoutError`` traceback), over a real socket pair."""

from __future__ import annotations

import os
import socket

import pytest
from musec.client.connection import Connection
from musec.client.errors import ClientError, DaemonBusy
from musec.daemon import protocol as p


def test_a_slow_reply_shows_progress_then_a_clear_error() -> None:
    ours, daemon_end = socket.socketpair()
    hello = p.Hello(protocol_version=p.PROTOCOL_VERSION, version="test", role="daemon", pid=os.getpid())
    conn = Connection(ours, hello, os.getpid())
    waits: list[float] = []
    try:
        with pytest.raises(DaemonBusy, match="did not answer Replay in 2.5 s") as caught:
            conn.request(p.Replay(id=conn.next_id(), session_id="x"), timeout_s=2.5, on_wait=waits.append)
        assert isinstance(caught.value, ClientError) and isinstance(caught.value, TimeoutError)
        assert len(waits) >= 2 and waits == sorted(waits) and waits[-1] < 2.5
        # A reply that does come, after a wait, is still returned.
        daemon_end.sendall(p.encode(p.Ok(id=7)))
        assert conn.request(p.Interrupt(id=7, session_id="x"), timeout_s=10, on_wait=waits.append) == p.Ok(id=7)
    finally:
        conn.close()
        daemon_end.close()
