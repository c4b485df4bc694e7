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
