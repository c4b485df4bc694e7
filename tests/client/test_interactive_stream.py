"""The answer streams in the interactive client and in a terminal attached to the same
session (issue 18, fresh user 14 and 21): text on screen before the turn ends, the spinner
never left behind, an interrupted answer's text kept, shown and counted. Real daemons, a
local Anthropic server whose stream pauses until the test releases it, real terminals."""

from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import (
    _leave,
    _scripted,
    prompt_after,
    tmux_factory,  # noqa: F401 - the fixture
)
from tests.conftest import BIN, Musec
from tests.support.anthropic_server import AnthropicServer, message, paused

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]

ANSWER = ("## Streaming now\n\nThe first paragraph arrives early.\n\n```python\ndef first_page(items):\n"
          "    return items[:3]\n```\n\nThe LAST paragraph comes after the pause.")


@pytest.fixture
def terms(tmux_factory):  # noqa: F811 - the fixture imported above
    """Makes terminals (``Tmux``), each closed at the end."""
    return tmux_factory


SPINNER = re.compile(r"working \d+s · \d+ tokens")


def _env(musec: Musec, server: AnthropicServer) -> dict[str, str]:
    return {**musec.env, "ANTHROPIC_API_KEY": "test-key-not-real", "ANTHROPIC_BASE_URL": server.base_url}


def _events(musec: Musec, repo: Path) -> tuple[str, list[dict]]:
    sid = musec.json("sessions", "--workspace", str(repo), "--json")[0]["id"]
    return sid, [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]


def _no_spinner_glued(screen: str) -> None:
    """The spinner is a line of its own, and at most one (at the bottom) is on the screen."""
    lines = [ln for ln in screen.splitlines() if SPINNER.search(ln)]
    assert len(lines) <= 1, screen
    for ln in lines:
        assert ln.strip().endswith("(Esc or Ctrl-C interrupts)"), screen


def test_a_slow_answer_streams_in_every_terminal_before_the_turn_ends(musec: Musec, buggy_repo: Path, terms) -> None:
    gate = threading.Event()
    with AnthropicServer() as server:
        server.enqueue(paused(message([{"type": "text", "text": ANSWER}], input_tokens=1200, output_tokens=60),
                              "arrives early", gate))
        one = terms(f"{BIN / 'musec'} --model anthropic/claude-sonnet-4-6 --approval auto", _env(musec, server), buggy_repo)
        one.wait_for(lambda s: "›" in s, "the prompt")
        sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
        two = terms(f"{BIN / 'musec'} attach {sid}", _env(musec, server), buggy_repo)
        two.wait_for(lambda s: prompt_after(s, "attached"), "the attached terminal's prompt")
        one.send("stream it", "Enter")
        for term in (one, two):  # the first half, rendered, while the model is still writing; the spinner under it
            screen = term.wait_for(lambda s: "The first paragraph arrives early." in s and SPINNER.search(s) is not None,
                                   "the streamed first half and the spinner")
            assert "The LAST paragraph" not in screen and "## Streaming" not in screen and "Streaming now" in screen
            assert screen.index("The first paragraph") < SPINNER.search(screen).start()
            _no_spinner_glued(screen)
        gate.set()
        for term in (one, two):
            screen = term.wait_for(lambda s: "The LAST paragraph comes after the pause." in s
                                   and prompt_after(s, "The LAST paragraph"), "the whole answer and the prompt")
            assert screen.count("Streaming now") == 1 and screen.count("The first paragraph arrives early.") == 1
            assert screen.count("def first_page(items):") == 1 and "```" not in screen
            assert not SPINNER.search(screen), screen  # gone at the turn's end
        _leave(two)
        _leave(one)


def test_the_spinner_is_erased_before_the_answer_and_comes_back_while_waiting(
    musec: Musec, buggy_repo: Path, tmp_path: Path, terms,
) -> None:
    wait = "while [ ! -e go ]; do sleep 0.05; done; echo went"
    script = _scripted(tmp_path, [[{"text": "## Plan\n\nI will run a command."}, {"tool": "bash", "input": {"command": wait}}],
                                  [{"text": "Done."}]])
    term = terms(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("plan it", "Enter")
    screen = term.wait_for(lambda s: "● bash(while" in s and SPINNER.search(s.rpartition("● bash(while")[2]) is not None,
                           "the call running, the spinner back under it")
    assert any(ln.strip() == "Plan" for ln in screen.splitlines()), screen  # the heading alone on its row (fresh user 21)
    _no_spinner_glued(screen)
    (buggy_repo / "go").write_text("")
    screen = term.wait_for(lambda s: "Done." in s and prompt_after(s, "Done."), "the end of the turn")
    assert not SPINNER.search(screen), screen
    _leave(term)


def test_an_interrupted_answer_is_kept_shown_everywhere_counted_and_replayed(musec: Musec, buggy_repo: Path, terms) -> None:
    gate = threading.Event()  # never set: the answer is interrupted while its stream is paused
    with AnthropicServer() as server:
        server.enqueue(paused(message([{"type": "text", "text": ANSWER}], input_tokens=1200, output_tokens=60),
                              "arrives early", gate),
                       message([{"type": "text", "text": "Going on from there."}], input_tokens=1300, output_tokens=6))
        one = terms(f"{BIN / 'musec'} --model anthropic/claude-sonnet-4-6 --approval auto", _env(musec, server), buggy_repo)
        one.wait_for(lambda s: "›" in s, "the prompt")
        sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
        two = terms(f"{BIN / 'musec'} attach {sid}", _env(musec, server), buggy_repo)
        two.wait_for(lambda s: prompt_after(s, "attached"), "the attached terminal's prompt")
        one.send("explain", "Enter")
        one.wait_for(lambda s: "The first paragraph arrives early." in s, "the first half")
        one.send("Escape")
        mark = re.compile(r"answer interrupted \(about (\d+) output tokens, counted in /cost\)")
        for term in (one, two):  # the text streamed stays, marked, in every terminal
            screen = term.wait_for(lambda s: mark.search(s) is not None and prompt_after(s, "answer interrupted"),
                                   "the interrupted answer and the prompt")
            assert screen.count("The first paragraph arrives early.") == 1 and "The LAST paragraph" not in screen
            assert screen.index("The first paragraph") < screen.index("answer interrupted")
            assert not SPINNER.search(screen), screen
        estimated = int(mark.search(screen).group(1))
        assert estimated > 0

        one.send("/cost", "Enter")
        screen = one.wait_for(lambda s: "1 answer was interrupted while streaming" in s, "/cost's answer")
        assert re.search(r"main\s+claude-sonnet-4-6\s+1\s+1200\s+0\s+" + str(estimated) + r"\s", screen), screen
        cost = musec("cost", sid)
        assert cost.returncode == 0 and "1 answer was interrupted while streaming" in cost.stdout
        assert re.search(r"\s1\s+1200\s+0\s+" + str(estimated) + r"\s", cost.stdout), cost.stdout
        report = musec.json("cost", sid, "--json")
        assert report["interrupted"] == 1 and report["total_usd"] > 0

        one.send("go on", "Enter")
        one.wait_for(lambda s: "Going on from there." in s and prompt_after(s, "Going on from there."), "the next answer")
        # The model is given back what it had said, and told it was cut off.
        messages = server.requests[1].body["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        partial = messages[1]["content"][0]["text"]
        assert partial.startswith("## Streaming now") and "The LAST" not in partial
        assert [b["text"] for b in messages[2]["content"]] == ["[the person interrupted this answer here]", "go on"]
        _leave(two)
        _leave(one)
        events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
        (cut,) = [e for e in events if e["type"] == "model_response" and e.get("interrupted")]
        assert cut["interrupted"] == "person" and cut["usage_estimated"] is True and cut["usage"]["input_tokens"] == 1200
        assert cut["content"] == [{"type": "text", "text": partial}]
        replay = musec("replay", sid)
        assert replay.returncode == 0 and "every request re-derived byte for byte" in replay.stdout, replay.stdout
        # Reopened, the transcript shows the partial answer and its mark.
        again = terms(f"{BIN / 'musec'} resume {sid}", _env(musec, server), buggy_repo)
        screen = again.wait_for(lambda s: "Going on from there." in s and prompt_after(s, "Going on from there."), "the resumed transcript")
        assert "The first paragraph arrives early." in screen and mark.search(screen) is not None
        assert screen.index("The first paragraph") < screen.index("answer interrupted") < screen.index("› go on")
        _leave(again)
