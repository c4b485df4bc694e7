"""A headless resume with no message goes on with the turn a stop left unfinished, and a
wall-time limit interrupts a running tool (fresh-user findings F-3, F-4, F-c).

F-3: `musec run --continue` after a `--max-wall` stop did nothing, exited 0 and marked the
session `finished`. Now every stop that leaves the model's work unfinished (a wall, turn or
budget limit, Ctrl-C, a provider down) is gone on with, its limits counted afresh; with
nothing pending the resume is refused (exit 2, one line) and the log is left as it was.
F-4: `--max-wall 5s` ran a `sleep 20` to its end; now the tool is interrupted when the limit
passes, logged as `tool_interrupted`. F-c: the approval a stop left waiting is decided by the
resume's `--approval` mode, and the log says so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import BUGGY, FIXED, Musec


def _script(tmp_path: Path, turns: list) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _events(musec: Musec, sid: str) -> list[dict]:
    proc = musec("log", sid, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_max_wall_interrupts_a_running_tool_and_continue_goes_on_with_the_turn(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [
        [{"text": "working"}, {"tool": "bash", "input": {"command": "sleep 60; echo slept"}}],
        [{"expect_result": "--max-wall"}, {"text": "carried on after the stop"}],
    ])
    t0 = time.monotonic()
    stopped = musec("run", "--model", model, "--approval", "auto", "--output-format", "json", "--max-wall", "2s",
                    "work slowly", cwd=buggy_repo)
    took = time.monotonic() - t0
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert took < 45, f"the 60 s tool ran on past the 2 s limit ({took:.0f} s)"
    result = json.loads(stopped.stdout)
    sid = result["session_id"]
    assert result["exit_reason"] == "max_wall" and "--max-wall limit is 2 s" in result["message"], result
    events = _events(musec, sid)
    cut = [e for e in events if e["type"] == "tool_interrupted"]
    assert len(cut) == 1 and "--max-wall" in cut[0]["reason"], cut
    assert not [e for e in events if e["type"] == "tool_finished"]

    # No message: the stopped turn goes on (the model sees the interrupted call), not "finished".
    again = musec("run", "--continue", "--output-format", "json", cwd=buggy_repo)
    assert again.returncode == 0, again.stdout + again.stderr  # the script's expect_result held
    assert json.loads(again.stdout)["result"] == "carried on after the stop"
    events = _events(musec, sid)
    resumed = [e for e in events if e["type"] == "session_resumed"]
    assert resumed[-1]["continues"] == "max_wall"
    assert [e["type"] for e in events].count("model_request") == 2
    assert [e["type"] for e in events].count("user_message") == 1


def test_a_turn_limit_stop_is_gone_on_with_its_limit_counted_afresh(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [
        [{"tool": "bash", "input": {"command": "echo one"}}],
        [{"tool": "bash", "input": {"command": "echo two"}}],
        [{"text": "done at last"}],
    ])
    limit = ["--max-turns", "1"]
    first = musec("run", "--model", model, "--approval", "auto", "--output-format", "json", *limit, "go",
                  cwd=buggy_repo)
    assert first.returncode == 4, first.stdout + first.stderr
    sid = json.loads(first.stdout)["session_id"]
    # The same limit again: counted from the resume, so it goes one turn further each time.
    again = musec("run", "--resume", sid, "--output-format", "json", *limit, cwd=buggy_repo)
    assert again.returncode == 4, again.stdout + again.stderr
    last = musec("run", "--resume", sid, "--output-format", "json", "--max-turns", "5", cwd=buggy_repo)
    assert last.returncode == 0, last.stdout + last.stderr
    assert json.loads(last.stdout)["result"] == "done at last"
    events = _events(musec, sid)
    assert [e.get("continues") for e in events if e["type"] == "session_resumed"] == ["max_turns", "max_turns"]


def test_with_nothing_pending_a_resume_without_a_message_is_refused_and_changes_nothing(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[{"text": "all done"}]])
    done = musec("run", "--model", model, "--output-format", "json", "hello", cwd=buggy_repo)
    assert done.returncode == 0, done.stdout + done.stderr
    sid = json.loads(done.stdout)["session_id"]
    before = _events(musec, sid)

    for argv in (["--continue"], ["--resume", sid]):
        proc = musec("run", *argv, cwd=buggy_repo)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "nothing pending" in lines[0] and '"MESSAGE"' in lines[0], lines
    assert _events(musec, sid) == before  # not resumed, not "finished" again


def test_the_pending_approval_is_decided_by_the_resumes_approval_mode(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    edit = {"tool": "edit_file", "input": {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}}
    model = _script(tmp_path, [[edit], [{"text": "fixed"}]])
    asked = musec("run", "--model", model, "--output-format", "json", "fix it", cwd=buggy_repo)
    assert asked.returncode == 3, asked.stdout + asked.stderr
    sid = json.loads(asked.stdout)["session_id"]

    resumed = musec("run", "--resume", sid, "--approval", "auto", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "approval: allowed by --approval auto" in resumed.stdout, resumed.stdout
    assert "withdrawn" not in resumed.stdout + resumed.stderr
    events = _events(musec, sid)
    decided = [e for e in events if e["type"] == "approval_resolved"]
    assert [(e["decision"], e["by"]) for e in decided] == [("allow", "--approval auto")]
    assert FIXED in (buggy_repo / "pager.py").read_text()
