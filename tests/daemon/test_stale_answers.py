"""An answer names the question it answers (fresh-user finding G2): with two terminals on one
session, an answer that comes after its question was answered by the other terminal must be
refused, never applied to the question asked next, even when the model gave both calls the
same call id (local OpenAI-compatible servers number their calls ``call_0`` in every answer).
Two real clients on a real daemon; the model is a real local HTTP server."""

from __future__ import annotations

import json
from pathlib import Path

from musec.client import connection
from musec.daemon import protocol as p
from tests.conftest import Musec
from tests.support.openai_server import OpenAIServer, chat_stream


def _until_event(conn: connection.Connection, kind: str, timeout_s: float = 30) -> dict:
    while True:
        msg = conn.recv(timeout_s)
        if isinstance(msg, p.Event) and json.loads(msg.line)["type"] == kind:
            return json.loads(msg.line)


def _reply(conn: connection.Connection, request_id: int, timeout_s: float = 30) -> p.DaemonMsg:
    while True:
        msg = conn.recv(timeout_s)
        if isinstance(msg, p.Ok | p.Error) and msg.id == request_id:
            return msg


def test_a_late_answer_is_refused_and_never_answers_the_next_question(connect, musec: Musec, buggy_repo: Path) -> None:
    with OpenAIServer() as server:
        server.enqueue(
            chat_stream(tool_calls=[{"id": "call_0", "name": "bash", "arguments": '{"command": "echo one"}'}]),
            chat_stream(tool_calls=[{"id": "call_0", "name": "bash", "arguments": '{"command": "echo two"}'}]),
            chat_stream("done"),
        )
        a, b = connect(), connect()
        a.send(p.StartSession(id=1, workspace=str(buggy_repo), model="openai-compat/local", task="go",
                              approval="ask", interactive=True, end_when_idle=True,
                              credentials={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.base_url}))
        sid = a.recv(30).session_id
        first = _until_event(a, "approval_requested")
        b.send(p.Attach(id=2, session_id=sid, since_seq=-1))
        assert _until_event(b, "approval_requested")["seq"] == first["seq"]
        # Terminal a denies the first question; the second (same call id) is asked at once.
        a.send(p.ApprovalAnswer(id=3, session_id=sid, call_id="call_0", decision="deny", asked_seq=first["seq"]))
        assert isinstance(_reply(a, 3), p.Ok)
        second = _until_event(b, "approval_requested")
        assert second["input"] == {"command": "echo two"} and second["seq"] > first["seq"]
        # Terminal b's answer to the first question comes late: refused, in one line.
        b.send(p.ApprovalAnswer(id=4, session_id=sid, call_id="call_0", decision="allow", asked_seq=first["seq"]))
        refused = _reply(b, 4)
        assert isinstance(refused, p.Error) and refused.code == "already_resolved", refused
        assert "another terminal" in refused.message and "not applied" in refused.message
        # The second question still waits; its own answer decides it.
        a.send(p.ApprovalAnswer(id=5, session_id=sid, call_id="call_0", decision="deny", asked_seq=second["seq"]))
        assert isinstance(_reply(a, 5), p.Ok)
        _until_event(a, "session_ended", timeout_s=60)
    events = [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]
    resolved = [(e["seq"] > second["seq"], e["decision"]) for e in events if e["type"] == "approval_resolved"]
    assert resolved == [(False, "deny"), (True, "deny")]
    assert not [e for e in events if e["type"] == "tool_started"]  # echo two never ran

