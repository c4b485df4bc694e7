"""A slow disk (issue 19 part 4): a real daemon whose every log fsync is held by the test
(``MUSEC_FSYNC_GATE``, two FIFOs) keeps serving other clients, and starts nothing a
write-ahead event announces (the model call after a person's message, the command after
its approval, telling the client) before that event's fsync has returned."""

from __future__ import annotations

import json
import os
import select
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from musec.agents.core.events import Durability, decode_event, persistence
from musec.daemon import protocol as p


@pytest.fixture
def gate() -> Iterator[tuple[Path, int, int]]:
    folder = Path(tempfile.mkdtemp(prefix="fg", dir="/tmp"))
    os.mkfifo(folder / "waiting")
    os.mkfifo(folder / "go")
    waiting, go = os.open(folder / "waiting", os.O_RDWR), os.open(folder / "go", os.O_RDWR)
    yield folder, waiting, go
    os.write(go, b"." * 4096)  # whatever still waits goes on (the daemon is stopped after this)
    os.close(waiting)
    os.close(go)
    shutil.rmtree(folder, ignore_errors=True)


def _lines(home: Path) -> list[dict]:
    logs = list((home / "state" / "sessions").glob("*.jsonl"))
    if not logs:
        return []
    data = logs[0].read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def _ahead(line: dict) -> bool:
    event = decode_event(json.dumps(line).encode())
    return persistence(event).durability is Durability.WRITE_AHEAD


def _check_held(lines: list[dict], durable: int, ran: bool) -> None:
    """What the lines after ``durable`` (written, their fsync held) may not have led to yet."""
    for i in range(durable, len(lines)):
        kind, after = lines[i]["type"], [line["type"] for line in lines[i + 1 :] if line["agent"] == "main"]
        if kind == "user_message":
            assert "model_request" not in after, (i, lines)  # the model is asked once the message is on disk
        if kind in ("approval_resolved", "tool_started"):
            assert not ran, (i, lines)  # the command runs once its approval and start are on disk


@pytest.mark.timeout(240)
def test_a_slow_disk_stops_no_one_and_no_effect_runs_ahead_of_its_fsync(
        musec, connect, gate, buggy_repo: Path, tmp_path: Path) -> None:
    folder, waiting, go = gate
    musec.stop()  # the fixture's daemon: this test's has the slow disk
    assert musec("daemon", "start", env={"MUSEC_FSYNC_GATE": str(folder)}).returncode == 0
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "touch ran"}}], [{"text": "done"}]]}))
    a, probe = connect(), connect()
    probe.request(p.Status(id=probe.next_id()))
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=f"scripted:{script}", task="go", approval="ask",
                          interactive=True, end_when_idle=True))
    held, durable, seen, ended = 0, 0, 0, False
    told: list[p.Event] = []
    while not ended:
        ready, _, _ = select.select([waiting, a.sock], [], [], 60)
        assert ready, "the session neither fsynced nor sent anything for 60 s"
        if waiting in ready:
            os.read(waiting, 1)
            held += 1
            # An fsync is held: the daemon still answers, and has acted on nothing it covers.
            assert isinstance(probe.request(p.Status(id=probe.next_id()), timeout_s=60), p.StatusReply)
            lines = _lines(musec.home)
            if held == 1:  # session_started: the client learns of the session once it is on disk
                assert [line["type"] for line in lines] == ["session_started"] and not a.pending()
            _check_held(lines, durable, (buggy_repo / "ran").exists())
            for m in a.pending():
                if isinstance(m, p.Event) and m.seq >= durable:
                    assert not _ahead(json.loads(m.line)), m  # a client is told a write-ahead event once durable
            durable = len(lines)  # this fsync covers at most the lines written so far
            os.write(go, b".")
        msgs = a.pending()
        for m in msgs[seen:]:
            if isinstance(m, p.Event):
                told.append(m)
                line = json.loads(m.line)
                if line["type"] == "approval_requested":
                    a.send(p.ApprovalAnswer(id=a.next_id(), session_id=line.get("session_id", "") or _sid(msgs),
                                            call_id=line["call_id"], decision="allow"))
            ended = ended or isinstance(m, p.SessionEnded)
        seen = len(msgs)
    lines = _lines(musec.home)
    assert (buggy_repo / "ran").exists() and lines[-1]["type"] == "session_ended"
    kinds = {line["type"] for line in lines}
    assert {"session_started", "user_message", "approval_requested", "approval_resolved", "tool_started"} <= kinds
    assert held >= 5  # every write-ahead kind above went through a held fsync (some shared one)
    assert [m.seq for m in told] == list(range(len(lines)))  # every event, in order, once


def _sid(msgs: list) -> str:
    return next(m.session_id for m in msgs if isinstance(m, p.SessionStarted))
