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
import subprocess
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


def _until_logged(musec: Musec, sid: str, predicate, what: str, timeout_s: float = 30) -> list[dict]:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = _events(musec, sid)
        if predicate(events):
            return events
        time.sleep(0.1)  # polling a log another process writes
    raise AssertionError(f"timed out waiting for {what}; the log's types: {[e['type'] for e in _events(musec, sid)]}")


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_terminal_closed_during_its_turn_interrupts_it_unless_another_follows(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory, signum: int,
) -> None:
    # G16: the interactive client killed by SIGHUP (its terminal closed) or SIGTERM left its
    # turn and the command running in the daemon with nobody watching. Now: with another
    # terminal attached the turn goes on there; alone, it is interrupted.
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "echo started; sleep 60"}}],
        [{"tool": "bash", "input": {"command": "echo again; sleep 60"}}],
        [{"text": "done"}],
    ]}))
    command = f"sh -c 'echo PID=$$; exec {BIN / 'musec'} --model scripted:{script} --approval auto'"
    first = tmux_factory(command, musec.env, buggy_repo)
    pid = _pid(first)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("run something slow", "Enter")
    first.wait_for(lambda s: "● bash(echo started; sleep 60)" in s, "the tool call")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    second.wait_for(lambda s: "● bash(echo started; sleep 60)" in s, "the tool call in the attached terminal")
    os.kill(pid, signum)
    first.wait_for(lambda s: f"EXITED={128 + signum}" in s, "the first client to exit with 128 + the signal")
    # Another terminal follows: the turn goes on for it (its command still runs).
    assert [e["type"] for e in _events(musec, sid)].count("turn_ended") == 0
    second.send("C-c")  # that terminal stops it, and goes on with the session alone
    second.wait_for(lambda s: prompt_after(s, "interrupted"), "the attached terminal's prompt")
    second.send("go again", "Enter")
    second.wait_for(lambda s: "● bash(echo again; sleep 60)" in s, "the second turn's tool call")
    second_pid = int(subprocess.run(["tmux", "-L", second.server, "display", "-p", "-t", "0", "#{pane_pid}"],
                                    capture_output=True, text=True, check=True).stdout.split()[0])
    children = subprocess.run(["pgrep", "-P", str(second_pid)], capture_output=True, text=True).stdout.split()
    os.kill(int(children[0]) if children else second_pid, signum)
    # Alone, its turn is interrupted: the command does not run on for a minute.
    events = _until_logged(musec, sid, lambda es: [e["type"] for e in es].count("turn_ended") == 2,
                           "the second turn to end", timeout_s=20)
    assert [e["exit_reason"] for e in events if e["type"] == "turn_ended"] == ["interrupted", "interrupted"]


def test_an_answer_typed_after_another_terminal_answered_is_not_sent_as_a_message(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory,
) -> None:
    # s8 J2: the second terminal saw the question withdrawn ("answered in another terminal"),
    # then its person's `y` Enter went to the agent as a new message "y" (after a denied
    # edit, read as "yes, go ahead"). A lone answer to a question that is gone is dropped.
    script = tmp_path / "late.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "edit_file", "input": {"path": "pager.py", "old_string": "def ", "new_string": "def  "}}],
        [{"text": "Left it as it was."}],
        [{"text": "a second turn ran"}],
    ]}))
    first = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("change the pager", "Enter")
    first.wait_for(lambda s: "[y]es / [n]o" in s, "the question in the first terminal")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    second.wait_for(lambda s: "[y]es / [n]o" in s, "the question in the second terminal")
    first.send("n", "Enter")
    second.wait_for(lambda s: "Left it as it was." in s and prompt_after(s, "Left it as it was."),
                    "the question withdrawn, the turn's end and the prompt in the second terminal")
    second.send("y", "Enter")  # a moment too late
    screen = second.wait_for(lambda s: "'y' was not sent" in s, "the late answer dropped with a note")
    assert "a second turn ran" not in screen and "a second turn ran" not in first.screen()
    second.send("y", "Enter")  # typed again, it is a message as any other
    second.wait_for(lambda s: "a second turn ran" in s, "the second turn")
    texts = [e.get("text") for e in _events(musec, sid) if e["type"] == "user_message"]
    assert texts == ["change the pager", "y"], texts


def test_an_answer_typed_after_another_terminal_answered_while_the_turn_goes_on_is_not_sent(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory,
) -> None:
    # The same late `y`, typed while the allowed command still runs: it was queued and sent
    # as the next message when the turn ended.
    script = tmp_path / "late.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "sleep 4; echo slept"}}],
        [{"text": "Ran it."}],
        [{"text": "a second turn ran"}],
    ]}))
    first = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("sleep a while", "Enter")
    first.wait_for(lambda s: "[y]es / [n]o" in s, "the question in the first terminal")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    second.wait_for(lambda s: "[y]es / [n]o" in s, "the question in the second terminal")
    first.send("y", "Enter")
    second.wait_for(lambda s: "(answered in another terminal)" in s, "the question withdrawn in the second terminal")
    second.send("y", "Enter")  # a moment too late: the command runs on
    screen = second.wait_for(lambda s: "'y' was not sent" in s, "the late answer dropped with a note", timeout_s=40)
    assert "Ran it." in screen and "a second turn ran" not in screen
    texts = [e.get("text") for e in _events(musec, sid) if e["type"] == "user_message"]
    assert texts == ["sleep a while"], texts


def test_leaving_with_ctrl_d_keeps_the_session_for_an_attached_terminal(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory,
) -> None:
    # fresh-user s8 K3: Ctrl-D in the terminal that started the session ended it under the
    # terminal attached to it, which was using it.
    script = tmp_path / "two.json"
    script.write_text(json.dumps({"turns": [[{"text": "First answer."}], [{"text": "Second answer."}]]}))
    first = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("one", "Enter")
    first.wait_for(lambda s: "First answer." in s and prompt_after(s, "First answer."), "the first answer")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    second.wait_for(lambda s: "First answer." in s and "›" in s.rpartition("First answer.")[2], "the attached prompt")
    first.send("C-d")
    screen = first.wait_for(lambda s: "EXITED=" in s, "the first terminal to leave")
    assert "EXITED=0" in screen and f"session {sid} stays open" in screen, screen
    second.send("two", "Enter")
    second.wait_for(lambda s: "Second answer." in s, "the answer in the terminal that stayed")
    assert not [e for e in _events(musec, sid) if e["type"] == "session_ended"]
