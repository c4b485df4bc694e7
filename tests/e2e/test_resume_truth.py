"""Resume tells the truth about what a stopped session did (issue 13 cases 4 and 5).

Case 4: a daemon killed during a ``write_file``/``edit_file`` (before its rename, or after
it but before the call's result was logged) is resumed: resume finds out whether the write
landed (the file's hash against the hashes announced before the write), records
``file_edited`` when it did, answers the model with what happened instead of "interrupted",
and removes the call's temporary file.

Case 5: a headless run that stopped for an approval (exit 3) is resumed with another
approval mode: the pending call is decided under it (``auto`` runs it; ``ask`` without a
person stops for approval again), never dropped with a "finished".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import BUGGY, FIXED, LIBRARY, Musec

NEW_FILE = "NOTES = 'written by the model'\n"


def _script(tmp_path: Path, turns: list) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _events(musec: Musec, sid: str) -> list[dict]:
    proc = musec("log", sid, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _call(tool: str) -> dict:
    if tool == "write_file":
        return {"tool": "write_file", "input": {"path": "pager.py", "content": NEW_FILE}}
    return {"tool": "edit_file", "input": {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}}


def _after(tool: str) -> str:
    return NEW_FILE if tool == "write_file" else LIBRARY["pager.py"].replace(BUGGY, FIXED)


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
@pytest.mark.parametrize(("point", "landed"), [("mid_edit", False), ("before_tool_finished", True)])
def test_resume_finds_out_whether_a_write_landed(
    tool: str, point: str, landed: bool, musec: Musec, buggy_repo: Path, tmp_path: Path,
) -> None:
    told = "is on disk" if landed else "as it was before this call"
    model = _script(tmp_path, [[_call(tool)], [{"expect_result": told}, {"text": "Understood."}]])
    crashed = musec("run", "--model", model, "--approval", "auto", "--output-format", "json", "change it",
                    cwd=buggy_repo, env={"MUSEC_CRASH_AT": point})
    assert crashed.returncode == 5, crashed.stdout + crashed.stderr
    sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]
    on_disk = (buggy_repo / "pager.py").read_text()
    assert on_disk == (_after(tool) if landed else LIBRARY["pager.py"])  # the kill was where the case says
    if not landed:
        assert list(buggy_repo.glob(".pager.py.*.musec-tmp"))  # the temporary file the crash left

    resumed = musec("run", "--resume", sid, "--output-format", "json", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr  # the script's expect_result held
    assert json.loads(resumed.stdout)["result"] == "Understood."
    assert not list(buggy_repo.glob(".*.musec-tmp")), "resume removes the call's temporary file"
    assert (buggy_repo / "pager.py").read_text() == on_disk  # nothing was written again or undone

    events = _events(musec, sid)
    call_id = next(e["call_id"] for e in events if e["type"] == "tool_started")
    answers = [e for e in events if e.get("call_id") == call_id and e["type"] in ("tool_finished", "tool_interrupted")]
    assert [e["type"] for e in answers] == ["tool_finished"], answers
    assert told in answers[0]["content"] and answers[0]["is_error"] is (not landed)
    edited = [e for e in events if e["type"] == "file_edited"]
    if landed:
        assert len(edited) == 1 and edited[0]["call_id"] == call_id and edited[0]["path"] == "pager.py"
        assert edited[0]["after_sha256"] != edited[0]["before_sha256"]
    else:
        assert edited == []
    assert musec("log", "verify", sid).returncode == 0
    replay = json.loads(musec("replay", sid, "--json").stdout)
    assert replay["ok"], replay


def test_a_write_changed_by_someone_else_meanwhile_is_reported_as_unknown(
    musec: Musec, buggy_repo: Path, tmp_path: Path,
) -> None:
    told = "neither"
    model = _script(tmp_path, [[_call("write_file")], [{"expect_result": told}, {"text": "Understood."}]])
    crashed = musec("run", "--model", model, "--approval", "auto", "change it", cwd=buggy_repo,
                    env={"MUSEC_CRASH_AT": "before_tool_finished"})
    assert crashed.returncode == 5, crashed.stdout + crashed.stderr
    sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]
    (buggy_repo / "pager.py").write_text("# the person's own edit, made while the daemon was down\n")
    resumed = musec("run", "--resume", sid, "--output-format", "json", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (buggy_repo / "pager.py").read_text().startswith("# the person's own edit")
    events = _events(musec, sid)
    assert not [e for e in events if e["type"] == "file_edited"]


def test_a_resume_with_a_new_approval_mode_answers_the_pending_call(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[_call("edit_file")], [{"expect_result": "edited pager.py"}, {"text": "Fixed."}]])
    stopped = musec("run", "--model", model, "--approval", "ask", "--output-format", "json", "fix it", cwd=buggy_repo)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    sid = json.loads(stopped.stdout)["session_id"]

    # Still no one to ask: it stops for the approval again, and nothing is written.
    again = musec("run", "--resume", sid, "--approval", "ask", "--output-format", "json", cwd=buggy_repo)
    assert again.returncode == 3, again.stdout + again.stderr
    assert json.loads(again.stdout)["exit_reason"] == "needs_approval"
    assert (buggy_repo / "pager.py").read_text() == LIBRARY["pager.py"]

    resumed = musec("run", "--resume", sid, "--approval", "auto", "--output-format", "json", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["exit_reason"] == "finished" and out["result"] == "Fixed."
    assert (buggy_repo / "pager.py").read_text() == LIBRARY["pager.py"].replace(BUGGY, FIXED)
    events = _events(musec, sid)
    started = [e for e in events if e["type"] == "tool_started"]
    assert len(started) == 1 and started[0]["tool"] == "edit_file"
    assert len([e for e in events if e["type"] == "file_edited"]) == 1
    assert musec("log", "verify", sid).returncode == 0
    assert json.loads(musec("replay", sid, "--json").stdout)["ok"]
