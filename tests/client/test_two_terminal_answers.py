"""Two real terminals (tmux) on one session racing to answer approvals (fresh-user finding
G2): an answer typed in one terminal to a question the other terminal has just answered
was taken as the answer to the question asked next. The second terminal is held
(SIGSTOP) while the first answers and its person types, so the race is the same every run:
its keys are in its terminal when it sees, at once, the first question answered and the
next one asked."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import Tmux, prompt_after
from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


def _pid(term: Tmux) -> int:
    found = re.search(r"PID=(\d+)", term.wait_for(lambda s: "PID=" in s, "the client's pid"))
    assert found is not None
    return int(found.group(1))


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]


@pytest.mark.parametrize("first_answer", ["n", "y"])
def test_an_answer_typed_as_another_terminal_answers_is_not_applied_to_the_next_question(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory, first_answer: str,
) -> None:
    script = tmp_path / "two.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "echo one"}}, {"tool": "bash", "input": {"command": "echo two"}}],
        [{"text": "Both asked."}],
    ]}))
    first = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("run two commands", "Enter")
    first.wait_for(lambda s: "Allow bash(echo one)" in s, "the first question in the first terminal")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = tmux_factory(f"sh -c 'echo PID=$$; exec {BIN / 'musec'} attach {sid}'", musec.env, buggy_repo)
    pid = _pid(second)
    second.wait_for(lambda s: "Allow bash(echo one)" in s, "the first question in the second terminal")
    os.kill(pid, signal.SIGSTOP)
    try:
        first.send(first_answer, "Enter")  # the first terminal answers first...
        first.wait_for(lambda s: "Allow bash(echo two)" in s, "the next question in the first terminal")
        second.send("y", "Enter")  # ...as the second terminal's person answers the first question
    finally:
        os.kill(pid, signal.SIGCONT)
    screen = second.wait_for(lambda s: "Allow bash(echo two)" in s, "the next question in the second terminal")
    assert "what you typed was not applied" in screen, screen
    # The next question still waits in both terminals; the first terminal's answer decides it.
    assert "(answered in another terminal)" not in first.screen().rpartition("Allow bash(echo two)")[2]
    first.send("n", "Enter")
    first.wait_for(lambda s: "Both asked." in s, "the end of the turn")
    second.wait_for(lambda s: "approval: denied in another terminal" in s.rpartition("Allow bash(echo two)")[2],
                    "the second terminal told who answered the next question")
    resolved = [e for e in _events(musec, sid) if e["type"] == "approval_resolved"]
    assert [e["decision"] for e in resolved] == ["allow" if first_answer == "y" else "deny", "deny"]
    assert len({e["by"] for e in resolved}) == 1  # both by the first terminal


def test_ctrl_c_in_an_attached_terminal_says_in_every_terminal_who_interrupted(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory,
) -> None:
    # G10: any terminal on the session may drive it (DESIGN §4, README `musec attach`), so a
    # Ctrl-C in the attached one interrupts the turn; the terminal that started the turn was
    # left with a bare "[interrupted]", wondering. Now each terminal says who did it.
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "echo started; sleep 60"}}],
        [{"text": "Stopped as asked."}],
    ]}))
    first = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("run something slow", "Enter")
    first.wait_for(lambda s: "● bash(echo started; sleep 60)" in s, "the tool call")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    second.wait_for(lambda s: "● bash(echo started; sleep 60)" in s, "the tool call in the attached terminal")
    second.send("C-c")
    first.wait_for(lambda s: "the turn was interrupted in another terminal" in s and prompt_after(s, "interrupted"),
                   "the owner told that another terminal interrupted, then its prompt", timeout_s=20)
    second.wait_for(lambda s: "the turn was interrupted (by you)" in s, "the attached terminal told it did")
    assert "in another terminal" not in second.screen().rpartition("[interrupting…]")[2]
    events = [e for e in _events(musec, sid) if e["type"] == "turn_ended"]
    assert events[-1]["exit_reason"] == "interrupted" and events[-1]["interrupted_by"].startswith("client:")
