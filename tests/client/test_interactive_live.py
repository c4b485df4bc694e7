"""Several terminals on one session, each following it live (the fresh user's F-1, F-1a,
F-1b, F-1c, F-2): a turn shows in every terminal whoever started it, an attached terminal
asks the approvals, attach ends with the session, and replayed transcripts show what the
person asked. Real daemons, the scripted model, real terminals (tmux)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import (
    _leave,
    _scripted,
    prompt_after,
    tmux_factory,  # noqa: F401 - the fixture
)
from tests.conftest import BIN, Musec

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


@pytest.fixture
def terminals(tmux_factory):  # noqa: F811 - the fixture imported above
    """Makes terminals (``Tmux``), each closed at the end."""
    return tmux_factory


def _gated(n: int) -> list[dict]:
    """A turn that says ``running N``, then runs a command that waits for the file ``goN``
    (the test releases it), and the turn after it."""
    wait = f"while [ ! -e go{n} ]; do sleep 0.05; done; echo slow{n}"
    return [[{"text": f"running {n}"}, {"tool": "bash", "input": {"command": wait}}], [{"text": f"after {n}"}]]


def _session_id(musec: Musec, repo: Path) -> str:
    sessions = musec.json("sessions", "--workspace", str(repo), "--json")
    assert len(sessions) == 1, sessions
    return sessions[0]["id"]


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]


def _busy(screen: str, after: str) -> bool:
    """The spinner, and no idle prompt, after the last ``after`` on the screen."""
    tail = screen.rpartition(after)[2]
    return re.search(r"working \d+s", tail) is not None and not prompt_after(screen, after)


def test_two_terminals_follow_each_others_turns_live(musec: Musec, buggy_repo: Path, tmp_path: Path, terminals) -> None:
    script = _scripted(tmp_path, [*_gated(1), *_gated(2)], name="live.json")
    one = terminals(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    one.wait_for(lambda s: "›" in s, "the first terminal's prompt")
    sid = _session_id(musec, buggy_repo)
    two = terminals(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    # The attached terminal's status line tells the session's model and approval mode.
    two.wait_for(lambda s: "scripted:live.json · ctx" in s and "approval auto" in s and prompt_after(s, "attached"),
                 "the attached terminal's prompt and status line")

    one.send("from one", "Enter")
    # The other terminal shows the message (who sent it), the text, the call and the spinner, live.
    screen = two.wait_for(lambda s: "● bash(while [ ! -e go1 ]" in s and _busy(s, "● bash"), "terminal one's turn, live")
    assert "› from one  (from another terminal)" in screen and "running 1" in screen
    (buggy_repo / "go1").write_text("")
    two.wait_for(lambda s: "after 1" in s and prompt_after(s, "after 1"), "the end of terminal one's turn")
    one.wait_for(lambda s: "after 1" in s and prompt_after(s, "after 1"), "terminal one's own answer")

    two.send("from two", "Enter")
    screen = one.wait_for(lambda s: "● bash(while [ ! -e go2 ]" in s and _busy(s, "● bash(while [ ! -e go2 ]"),
                          "terminal two's turn in terminal one, live, with the spinner instead of the prompt")
    assert "› from two  (from another terminal)" in screen and "running 2" in screen
    assert "after 1" not in screen.rpartition("from two")[2]  # shown once, not a turn late
    (buggy_repo / "go2").write_text("")
    one.wait_for(lambda s: "after 2" in s and prompt_after(s, "after 2"), "the end of terminal two's turn in terminal one")
    screen = two.wait_for(lambda s: "after 2" in s and prompt_after(s, "after 2"), "terminal two's own answer")
    assert screen.count("after 1") == 1 and "(from another terminal)" not in screen.rpartition("from two")[2]

    _leave(two)  # attach leaves the session running
    one.send("/exit", "Enter")
    one.wait_for(lambda s: "EXITED=0" in s, "the first client to exit")
    assert [e["text"] for e in _events(musec, sid) if e["type"] == "user_message"] == ["from one", "from two"]


def test_an_attached_terminal_asks_the_approval_of_a_turn_started_elsewhere(
    musec: Musec, buggy_repo: Path, tmp_path: Path, terminals,
) -> None:
    script = _scripted(tmp_path, [[{"text": "editing"}, {"tool": "write_file", "input": {"path": "new.txt", "content": "x\n"}}],
                                  [{"text": "wrote it"}], [{"text": "more"}]], name="appr.json")
    one = terminals(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    one.wait_for(lambda s: "›" in s, "the first terminal's prompt")
    sid = _session_id(musec, buggy_repo)
    two = terminals(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    two.wait_for(lambda s: prompt_after(s, "attached"), "the attached terminal's prompt")
    one.send("write it", "Enter")
    one.wait_for(lambda s: "Allow write_file(new.txt)?" in s, "the question in the first terminal")
    # Nothing typed in the second terminal: the question is there as soon as it is asked.
    two.wait_for(lambda s: "Allow write_file(new.txt)?" in s, "the question in the attached terminal")
    two.send("y", "Enter")
    two.wait_for(lambda s: "wrote it" in s and prompt_after(s, "wrote it"), "the answer after the approval")
    one.wait_for(lambda s: "(answered in another terminal)" in s and "wrote it" in s, "the first terminal sees it answered")
    assert (buggy_repo / "new.txt").read_text() == "x\n"
    _leave(two)
    _leave(one)
    events = _events(musec, sid)
    assert [e["text"] for e in events if e["type"] == "user_message"] == ["write it"]  # no stray "y" message
    assert [e["decision"] for e in events if e["type"] == "approval_resolved"] == ["allow"]


def test_attach_in_a_terminal_ends_with_the_session_and_its_exit_code(
    musec: Musec, buggy_repo: Path, tmp_path: Path, terminals,
) -> None:
    # One turn, then the turn limit: the run ends max_turns (exit 4), and so does attach.
    script = _scripted(tmp_path, _gated(1), name="limit.json")
    run = subprocess.Popen([str(BIN / "musec"), "run", "--model", f"scripted:{script}", "--approval", "auto",
                            "--max-turns", "1", "headless for attach"], cwd=buggy_repo, env=musec.env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert run.stderr is not None
        first = run.stderr.readline().decode()
        assert first.startswith("session "), first
        sid = first.split()[1]
        term = terminals(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
        screen = term.wait_for(lambda s: "● bash(while [ ! -e go1 ]" in s and _busy(s, "● bash"),
                               "the run's turn in the attached terminal, busy")
        assert "› headless for attach" in screen  # the task that started it
        (buggy_repo / "go1").write_text("")
        screen = term.wait_for(lambda s: "EXITED=" in s, "attach to exit when the session ends", timeout_s=60)
    finally:
        try:  # attach may exit a moment before the headless run does: wait for it, not kill it
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            run.kill()
        run.communicate(timeout=60)  # and closes its pipes
    assert run.returncode == 4
    assert f"session {sid} ended: max_turns" in screen and "EXITED=4" in screen


def test_attach_leaves_with_ctrl_d_and_ends_when_the_starting_terminal_ends_the_session(
    musec: Musec, buggy_repo: Path, tmp_path: Path, terminals,
) -> None:
    script = _scripted(tmp_path, [[{"text": "hello there"}]], name="hello.json")
    one = terminals(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    one.wait_for(lambda s: "›" in s, "the first terminal's prompt")
    sid = _session_id(musec, buggy_repo)
    two = terminals(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    two.wait_for(lambda s: prompt_after(s, "attached"), "the attached terminal's prompt")
    two.send("C-d")
    two.wait_for(lambda s: "EXITED=0" in s, "Ctrl-D to leave attach")
    three = terminals(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    three.wait_for(lambda s: prompt_after(s, "attached"), "another attached terminal's prompt")
    one.send("/exit", "Enter")  # the starting terminal ends the session: finished
    one.wait_for(lambda s: "EXITED=0" in s, "the first client to exit")
    screen = three.wait_for(lambda s: "EXITED=" in s, "the attached terminal to exit with the session")
    assert f"session {sid} ended: finished" in screen and "EXITED=0" in screen


def test_a_resumed_transcript_shows_the_persons_messages(musec: Musec, buggy_repo: Path, tmp_path: Path, terminals) -> None:
    script = _scripted(tmp_path, [[{"text": "first answer"}], [{"text": "second answer"}], [{"text": "third"}]])
    model = f"scripted:{script}"
    done = musec("run", "--model", model, "--approval", "auto", "do the first thing", cwd=buggy_repo)
    assert done.returncode == 0, done.stderr
    sid = _session_id(musec, buggy_repo)
    again = musec("run", "--resume", sid, "then the second", cwd=buggy_repo)
    assert again.returncode == 0, again.stderr
    term = terminals(f"{BIN / 'musec'} resume {sid}", musec.env, buggy_repo)
    screen = term.wait_for(lambda s: "second answer" in s and prompt_after(s, "second answer"), "the replayed transcript")
    lines = [ln.rstrip() for ln in screen.splitlines()]
    first, second = lines.index("› do the first thing"), lines.index("› then the second")
    assert first < next(i for i, ln in enumerate(lines) if "first answer" in ln) < second
    assert "(from another terminal)" not in screen  # history, not news
    _leave(term)
    attached = musec("attach", sid, timeout=30)
    assert "› do the first thing" in attached.stdout and "› then the second" in attached.stdout


def test_goal_turns_and_judgments_are_shown_as_they_run(musec: Musec, buggy_repo: Path, tmp_path: Path, terminals) -> None:
    script = _scripted(tmp_path, [[{"text": "hello"}], [{"text": "goal work 1"}], [{"text": "goal work 2"}],
                                  [{"text": "goal work 3"}]], name="goal.json")
    term = terminals(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("hi", "Enter")
    term.wait_for(lambda s: "hello" in s and prompt_after(s, "hello"), "the first answer")
    term.send('/goal the file done.txt exists --check "test -e done.txt" --max-turns 2', "Enter")
    screen = term.wait_for(lambda s: "goal work 2" in s and "goal g1 budget_limited" in s.rpartition("goal work 2")[2]
                           and prompt_after(s, "budget_limited"), "the goal's turns, judgments and end", timeout_s=60)
    tail = screen.rpartition("goal g1 set")[2]
    assert "goal work 1" in tail and "judgment 1 (check): not met" in tail and "judgment 2 (check): not met" in tail
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=4" in s, "the client to exit (the last turn ended at the goal's turn limit)")


def test_a_message_typed_while_the_agent_works_is_shown_queued_then_sent(
    musec: Musec, buggy_repo: Path, tmp_path: Path, terminals,
) -> None:
    script = _scripted(tmp_path, [*_gated(1), [{"text": "answer to the queued one"}]], name="queue.json")
    term = terminals(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("start", "Enter")
    term.wait_for(lambda s: "● bash(while [ ! -e go1 ]" in s and _busy(s, "● bash"), "the turn, busy")
    term.send("and then this")
    term.wait_for(lambda s: "› and then this▏" in s, "the typed line beside the spinner")
    term.send("Enter")
    term.wait_for(lambda s: "queued: and then this" in s, "the message shown queued")
    sid = _session_id(musec, buggy_repo)
    assert [e["text"] for e in _events(musec, sid) if e["type"] == "user_message"] == ["start"]  # not sent yet
    (buggy_repo / "go1").write_text("")
    screen = term.wait_for(lambda s: "answer to the queued one" in s and prompt_after(s, "answer to the queued one"),
                           "the queued message sent when the turn ended, and its answer")
    assert screen.index("after 1") < screen.index("› and then this\n") < screen.index("answer to the queued one")
    _leave(term)
    assert [e["text"] for e in _events(musec, sid) if e["type"] == "user_message"] == ["start", "and then this"]
