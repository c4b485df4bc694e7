"""More of the interactive client in a real terminal (issue 18): ``/compact`` and the
status line, and the question asked before a session in the home directory. The helpers
are tests/client/test_interactive_tmux.py's."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import Tmux, prompt_after
from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


def _leave(term: Tmux) -> None:
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")


def _percent(screen: str) -> int:
    """The context percent of the last status line on the screen."""
    return int(re.findall(r"ctx (\d+)% of 200k", screen)[-1])


def test_compact_says_so_and_the_context_percent_drops(musec: Musec, buggy_repo: Path, tmux_factory) -> None:
    from tests.support.anthropic_server import AnthropicServer, message

    # Long answers and usage that matches them (about 3k tokens a turn): the meter's
    # estimate and the provider's count agree, as they do with a real model.
    long = " ".join(f"line {i} of the answer about the pager." for i in range(150))
    with AnthropicServer() as server:
        server.enqueue(*(message([{"type": "text", "text": f"{name} {long} End of answer {n + 1}."}], input_tokens=10 + 3_000 * n,
                                 output_tokens=3_000) for n, name in enumerate(("First.", "Second.", "Third."))),
                       message([{"type": "text", "text": "Summary: three questions about the pager, answered."}],
                               input_tokens=9_000))
        env = {**musec.env, "ANTHROPIC_API_KEY": "test-key-not-real", "ANTHROPIC_BASE_URL": server.base_url}
        term = tmux_factory(f"{BIN / 'musec'} --model anthropic/claude-sonnet-4-6 --approval auto", env, buggy_repo)
        term.wait_for(lambda s: "›" in s, "the prompt")
        for n, say in enumerate(("one", "two", "three"), 1):
            term.send(f"question {say}", "Enter")
            end = f"End of answer {n}."
            term.wait_for(lambda s, end=end: end in s and prompt_after(s, end), f"answer {n}", timeout_s=60)
        before = _percent(term.wait_for(lambda s: "ctx 5% of 200k" in s, "the status line after three turns",
                                        timeout_s=60))
        term.send("/compact", "Enter")
        screen = term.wait_for(lambda s: re.search(r"compacted: about \d+ tokens to \d+", s)
                               and prompt_after(s, "compacted:") and "% of 200k" in s.rpartition("compacted:")[2],
                               "/compact's answer and the status line under the next prompt")
        after = _percent(screen.rpartition("compacted:")[2])
        assert after < before, screen
        _leave(term)
        assert len(server.requests) == 4  # three turns and the summary's call
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    types = [json.loads(x)["type"] for x in musec("log", sid, "--json").stdout.splitlines()]
    assert types.count("compaction_finished") == 1


@pytest.mark.parametrize("answer", ["n", "y", "Escape"])
def test_a_session_in_the_home_directory_is_asked_about(musec: Musec, tmp_path: Path, tmux_factory, answer: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "Hello from home."}]]}))
    command = f"env HOME={shlex.quote(str(home))} {BIN / 'musec'} --model scripted:{script} --approval auto"
    term = tmux_factory(command, musec.env, home)
    screen = term.wait_for(lambda s: "Work here anyway?" in s, "the question")
    assert f"{home} is your home directory" in screen and "›" not in screen  # asked before the session starts
    term.send(*([answer] if answer == "Escape" else [answer, "Enter"]))  # Esc says no by itself
    if answer != "y":
        screen = term.wait_for(lambda s: "EXITED=2" in s, "the client to exit")
        assert "not started" in screen and "--allow-home-workspace" in screen
        assert "^[" not in screen  # Esc is not echoed
        if answer == "Escape":
            assert "Esc: no):\nmusec: not started" in screen  # the refusal on a line of its own
        assert musec.json("sessions", "--all", "--json") == []
        return
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("hi", "Enter")
    term.wait_for(lambda s: "Hello from home." in s, "the answer")
    _leave(term)


def test_esc_at_an_approval_interrupts_the_turn_without_echo(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                             tmux_factory) -> None:
    """Issue 18: Esc at the question showed ``^[`` and did nothing (the next key then read as
    ``^[a``); it interrupts the turn, as Ctrl-C does there and as the question says."""
    script = tmp_path / "ask.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "echo first"}}],
        [{"tool": "bash", "input": {"command": "echo second"}}],
        [{"expect_result": "second"}, {"text": "Ran it."}]]}))
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("go", "Enter")
    screen = term.wait_for(lambda s: "Allow bash(echo first)?" in s, "the question")
    assert "Esc or Ctrl-C interrupts" in screen
    term.send("Escape")
    screen = term.wait_for(lambda s: "[interrupting…]" in s and prompt_after(s, "[interrupting…]"),
                           "the interrupted turn and the prompt")
    assert "^[" not in screen
    # The next question reads its answer cleanly: typed keys are echoed, Backspace edits, arrows are ignored.
    term.send("again", "Enter")
    term.wait_for(lambda s: "Allow bash(echo second)?" in s, "the next question")
    term.send("x", "BSpace", "Left", "y")
    term.wait_for(lambda s: "interrupts): y" in s.rpartition("Allow bash(echo second)?")[2], "the answer typed")
    term.send("Enter")
    screen = term.wait_for(lambda s: "Ran it." in s and prompt_after(s, "Ran it."), "the call run and the answer")
    assert "^[" not in screen and "[D" not in screen
    _leave(term)
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert [e["decision"] for e in events if e["type"] == "approval_resolved"] == ["allow"]
    assert [e["exit_reason"] for e in events if e["type"] == "turn_ended"] == ["interrupted", "finished"]
