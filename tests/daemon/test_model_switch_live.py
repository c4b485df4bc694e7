"""``/model M`` in a live session (issue 12 part 7, issue 18): ``SwitchModel`` through a real
socket to a real daemon; the next request goes to the new model, the switch is logged."""

from __future__ import annotations

import json
import os
from pathlib import Path

from musec.daemon import protocol as p

from tests.daemon.test_attach import _script, _until


def _log(sid: str) -> list[dict]:
    path = Path(os.environ["MUSEC_HOME"]) / "state" / "sessions" / f"{sid}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_switch_model_in_a_live_session(connect, buggy_repo: Path, tmp_path: Path) -> None:  # noqa: F811
    first = _script(tmp_path, [[{"text": "from the first model"}]])
    # a script answers by the number of model turns in the history: its first turn is never asked
    second = _script(tmp_path, [[{"text": "never asked"}], [{"text": "from the second model"}]])
    a = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=first, task="one", approval="auto",
                          interactive=True, end_when_idle=False))
    sid = a.recv(10).session_id
    _until(a, p.Idle)
    assert isinstance(a.request(p.SwitchModel(id=2, session_id=sid, model=first)), p.Ok)  # its own model: nothing
    assert not [e for e in _log(sid) if e["type"] == "model_switched"]
    bad = connect()
    bad.send(p.SwitchModel(id=3, session_id=sid, model="nosuch/model"))
    refused = bad.recv(10)
    assert isinstance(refused, p.Error) and refused.code == "bad_request" and "nosuch" in refused.message
    assert isinstance(a.request(p.SwitchModel(id=4, session_id=sid, model=second)), p.Ok)
    a.send(p.UserInput(id=5, session_id=sid, text="two"))
    _until(a, p.Idle)
    a.request(p.EndSession(id=6, session_id=sid))
    _until(a, p.SessionEnded)
    log = _log(sid)
    switched = [e for e in log if e["type"] == "model_switched"]
    assert len(switched) == 1 and switched[0]["model"] == second and switched[0]["from_model"] == first
    assert switched[0]["by"] == "interactive"
    answers = [e["content"][0]["text"] for e in log if e["type"] == "model_response"]
    assert answers == ["from the first model", "from the second model"]
    requests = [e for e in log if e["type"] == "model_request"]
    assert requests[-1]["model"] == second.removeprefix("scripted:") and "request_chars" in requests[-1]
    assert requests[-1]["context_tokens"] > 0 and requests[-1]["context_percent"] == -1.0  # a script has no window
    gone = connect()
    gone.send(p.SwitchModel(id=7, session_id=sid, model=first))
    assert isinstance(reply := gone.recv(10), p.Error) and reply.code == "session_not_found"
