"""The way out of plan mode (fresh-user s8 J11): Esc at the plan question left the session
in plan mode with no word on how to leave it; `/approval auto` then said "approval is
auto" while every write stayed refused; `/plan` and `/grill` with no argument printed
nothing. Now Esc says how to go on, `/approval MODE` leaves plan mode (logged as
approval_mode_changed from ``plan``, so a resume stays out of it), and `/plan` says what it did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import prompt_after
from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec
from tests.e2e.test_plan_mode import PLAN

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


def test_esc_at_the_plan_question_then_approval_leaves_plan_mode(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory,
) -> None:
    script = tmp_path / "plan.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "propose_plan", "input": PLAN}],
        [{"tool": "write_file", "input": {"path": "after_plan.txt", "content": "written\n"}}],
        [{"text": "written it"}],
    ]}))
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("/plan", "Enter")
    term.wait_for(lambda s: "plan mode is on: give the task" in s, "/plan alone saying what it did")
    term.send("fix the pager", "Enter")
    term.wait_for(lambda s: "Your answer (a/u/e/k/f/g" in s, "the plan question")
    term.send("Escape")
    term.wait_for(lambda s: "`/approval MODE` leaves plan mode" in s and prompt_after(s, "leaves plan mode"),
                  "the way on, then the prompt")
    term.send("/approval auto", "Enter")
    term.wait_for(lambda s: "plan mode is off (its plan is not carried out); approval is auto" in s, "plan mode left")
    term.send("just write the file", "Enter")
    term.wait_for(lambda s: "written it" in s, "the turn's end")
    assert (buggy_repo / "after_plan.txt").read_text() == "written\n"
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    changed = [e for e in events if e["type"] == "approval_mode_changed"]
    assert [(e["previous"], e["approval"]) for e in changed] == [("plan", "auto")]
    assert "not run: plan mode" not in json.dumps([e for e in events if e["type"] == "tool_finished"])
