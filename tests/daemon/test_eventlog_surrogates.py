"""A string that cannot be UTF-8 (a lone surrogate: a file name's byte that is not UTF-8,
as ``os.fsdecode`` gives it) is logged as ``\\xNN`` text; it never fails the append (a
fan-out's snapshot of an untracked Latin-1 name ended the tool call: fresh-user s5 F4)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from musec.agents.core.events import UserMessage, WorkerSpawned
from musec.agents.tools.base import printable
from musec.daemon.eventlog import EventLog, read_events, verify


def test_a_non_utf8_path_in_an_event_is_logged_as_xnn(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    elog = EventLog.create(path)
    elog.append(WorkerSpawned(worker="w", dirty_paths=["unt\udcf6.txt", "ok.txt"], path="/tmp/x\udcef"))
    elog.close()
    line = json.loads(path.read_bytes().splitlines()[0])
    assert line["dirty_paths"] == ["unt\\xf6.txt", "ok.txt"] and line["path"] == "/tmp/x\\xef"
    assert verify(path).ok


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)), max_size=30).map("".join))
def test_any_text_appends_and_reads_back_as_printable(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.jsonl"
    path.unlink(missing_ok=True)
    elog = EventLog.create(path)
    elog.append(UserMessage(text=text))
    elog.close()
    assert [e.text for e in read_events(path)] == [printable(text)]
    assert verify(path).ok
