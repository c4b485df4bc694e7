"""End to end: a long final answer is logged once, and the finished session is listed as
finished (fresh-user s8 J8: a 5 MB answer was written three times, in ``model_response``,
``turn_ended`` and ``session_ended``, a 15 MB log; ``musec sessions`` then read only the
last 64 KiB, took the 5 MB end line for damage and listed the session as ``interrupted``)."""

from __future__ import annotations

import json
from pathlib import Path

from musec.client.stream import SessionStream
from musec.daemon import protocol as p

from tests.conftest import Musec

ANSWER = "".join(f"line {n} of a very long answer\n" for n in range(170_000))  # ~5 MB


def test_a_long_final_answer_is_logged_once_and_the_session_listed_finished(
    musec: Musec, buggy_repo: Path, tmp_path: Path
) -> None:
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"turns": [[{"text": ANSWER}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                 "huge answer", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["result"] == ANSWER  # the client still gets the whole answer
    sid = out["session_id"]
    (listed,) = [s for s in musec.json("sessions", "--all", "--json") if s["id"] == sid]
    log = next(musec.home.rglob(f"sessions/{sid}.jsonl"))
    assert len(ANSWER) < log.stat().st_size < 1.2 * len(ANSWER)  # once, not three times
    events = [json.loads(line) for line in log.read_text().splitlines()]
    ends = [e for e in events if e["type"] in ("turn_ended", "session_ended")]
    assert [e["type"] for e in ends] == ["turn_ended", "session_ended"]
    for end in ends:
        assert ANSWER.startswith(end["result"]) and 0 < len(end["result"]) <= 10_000  # a preview
        assert end["result_chars"] == len(ANSWER)
    assert listed["status"] == "finished"
    assert listed["updated_at"] == events[-1]["ts"] > listed["started_at"]
    assert musec("log", "verify", sid).returncode == 0

    # A client that attaches after the end completes it from the log: the whole answer again.
    stream = SessionStream(conn=None, request_id=1)  # type: ignore[arg-type]  # never re-attaches here
    for n, line in enumerate(log.read_bytes().splitlines()):
        stream.event(p.Event(id=1, session_id=sid, seq=n, line=line, backlog=True))
    ended = stream.ended(p.SessionEnded(id=1, session_id=sid, exit_reason="not_live"))
    assert (ended.exit_reason, ended.result) == ("finished", ANSWER)
