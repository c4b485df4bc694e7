"""Several terminals on one session (DESIGN §4), through real sockets to a real daemon."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from musec.client import connection
from musec.daemon import protocol as p


def _script(tmp_path: Path, turns: list) -> str:
    path = tmp_path / f"s{len(list(tmp_path.glob('s*.json')))}.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _until(conn: connection.Connection, kind: type, timeout_s: float = 30) -> list:
    seen = []
    while True:
        msg = conn.recv(timeout_s)
        seen.append(msg)
        if isinstance(msg, kind):
            return seen


def _events(msgs: list) -> list[tuple[int, bytes]]:
    return [(m.seq, m.line) for m in msgs if isinstance(m, p.Event)]


class Gate:
    """A FIFO the scripted model's first command reads (``cat``): the session cannot get
    past that command until the test opens the gate, so whatever a client receives after
    the gate opens was sent while the session was still running.

    It lives in ``.git/`` so that git's status of the workspace never opens it.
    """

    def __init__(self, repo: Path) -> None:
        self.path = repo / ".git" / "musec-test-gate"
        os.mkfifo(self.path)
        self.command = f"cat {self.path.relative_to(repo)}"

    def open(self) -> None:
        def write() -> None:
            with open(self.path, "w") as fifo:  # returns once the command has the FIFO open
                fifo.write("gate open\n")

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(30)
        assert not writer.is_alive(), "the session's command never opened the gate"


def _until_backlog_end(conn: connection.Connection) -> list:
    seen = []
    while True:
        msg = conn.recv(10)
        seen.append(msg)
        if isinstance(msg, p.Event) and msg.backlog_end:
            return seen


def _types(msgs: list) -> list[str]:
    return [json.loads(m.line)["type"] for m in msgs if isinstance(m, p.Event)]


def test_two_clients_see_identical_event_sequences(connect, buggy_repo: Path, tmp_path: Path) -> None:
    gate = Gate(buggy_repo)
    model = _script(tmp_path, [[{"tool": "bash", "input": {"command": gate.command}}],
                               [{"tool": "bash", "input": {"command": "echo two"}}], [{"text": "done"}]])
    a, b = connect(), connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=model, task="go", approval="auto"))
    first = a.recv(10)
    assert isinstance(first, p.SessionStarted)
    seen_a = _until_event(a, "tool_started")  # the session now waits at the gate
    b.send(p.Attach(id=7, session_id=first.session_id, since_seq=-1))
    backlog = _until_backlog_end(b)  # b joins in the middle of the run
    assert "tool_finished" not in _types(backlog) and all(m.backlog for m in backlog)
    gate.open()
    seen_a += _until(a, p.SessionEnded)
    live = _until(b, p.SessionEnded)
    seen_b = backlog + live
    assert _events(seen_a) == _events(seen_b)
    assert [s for s, _ in _events(seen_b)] == list(range(len(_events(seen_b))))
    assert all(m.id == 7 for m in seen_b)
    # Live, not a replay: what b got after its backlog was sent as it happened, and it
    # includes the result of the command that could not finish before b had attached.
    assert live and not any(m.backlog for m in live if isinstance(m, p.Event))
    finished = [json.loads(line) for _, line in _events(live) if b'"tool_finished"' in line]
    assert finished and "gate open" in finished[0]["content"]
    assert _types(live)[-1] == "session_ended"


def test_attach_since_seq_gives_no_gap_and_no_duplicate(connect, buggy_repo: Path, tmp_path: Path) -> None:
    gate = Gate(buggy_repo)
    model = _script(tmp_path, [[{"tool": "bash", "input": {"command": gate.command}}], [{"text": "done"}]])
    a, b = connect(), connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=model, task="go", approval="auto"))
    sid = a.recv(10).session_id
    _until_event(a, "tool_started")
    b.send(p.Attach(id=2, session_id=sid, since_seq=2))
    backlog = _until_backlog_end(b)
    gate.open()
    live = _until(b, p.SessionEnded)
    seqs = [s for s, _ in _events(backlog + live)]
    assert seqs == list(range(3, seqs[-1] + 1))
    # The seam between the log and the live stream was crossed while the session ran.
    assert _events(backlog) and all(m.backlog for m in backlog)
    assert _events(live) and not any(m.backlog for m in live if isinstance(m, p.Event))


def test_approval_first_answer_wins_and_late_client_sees_it_pending(connect, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[{"tool": "bash", "input": {"command": "echo approved-run"}}], [{"text": "ok"}]])
    a = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=model, task="go", approval="ask",
                          interactive=True, end_when_idle=True))
    sid = a.recv(10).session_id
    pending = json.loads(_until_event(a, "approval_requested")[-1].line)
    late = connect()
    late.send(p.Attach(id=5, session_id=sid, since_seq=-1))
    late_seen = _until_event(late, "approval_requested")
    assert json.loads(late_seen[-1].line)["call_id"] == pending["call_id"]
    ok = late.request(p.ApprovalAnswer(id=6, session_id=sid, call_id=pending["call_id"], decision="allow"))
    assert isinstance(ok, p.Ok)
    a.send(p.ApprovalAnswer(id=8, session_id=sid, call_id=pending["call_id"], decision="deny"))
    rest_a = _until(a, p.SessionEnded)
    assert any(isinstance(m, p.Error) and m.id == 8 and m.code == "already_resolved" for m in rest_a)
    resolved = [json.loads(m.line) for m in rest_a if isinstance(m, p.Event) and b'"approval_resolved"' in m.line]
    assert len(resolved) == 1 and resolved[0]["decision"] == "allow"
    finished = [json.loads(m.line) for m in rest_a if isinstance(m, p.Event) and b'"tool_finished"' in m.line]
    assert "approved-run" in finished[0]["content"]


def _until_event(conn: connection.Connection, kind: str) -> list:
    out = []
    while True:
        msg = conn.recv(10)
        if isinstance(msg, p.Event):
            out.append(msg)
            if json.loads(msg.line)["type"] == kind:
                return out


def test_resent_message_is_applied_once(connect, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[{"text": "first"}], [{"text": "second"}], [{"text": "third"}]])
    a = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=model, task="one", approval="auto",
                          interactive=True, end_when_idle=False))
    sid = a.recv(10).session_id
    _until(a, p.Idle)
    for _ in range(2):  # a reconnecting client sends the same message again
        a.send(p.UserInput(id=2, session_id=sid, text="two", client_msg_id="msg-42"))
    a.send(p.UserInput(id=3, session_id=sid, text="three", client_msg_id="msg-43"))
    _until(a, p.Idle)
    _until(a, p.Idle)
    a.request(p.EndSession(id=4, session_id=sid))
    msgs = _until(a, p.SessionEnded)
    del msgs
    log = Path(os.environ["MUSEC_HOME"]) / "state" / "sessions" / f"{sid}.jsonl"
    texts = [json.loads(line)["text"] for line in log.read_text().splitlines() if '"user_message"' in line]
    assert texts == ["one", "two", "three"]


def test_slow_client_is_cut_off_with_resync(connect, buggy_repo: Path, tmp_path: Path) -> None:
    turns = 160  # each turn queues ~6 messages for the slow client: past its 512-message buffer
    model = _script(tmp_path, [[{"text": "x" * 2000}] for _ in range(turns + 1)])
    a = connect()
    slow = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=model, task="go", approval="auto",
                          interactive=True, end_when_idle=False))
    sid = a.recv(10).session_id
    slow.sock.setsockopt(__import__("socket").SOL_SOCKET, __import__("socket").SO_RCVBUF, 4096)
    slow.send(p.Attach(id=9, session_id=sid, since_seq=-1))
    _until(a, p.Idle)
    for n in range(turns):  # the slow client reads nothing meanwhile
        a.send(p.UserInput(id=10 + n, session_id=sid, text=f"more {n}"))
        _until(a, p.Idle)
    seen = _until(slow, p.Resync, timeout_s=60)
    resync = seen[-1]
    events = _events(seen)
    assert resync.last_seq >= events[-1][0]
    # Reconnecting from the last seq it has gives the rest with no gap.
    again = connect()
    again.send(p.Attach(id=11, session_id=sid, since_seq=events[-1][0]))
    nxt = again.recv(10)
    assert isinstance(nxt, p.Event) and nxt.seq == events[-1][0] + 1
