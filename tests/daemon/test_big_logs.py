"""Logs of any size (issue 12 part 8): ``musec log`` and attached clients get every event,
whatever the log's size and whatever one event's size, in frames under the frame limit;
through the real CLI and real sockets to a real daemon."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from musec.agents.core.events import SessionEnded, SessionStarted, UserMessage
from musec.client import connection
from musec.daemon import protocol as p
from musec.daemon.eventlog import EventLog, verify
from musec.daemon.index import new_session_id

from tests.conftest import Musec

MIB = 1024 * 1024


def write_big_log(path: Path, workspace: Path, total_bytes: int, *, huge_event_bytes: int = 0) -> int:
    """A valid, hash-chained session log of about ``total_bytes``, written by the event
    log's own writer: ``session_started``, then user messages of 256 KiB (and one of
    ``huge_event_bytes`` in the middle), then ``session_ended``. Returns the events written."""
    log = EventLog.create(path)
    try:
        log.append(SessionStarted(workspace=str(workspace), model="scripted:none", title="big"))
        chunk = "lorem ipsum dolor sit amet " * (256 * 1024 // 27)
        n = 0
        while os.lseek(log._fd, 0, os.SEEK_CUR) < total_bytes:
            text = "h" * huge_event_bytes if huge_event_bytes and n == 100 else f"{n} {chunk}"
            log.append(UserMessage(text=text))
            n += 1
        log.append(SessionEnded(exit_reason="finished"))
        return log.next_seq
    finally:
        log.close()


@pytest.mark.slow  # writes, sends and prints 100 MiB: seconds on a loaded machine
def test_musec_log_prints_every_event_of_a_100_mib_session(musec: Musec, tmp_path: Path) -> None:
    assert musec("daemon", "start").returncode == 0
    sid = new_session_id()
    path = musec.home / "state" / "sessions" / f"{sid}.jsonl"
    events = write_big_log(path, tmp_path, 100 * MIB, huge_event_bytes=20 * MIB)
    assert path.stat().st_size >= 100 * MIB and verify(path).ok

    shown = musec("log", sid, "--json", timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    printed = shown.stdout.encode().split(b"\n")
    assert printed[-1] == b"" and printed[:-1] == path.read_bytes().split(b"\n")[:-1]  # every line, byte for byte
    assert len(printed) - 1 == events

    summary = musec("log", sid, timeout=300)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert len(summary.stdout.splitlines()) >= events
    assert musec("daemon", "status").returncode == 0  # still there, still serving


def _until(conn: connection.Connection, kind: type, timeout_s: float = 120) -> list:
    seen = []
    while True:
        msg = conn.recv(timeout_s)
        seen.append(msg)
        if isinstance(msg, kind):
            return seen


@pytest.mark.slow  # 20 MiB through the scripted model, the log and two clients: seconds
def test_an_event_of_20_mib_reaches_an_attached_client(connect, tmp_path: Path) -> None:
    """A live session's model answers 20 MiB of text: the ``model_response`` event (over
    the 16 MiB frame limit) reaches a client attached to it whole and as logged, the
    20 MiB of streamed text too, and the session ends normally."""
    text = "abcdefgh" * (20 * MIB // 8)
    script = tmp_path / "big.json"
    script.write_text(json.dumps({"turns": [[{"text": text}]]}))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    starter, watcher = connect(), connect()
    start = p.StartSession(id=starter.next_id(), workspace=str(workspace), model=f"scripted:{script}", task="",
                           approval="auto", interactive=True, end_when_idle=False, sandbox="off")
    starter.send(start)
    ready = _until(starter, p.Idle)
    sid = next(m for m in ready if isinstance(m, p.SessionStarted)).session_id
    attach = p.Attach(id=watcher.next_id(), session_id=sid)
    watcher.send(attach)
    backlog = _until(watcher, p.Event)  # session_started, from the log
    assert backlog[-1].backlog

    starter.request(p.UserInput(id=starter.next_id(), session_id=sid, text="answer at length"))
    seen = _until(watcher, p.Idle)
    big = [m for m in seen if isinstance(m, p.Event) and json.loads(m.line)["type"] == "model_response"]
    assert len(big) == 1 and not big[0].backlog and len(big[0].line) > p.MAX_FRAME_BYTES
    logged = (Path(ready[0].log_path).read_bytes().split(b"\n"))[big[0].seq]
    assert big[0].line == logged
    assert "".join(m.text for m in seen if isinstance(m, p.Delta)) == text
    assert all(m.id == attach.id for m in seen)

    starter.request(p.EndSession(id=starter.next_id(), session_id=sid))
    ended = _until(watcher, p.SessionEnded)[-1]
    assert ended.exit_reason in ("finished", "interrupted")
    assert verify(Path(ready[0].log_path)).ok
