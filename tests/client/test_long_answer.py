"""A very long answer is shown in time proportional to its size (fresh-user s8 H5: a 2.4 MB
answer took tens of seconds in the interactive client): its markdown is rendered up to
``streaming.PLAIN_AFTER_CHARS`` and the rest printed as plain text, whole, after a line
that says so; a normal answer looks as before (tests/client/test_streaming.py)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from musec.client.render import Renderer
from musec.client.streaming import PLAIN_AFTER_CHARS, LiveArea
from rich.console import Console

from tests.client.test_interactive_tmux import Tmux, prompt_after
from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec

UNIT = "Some **bold** text and `code`.\n\n```python\nx = 1\n```\n\n- one\n- two\n\n"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _answer(size: int, end: str = "THE END OF IT") -> str:
    return UNIT * (size // len(UNIT)) + end


def _plain_console(buf: io.StringIO) -> Console:
    # Not a terminal: only what is printed for good is written.
    return Console(file=buf, width=72, force_terminal=False, color_system="truecolor", highlight=False, emoji=False)


@pytest.mark.parametrize("piece", [40, 10**7])  # streamed in deltas, or in one (the scripted model's way)
def test_past_the_limit_an_answer_goes_on_as_plain_text_whole(piece: int) -> None:
    text = _answer(3 * PLAIN_AFTER_CHARS) + " " + "long-line " * 20_000 + "\n\nlast"
    buf = io.StringIO()
    area = LiveArea(_plain_console(buf), lambda: "working")
    for i in range(0, len(text), piece):
        area.feed(text[i:i + piece])
    assert area.finish() == text
    shown = buf.getvalue()
    head, note, rest = shown.partition(f"over {PLAIN_AFTER_CHARS // 1024} KiB: the rest as plain text")
    assert note and "**bold**" not in head and "bold" in head  # rendered up to the limit...
    assert rest.count("**bold**") > 100 and rest.count("```python") > 100  # ...then as it came
    assert "long-line " * 20_000 in rest and rest.rstrip().endswith("last")  # nothing cut to the width
    assert len(head) < 30 * PLAIN_AFTER_CHARS


def test_a_long_answer_not_streamed_here_is_shown_the_same_way() -> None:
    text = _answer(3 * PLAIN_AFTER_CHARS)
    buf = io.StringIO()
    renderer = Renderer(buf, color=True, rich=True)
    renderer._console = _plain_console(buf)
    renderer.event({"type": "model_response", "agent": "main", "content": [{"type": "text", "text": text}]},
                   backlog=True)
    head, note, rest = buf.getvalue().partition("the rest as plain text")
    assert note and "**bold**" not in head and rest.count("**bold**") > 100 and "THE END OF IT" in rest


def test_a_megabyte_streamed_through_the_live_area_is_shown_to_its_end() -> None:
    # Its cost is bench/stream_render.py's (no timed tests); pytest's timeout catches a return
    # to one render per block per draw, which took minutes here.
    text = _answer(1_000_000)
    out = Terminal()
    renderer = Renderer(out=out, color=True, rich=True)  # rich on a terminal: the live area, the spinner
    renderer.start_wait()
    for i in range(0, len(text), 40):
        renderer.delta(text[i:i + 40])
    renderer.event({"type": "model_response", "agent": "main", "content": [{"type": "text", "text": text}]})
    renderer.stop_wait(turn_over=True)
    shown = out.getvalue()
    assert "THE END OF IT" in shown and "the rest as plain text" in shown


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_a_two_megabyte_answer_in_the_interactive_client(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                        tmux_factory) -> None:
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"turns": [[{"text": _answer(2_400_000)}]]}))
    term: Tmux = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("write a lot", "Enter")
    screen = term.wait_for(lambda s: "THE END OF IT" in s and prompt_after(s, "THE END OF IT"), "the answer and a prompt",
                           timeout_s=60)
    assert "THE END OF IT" in screen
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
