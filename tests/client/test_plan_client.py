"""The client's side of plan mode: the approval question's answers and the status line's
plan progress (folds over the same events the daemon logs)."""

from __future__ import annotations

import pytest
from musec.agents.plan import render_plan
from musec.client.plan import ask_plan
from musec.client.status import SessionStatus

PLAN = render_plan({"context": "c", "approach": "1. a", "files_to_change": ["pager.py: fix", "`docs/x.md`"],
                    "code_to_reuse": ["-"], "risks": ["r"], "verification": ["python3 -m unittest -q"]})


def _answers(*lines: str | None):
    it = iter(lines)
    asked: list[str] = []

    def read(question: str) -> str | None:
        asked.append(question)
        return next(it)

    return read, asked


@pytest.mark.parametrize(("lines", "expected"), [
    (["a\n"], ("approve", "")),
    (["?\n", "u\n"], ("approve_auto", "")),  # an unknown answer is asked again
    (["f\n"], ("fresh", "")),
    (["k\n", "  check the docs too \n"], ("feedback", "check the docs too")),
    ([None], None),  # answered in another terminal
])
def test_each_answer(lines: list, expected: tuple | None, capsys: pytest.CaptureFixture[str]) -> None:
    read, _ = _answers(*lines)
    assert ask_plan(PLAN, read) == expected
    shown = capsys.readouterr().out
    assert "│ ## Files to change" in shown and "[e] edit it first" in shown


def test_edit_returns_what_the_editor_saved() -> None:
    read, _ = _answers("e\n")
    assert ask_plan(PLAN, read, edit=lambda text: text.replace("1. a", "1. b")) == ("edit", PLAN.replace("1. a", "1. b"))


def test_status_line_follows_the_plan() -> None:
    status = SessionStatus("m", "ask")
    events = [
        {"type": "plan_started", "agent": "main", "path": "/p.md"},
        {"type": "plan_proposed", "agent": "main", "text": PLAN},
        {"type": "plan_approved", "agent": "main", "text": PLAN, "approval": "auto"},
        {"type": "file_edited", "agent": "main", "path": "pager.py"},
        {"type": "tool_started", "agent": "main", "tool": "bash", "call_id": "c1",
         "input": {"command": "python3 -m unittest -q"}},
        {"type": "tool_finished", "agent": "main", "call_id": "c1", "exit_status": 0},
    ]
    seen = []
    for ev in events:
        status.fold(ev)
        seen.append(status.plan_text())
    assert seen[:3] == ["plan planning", "plan proposed", "plan: files 0/2, checks 0/1"]
    assert seen[-1] == "plan: files 1/2, checks 1/1" and status.text().endswith("approval auto")
