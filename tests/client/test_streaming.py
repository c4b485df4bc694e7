"""The streamed answer's rendering (client/streaming.py, render.Renderer): blocks printed as
they complete look exactly like the whole message rendered at once, whatever the cuts of
the stream; a fence or a list is never cut; an interrupted answer is marked."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from musec.client.render import Renderer, interrupted_words
from musec.client.streaming import LiveArea, MarkdownStream
from rich.console import Console
from rich.markdown import Markdown

DOCS = [
    "# Title\n\nSome **text** here.\n\n- a\n- b\n\n- c\n\n1. one\n\n2. two\n\n```py\nx = 1\n\ny = 2\n```\n\nEnd.",
    "Para one\nstill one.\n\n## Head\n\n> quote\n\n> another\n\n---\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nlast",
    "- item\n\n    continued\n\n- next\n\nafter the list\n\n~~~\ncode\n\n```\nstill code\n~~~\n\n2024 was a year.\n\n*emph* start",
    "> a quote first\n\n| t | u |\n|---|---|\n| 1 | 2 |\n\n````md\n```\ninner\n```\n````\n\n3) three\n4) four\n\n***\n\n`code` at the start",
    "plain text without any blank line at all, " * 5,
]


def _console(buf: io.StringIO) -> Console:
    # Not a terminal: only what is printed for good is written (no live frames), in colour.
    return Console(file=buf, width=72, force_terminal=False, color_system="truecolor", highlight=False, emoji=False)


def _whole(doc: str) -> str:
    buf = io.StringIO()
    _console(buf).print(Markdown(doc, code_theme="monokai", hyperlinks=False))
    return buf.getvalue()


def _streamed(doc: str, cuts: list[int]) -> str:
    buf = io.StringIO()
    area = LiveArea(_console(buf), lambda: "working")
    points = sorted({c for c in cuts if 0 < c < len(doc)})
    for a, b in zip([0, *points], [*points, len(doc)], strict=True):
        area.feed(doc[a:b])
    assert area.finish() == doc
    return buf.getvalue()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(DOCS), st.lists(st.integers(min_value=0, max_value=400), max_size=40))
def test_blocks_printed_as_they_complete_look_like_the_whole_message(doc: str, cuts: list[int]) -> None:
    assert _streamed(doc, cuts) == _whole(doc)  # styles and spacing, byte for byte


def test_each_piece_at_a_time_and_one_character_at_a_time() -> None:
    for doc in DOCS:
        assert _streamed(doc, list(range(len(doc)))) == _whole(doc)


@given(st.sampled_from(DOCS), st.lists(st.integers(min_value=0, max_value=400), max_size=40))
def test_a_block_is_complete_markdown_never_cut_in_a_fence_or_a_list(doc: str, cuts: list[int]) -> None:
    stream, blocks = MarkdownStream(), []
    points = sorted({c for c in cuts if 0 < c < len(doc)})
    for a, b in zip([0, *points], [*points, len(doc)], strict=True):
        blocks += stream.feed(doc[a:b])
    rest = stream.finish()
    assert "\n\n".join([*blocks, rest] if rest else blocks).replace("\n", "") == doc.strip("\n").replace("\n", "")
    together = [("x = 1", "y = 2"), ("~~~\ncode", "still code\n~~~"), ("````md", "inner\n```\n````"),  # a fence
                ("- a", "- c"), ("1. one", "2. two"), ("- item", "- next")]  # a list going on after a blank line
    for block in [*blocks, rest]:
        for first, second in together:
            assert (first in block) == (second in block), block


def test_complete_blocks_are_printed_at_once_the_rest_waits() -> None:
    buf = io.StringIO()
    area = LiveArea(_console(buf), lambda: "working")
    area.feed("First paragraph.\n\n")
    assert "First paragraph." not in buf.getvalue()  # what comes next may go on with it
    area.feed("- a list")
    assert "First paragraph." not in buf.getvalue()  # a list item would (after a list)
    area.feed(", no: a line.\n\nSecond, not complete")
    assert "First paragraph." in buf.getvalue() and "Second" not in buf.getvalue()
    area.feed(" yet.\n\n```py\nprint(1)\n\n")
    assert "Second, not complete yet." in buf.getvalue() and "print" not in buf.getvalue()  # the fence is open
    area.feed("```\n\nEnd.")
    assert "print" in buf.getvalue() and "End." not in buf.getvalue()
    area.finish()
    assert buf.getvalue().count("End.") == 1 and buf.getvalue().count("First paragraph.") == 1


def _renderer(buf: io.StringIO) -> Renderer:
    r = Renderer(buf, color=True, rich=True)
    r._console = _console(buf)  # rich's console on a non-terminal: what is printed for good only
    return r


def _response(text: str, **fields: object) -> dict:
    return {"type": "model_response", "agent": "main", "content": [{"type": "text", "text": text}], **fields}


def test_a_streamed_message_is_printed_once_as_markdown() -> None:
    buf = io.StringIO()
    r = _renderer(buf)
    r.start_wait()
    answer = "## Plan\n\nUse **this**:\n\n```python\nprint(1)\n```\n\nDone."
    for i in range(0, len(answer), 7):
        r.delta(answer[i:i + 7])
    r.event(_response(answer))
    r.event({"type": "tool_started", "agent": "main", "tool": "bash", "input": {"command": "ls"}})
    r.stop_wait(turn_over=True)
    shown = buf.getvalue()
    assert shown.count("Plan") == 1 and shown.count("Done.") == 1 and "**this**" not in shown and "```" not in shown
    assert shown.index("Done.") < shown.index("● ") and "working" not in shown


def test_the_others_and_the_backlog_are_shown_whole_and_an_interruption_is_marked() -> None:
    buf = io.StringIO()
    r = _renderer(buf)
    r.delta("from the scout", agent="scout")  # another agent's text: shown when complete
    assert "from the scout" not in buf.getvalue()
    r.event({**_response("from the scout"), "agent": "scout"})
    r.event(_response("Half an ans", interrupted=True, usage_estimated=True, usage={"input_tokens": 900, "output_tokens": 3}),
            backlog=True)
    shown = buf.getvalue()
    assert "[scout]" in shown and shown.count("from the scout") == 1
    assert "Half an ans" in shown and "answer interrupted (about 3 output tokens, counted in /cost)" in shown


def test_interrupted_words() -> None:
    assert interrupted_words({"usage": {"output_tokens": 12}}) == "answer interrupted (12 output tokens, counted in /cost)"
    assert interrupted_words({}) == "answer interrupted"
