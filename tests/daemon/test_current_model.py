"""``resume.current_model``: the main agent's model now, found by a scan of the log's bytes."""

from __future__ import annotations

from pathlib import Path

from musec.agents.core.events import ModelSwitched, SessionStarted, ToolFinished, ToolStarted
from musec.daemon.eventlog import EventLog
from musec.daemon.resume import current_model


def _log(path: Path, *events: object) -> Path:
    elog = EventLog.create(path)
    try:
        elog.append(SessionStarted(workspace="/w", model="first"))
        for event in events:
            elog.append(event)  # type: ignore[arg-type]
    finally:
        elog.close()
    return path


def test_the_last_switch_of_the_main_agent_wins(tmp_path: Path) -> None:
    path = _log(tmp_path / "s.jsonl",
                ModelSwitched(agent="main", model="second"),
                ToolStarted(call_id="c1", input={"n": 1}),
                ModelSwitched(agent="critic", model="not-main"),  # another agent's switch
                ModelSwitched(agent="main", model="third"),
                ToolFinished(call_id="c1", content='"type":"model_switched","agent":"main","model":"forged"'))
    assert current_model(path, "first") == "third"


def test_no_switch_an_empty_log_and_a_torn_last_line(tmp_path: Path) -> None:
    plain = _log(tmp_path / "plain.jsonl", ToolStarted(call_id="c1", input={}))
    assert current_model(plain, "first") == "first"
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert current_model(empty, "first") == "first"
    torn = _log(tmp_path / "torn.jsonl", ModelSwitched(agent="main", model="second"))
    with open(torn, "ab") as f:  # a switch cut off mid-line, no newline: not taken
        f.write(b'{"seq":2,"ts":1.0,"agent":"main","type":"model_switched","model":"thi')
    assert current_model(torn, "first") == "second"
    whole = _log(tmp_path / "whole.jsonl", ModelSwitched(agent="main", model="second"))
    whole.write_bytes(whole.read_bytes().rstrip(b"\n"))  # the last line whole, without its newline
    assert current_model(whole, "first") == "second"
