"""The client never reports a live daemon as stopped (issue 12 part 8): a connection the
daemon closes while it runs, or a frame over the limit, is said to be what it is; over a
real socket pair, with a real live process and a real ended one as the daemon."""

from __future__ import annotations

import os
import socket
import struct
import subprocess

import pytest
from musec.client.connection import Connection, connect
from musec.client.errors import DaemonLost, ProtocolMismatch
from musec.client.interactive import lost
from musec.daemon import protocol as p

from tests.conftest import Musec

HELLO = p.Hello(protocol_version=p.PROTOCOL_VERSION, version="test", role="daemon", pid=1)


def _pair(daemon_pid: int) -> tuple[Connection, socket.socket]:
    ours, theirs = socket.socketpair()
    return Connection(ours, HELLO, daemon_pid), theirs


def test_a_connection_closed_by_a_live_daemon_says_it_still_runs(
        musec: Musec, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MUSEC_HOME", str(musec.home))
    monkeypatch.delenv("MUSEC_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert musec("daemon", "start").returncode == 0
    conn = connect(start=False)
    conn.sock.sendall(struct.pack(">I", p.MAX_FRAME_BYTES + 1))  # the daemon answers and closes this connection
    refused = conn.recv(30)
    assert isinstance(refused, p.Error) and refused.code == "bad_frame"
    with pytest.raises(DaemonLost) as caught:
        conn.recv(30)
    assert caught.value.daemon_alive
    assert f"the daemon (pid {musec.daemon_pid()}) is still running" in str(caught.value)
    lost(caught.value, "abc")
    said = capsys.readouterr().err
    assert "still running" in said and "stopped" not in said and "musec attach abc" in said
    conn.close()


def test_a_daemon_that_ended_is_reported_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    conn, theirs = _pair(ended.pid)
    theirs.close()
    with pytest.raises(DaemonLost) as caught:
        conn.recv(5)
    assert not caught.value.daemon_alive and "still running" not in str(caught.value)
    lost(caught.value, "abc")
    assert "the daemon stopped" in capsys.readouterr().err
    conn.close()


def test_a_frame_over_the_limit_is_named_and_the_daemon_not_called_stopped() -> None:
    conn, theirs = _pair(os.getpid())
    theirs.sendall(struct.pack(">I", p.MAX_FRAME_BYTES + 1))
    with pytest.raises(ProtocolMismatch, match=r"still running\) sent what this client cannot read .*over the"):
        conn.recv(5)
    conn.close()
    theirs.close()


def test_an_event_in_pieces_comes_out_of_recv_whole() -> None:
    conn, theirs = _pair(os.getpid())
    line = b'{"seq":4,"x":"' + b"q" * (p.EVENT_PIECE_BYTES * 5) + b'"}'
    frames = p.encode_fitted(p.Event(id=3, session_id="s", seq=4, line=line)) + p.encode(p.Ok(id=9))
    assert len(frames) > p.MAX_FRAME_BYTES
    theirs.setblocking(False)
    sent = 0
    got = []
    while len(got) < 2:  # one thread: write what the socket takes, read what has come
        try:
            sent += theirs.send(frames[sent: sent + (1 << 20)])
        except BlockingIOError:
            pass
        got += [m for m in conn.pending()]
        conn._ready.clear()
    assert got == [p.Event(id=3, session_id="s", seq=4, line=line), p.Ok(id=9)]
    conn.close()
    theirs.close()
