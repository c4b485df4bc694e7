"""``--max-wall``: a wall-time limit checked before each model call and passing while a tool
runs (the tool is interrupted then), kept across a resume."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Musec

PAUSE = "sleep 1.5; echo slept"


def _events(musec: Musec, sid: str) -> list[dict]:
    proc = musec("log", sid, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_a_run_stops_before_the_next_model_call_once_the_wall_time_is_spent(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": PAUSE}}],
        [{"tool": "bash", "input": {"command": PAUSE}}],
        [{"text": "never reached"}],
    ]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                 "--max-wall", "1s", "work slowly", cwd=buggy_repo)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["exit_reason"] == "max_wall" and "--max-wall limit is 1 s" in result["message"], result
    events = _events(musec, result["session_id"])
    assert events[0]["max_wall_s"] == 1.0
    assert [e["type"] for e in events].count("model_request") == 1  # no second call
    # The 1.5 s command was cut off when the 1 s passed, not run to its end.
    assert [e["type"] for e in events if e["type"] in ("tool_finished", "tool_interrupted")] == ["tool_interrupted"]

    # Resumed with a new message: the session's limit is kept, counted afresh for the message.
    again = musec("run", "--resume", result["session_id"], "--output-format", "json", "go on", cwd=buggy_repo)
    assert again.returncode == 4, again.stdout + again.stderr
    assert json.loads(again.stdout)["exit_reason"] == "max_wall"
    assert [e["type"] for e in _events(musec, result["session_id"])].count("model_request") == 2


def test_a_bad_duration_is_a_usage_error(musec: Musec, buggy_repo: Path) -> None:
    proc = musec("run", "--max-wall", "soon", "task", cwd=buggy_repo)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["musec: --max-wall 'soon': write a positive duration such as 90s, 15m, 24h or 1d"]
