"""The model's answer as it arrives, in a terminal: markdown blocks printed once complete,
the block being written shown live under them, the spinner at the bottom.

How (and why this way):

* Streamed text is cut into complete markdown blocks (``MarkdownStream``): a blank line,
  outside a code fence, followed by a line that starts a new top-level block (not an
  indented continuation, not another item of a list). Each complete block is rendered by
  rich (markdown, code highlighted) and printed for good, into the scrollback, as soon as
  it is complete; nothing printed is ever rewritten, so nothing is duplicated and the
  terminal's scrollback (tmux's too) holds the answer as it will stay. Top-level blocks
  are separated by exactly one blank line, as rich renders a whole document, so the
  blocks printed one by one look like the whole answer rendered at once (a test checks
  it on many documents and random cuts).
* The block still being written (a paragraph, a list, a code block whose fence is not
  closed yet) is rendered as markdown in a live area of the screen (rich's ``Live``), with
  the spinner line under it. The live area is cropped to its last lines so it always fits
  the screen: a live area taller than the screen cannot be erased (its top scrolled away)
  and would be left behind twice. When the block completes (or the message ends) the live
  area is erased and the block printed above it.
* Cost: each block is rendered once, alone (the space rich leaves between two blocks is
  worked out from the first: ``_rendered``), and the live area draws only the end of a
  long block being written (``LIVE_WINDOW_CHARS``), at most every 50 ms. rich still renders
  markdown slowly (about 30 KB a second for short blocks with code), so a message past
  ``PLAIN_AFTER_CHARS`` goes on as plain text, after a line that says so: a 2.4 MB answer
  took minutes, now about two seconds (fresh-user s8 H5; ``bench/stream_render.py``).
* All drawing happens on the client's one thread: rich's refresh thread is off
  (``auto_refresh=False``) and ``LiveArea.tick`` redraws the spinner while the client waits
  for the daemon. With rich's thread, its first frame raced the first printed line and the
  spinner was left glued to the answer (the fresh user's item 21).
* Not in a terminal (a pipe, a headless run), none of this runs: ``render.Renderer``
  writes the streamed text plainly as it comes, and rich is not imported.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_NOT_SPACE = re.compile(r"\S")

PLAIN_AFTER_CHARS = 64 * 1024
"""A message streamed past this many characters goes on as plain text: rich renders
markdown at about 30 KB a second (bench/stream_render.py), so a 2.4 MB answer rendered
took minutes (fresh-user s8 H5); its markdown so far stays as printed."""

LIVE_WINDOW_CHARS = 8 * 1024
"""The block being written is drawn from at most its last this many characters (and
``3 x`` the screen's height in lines): the live area shows only its last lines anyway,
and drawing the whole of a long block at each redraw made streaming it quadratic."""


def plain_words() -> str:
    """The line before the part of a long answer shown as plain text."""
    return f"(a long answer, over {PLAIN_AFTER_CHARS // 1024} KiB: the rest as plain text, not rendered)"


class MarkdownStream:
    """Cuts a streamed markdown text into complete top-level blocks.

    ``feed`` takes each piece as it arrives and returns the blocks it completed (source
    text, in order); ``tail`` is what is not complete yet; ``finish`` returns it at the
    end of the message. Joined with blank lines, the blocks and the final tail are the
    whole text (less blank lines at the cuts).
    """

    def __init__(self) -> None:
        self.text = ""  # everything fed, this message
        self._base = 0  # where the tail starts in ``text``
        self._scanned = 0  # the complete lines of the tail already scanned for fences...
        self._fence = ""  # ...and the fence open at that point ("" when none)
        self.fence_line = ""  # the line that opened that fence
        self._cut = 0  # the latest place a block may end, in ``text`` (0: none yet)

    @property
    def tail(self) -> str:
        """The text after the last complete block."""
        return self.text[self._base:]

    @property
    def done(self) -> int:
        """How much of ``text`` the complete blocks take (where the tail starts)."""
        return self._base

    @property
    def has_tail(self) -> bool:
        """Whether the text after the last complete block holds more than white space
        (without copying it: ``tail`` is as long as the block being written)."""
        return _NOT_SPACE.search(self.text, self._base) is not None

    def feed(self, piece: str) -> list[str]:
        """Add ``piece``; return the blocks it completed."""
        self.text += piece
        blocks = []
        while True:
            end = self.text.find("\n", self._scanned)
            if end < 0:
                break
            line = self.text[self._scanned:end]
            self._line(line)
            self._scanned = end + 1
            if self._cut and line.strip():
                if not line[0].isspace() and not _LIST_ITEM.match(line):
                    blocks.append(self.text[self._base:self._cut].strip("\n"))
                    self._base = self._cut
                self._cut = 0
            if not line.strip() and not self._fence and self.text[self._base:self._scanned].strip():
                self._cut = self._scanned  # a blank line outside a fence: a block may end here
        # A block starting right after the cut (no newline yet) decides on its first character.
        rest = self.text[self._scanned:]
        if self._cut and rest and not rest[0].isspace() and rest[0] not in "-*+0123456789`~":
            blocks.append(self.text[self._base:self._cut].strip("\n"))
            self._base, self._cut = self._cut, 0
        return [b for b in blocks if b.strip()]

    def _line(self, line: str) -> None:
        """Track code fences: a fence closes with the same character, at least as long."""
        found = _FENCE.match(line)
        if not found:
            return
        mark = found.group(1)
        if not self._fence:
            self._fence, self.fence_line = mark, line
        elif mark[0] == self._fence[0] and len(mark) >= len(self._fence) and not line.strip()[len(mark):].strip():
            self._fence = ""

    def flush(self) -> str:
        """The tail, taken now although not complete (the message may go on after it)."""
        rest = self.tail.strip("\n")
        self._base, self._cut = len(self.text), 0
        return rest

    def finish(self) -> str:
        """The tail, at the end of the message; the stream is then empty for the next."""
        rest = self.flush()
        self.text, self._base, self._scanned, self._fence, self.fence_line = "", 0, 0, "", ""
        return rest

    @property
    def in_fence(self) -> bool:
        """Whether the complete lines fed so far leave a code fence open."""
        return bool(self._fence)


class LiveArea:
    """The bottom of the screen while a turn runs: the block being written and the spinner.

    Args:
        console: rich's Console on the terminal.
        spinner_text: what the spinner says now (called at each redraw).
    """

    def __init__(self, console: Any, spinner_text: Callable[[], str]) -> None:
        self.console = console
        self.spinner_text = spinner_text
        self.waiting = False  # the spinner is shown
        self.stream = MarkdownStream()
        self._after: tuple[list[list[Any]], bool] = ([], False)  # the last block printed: its trailing lines, its flag
        self._plain: list[str] | None = None  # past PLAIN_AFTER_CHARS: the message's text from there on...
        self._unprinted: list[str] = []  # ...and what of it is not printed yet (printed by whole lines)
        self._live: Any = None
        self._spinner: Any = None
        self._drawn_at = 0.0
        self._hide_tail = False  # the draw being made leaves the block being written out

    @property
    def streaming(self) -> bool:
        """Whether a message is being streamed (some of its text came)."""
        return bool(self.stream.text) or self._plain is not None

    def feed(self, text: str) -> None:
        """A streamed piece of the main agent's text: complete blocks are printed, the
        rest is drawn live (at most every 50 ms; ``tick`` draws what is left). Past
        ``PLAIN_AFTER_CHARS`` the message goes on as plain text, printed by whole lines."""
        room = PLAIN_AFTER_CHARS - len(self.stream.text)
        if self._plain is None and len(text) > room:  # up to the limit as markdown, the rest plain
            if room > 0:
                self._feed_markdown(text[:room])
            self._go_plain()
            text = text[max(room, 0):]
        if self._plain is not None:
            self._plain.append(text)
            self._unprinted.append(text)
            if "\n" in text and time.monotonic() - self._drawn_at >= 0.05:
                self._print_plain(final=False)
            return
        self._feed_markdown(text)

    def _feed_markdown(self, text: str) -> None:
        for block in self.stream.feed(text):
            self._print_block(block, last=False)
        self._show()
        if time.monotonic() - self._drawn_at >= 0.05:
            self._draw()

    def finish(self) -> str:
        """The message is complete: print what was not printed yet; return the whole
        text streamed (to compare with the logged message)."""
        whole = self.stream.text
        if self._plain is not None:
            self._print_plain(final=True)
            whole += "".join(self._plain)
            self._plain = None
            self.stream.finish()
        else:
            rest = self.stream.finish()
            if rest.strip():
                self._print_block(rest, last=True)
        self._after = ([], False)
        self._show()
        return whole

    def print(self, renderable: Any, **kwargs: Any) -> None:
        """Print above the live area (a line of an event)."""
        self.console.print(renderable, **kwargs)

    def _print_block(self, source: str, *, last: bool) -> None:
        """Print a complete block for good, as it is in the whole message: the space
        before it (which depends on the block before: ``_space_after``), its lines, and
        when it is the ``last`` of the message, the space after it as rich prints a
        message. Each block is rendered once."""
        lines, own, new_line = _rendered(self.console, source)
        kept = lines if last else _trimmed(lines)
        self.console.print(_Lines(self._gap(own) + kept))
        self._after = ([], False) if last else (lines[len(kept):], new_line)
        # rich drew the live area as it was (with this block in it) under the block: the block
        # being written now, at most every 50 ms; in between, the spinner alone (drawing
        # the block at each of many short blocks cost more than printing them)
        self._draw(tail=time.monotonic() - self._drawn_at >= 0.05)

    def _gap(self, own: bool) -> list[list[Any]]:
        """The lines between the last block printed and the next, which ``own``s a blank
        line before it or not (``_rendered``)."""
        trailing, new_line = self._after
        return trailing + ([[]] if new_line and not own else [])

    def _go_plain(self) -> None:
        """The message is past ``PLAIN_AFTER_CHARS``: say so, and go on as plain text from
        the block being written (its markdown so far is not rendered)."""
        from rich.text import Text

        rest = self.stream.flush()
        self._plain, self._unprinted = [], [rest + "\n"] if rest.strip() else []
        self.console.print(_Lines(self._after[0]))
        self._after = ([], False)
        self.console.print(Text(plain_words(), style="dim"))
        self._show()

    def _print_plain(self, *, final: bool) -> None:
        """Print the plain text that came: its whole lines, or all of it when ``final``."""
        text = "".join(self._unprinted)
        end = len(text) if final else text.rfind("\n") + 1
        self._unprinted = [text[end:]] if end < len(text) else []
        chunk = text[:end]
        if chunk.strip():
            self.console.print(Raw(chunk if chunk.endswith("\n") else chunk + "\n"), end="", crop=False)
        self._draw()

    def wait(self, on: bool) -> None:
        """Show (or take away) the spinner."""
        self.waiting = on
        self._show()

    def tick(self) -> None:
        """Redraw (the spinner moves, the seconds count); called while the client waits."""
        if self._live is not None:
            self._draw()

    def _show(self) -> None:
        """Start the live area when it has something to show, stop (erase) it when not."""
        wanted = self.waiting or self.stream.has_tail
        if wanted and self._live is None:
            from rich.live import Live
            from rich.spinner import Spinner

            self._spinner = Spinner("dots", style="green")
            self._live = Live(get_renderable=self._renderable, console=self.console, auto_refresh=False,
                              transient=True, redirect_stdout=True, redirect_stderr=True)
            self._live.start()
            self._draw()
        elif not wanted and self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def _draw(self, *, tail: bool = True) -> None:
        if self._live is not None:
            self._hide_tail = not tail
            try:
                self._live.refresh()
            finally:
                self._hide_tail = False
            if tail:
                self._drawn_at = time.monotonic()

    def close(self) -> None:
        """Print what is left and erase the live area (before a question, at the turn's end)."""
        self.waiting = False
        if self._plain is not None:
            self._print_plain(final=True)
        rest = self.stream.flush()
        if rest.strip():
            self._print_block(rest, last=False)
        self._show()

    def _renderable(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        parts: list[Any] = []
        height = max(3, self.console.size.height - 2)
        if self.stream.has_tail and not self._hide_tail:
            tail = self.stream.tail.strip("\n")
            window = _window(tail, 3 * height, self.stream.fence_line if self.stream.in_fence else "")
            if window is None:  # the whole block, after the space the block before leaves
                rendered, own, _ = _rendered(self.console, tail)
                lines = _trimmed(self._gap(own) + rendered)
            else:  # a long block: its last lines only (the top is cropped away below anyway)
                lines = _trimmed(_rendered(self.console, window)[0])
            keep = height - (1 if self.waiting else 0)
            parts.append(_Lines(lines[-keep:]))
        if self.waiting and self._spinner is not None:
            self._spinner.update(text=Text(self.spinner_text(), style="dim"))
            parts.append(self._spinner)
        return Group(*parts)


def _window(tail: str, max_lines: int, fence_line: str) -> str | None:
    """The end of a long block being written, to draw: ``None`` when ``tail`` is short
    enough to draw whole; else at most its last ``LIVE_WINDOW_CHARS`` characters and
    ``max_lines`` lines, from a line that starts a paragraph or an item where there is
    one (an indented line would draw as code), reopened with ``fence_line`` when the
    block is a code block whose opening line is cut off."""
    if len(tail) <= LIVE_WINDOW_CHARS and tail.count("\n", 0, LIVE_WINDOW_CHARS) < max_lines:
        return None
    lines = tail[-LIVE_WINDOW_CHARS:].split("\n")
    if len(lines) > 1:
        lines = lines[1:]  # the first may be cut
    lines = lines[-max_lines:]
    if fence_line:
        return "\n".join(lines) if fence_line in lines else "\n".join([fence_line, *lines])
    start = next((i for i, line in enumerate(lines) if line[:1].strip()), 0)
    return "\n".join(lines[start:])


def _rendered(console: Any, source: str) -> tuple[list[list[Any]], bool, bool]:
    """The markdown ``source`` as lines of segments at the console's width (code
    highlighted, no hyperlinks: a link's target would be hidden behind text the model
    chose), whether its first line is a blank line rich put there on its own account, and
    whether rich puts one before what follows it.

    rich puts one empty line before a top-level element when the last element it closed
    asked for it (``MarkdownElement.new_line``: all but a rule and an image;
    ``Markdown.__rich_console__``): the block before's last one, or one inside the element
    (a quote's paragraph). So each block is rendered once, alone, and the space between
    it and the next is the first's trailing lines and that empty line when the first asks
    for it and the second did not put one there itself: the blocks printed one by one are
    the whole message rendered at once (tests/client/test_streaming.py checks it byte for
    byte)."""
    from rich.markdown import Markdown

    markdown = Markdown(source, code_theme="monokai", hyperlinks=False)
    lines = console.render_lines(markdown, console.options.update(height=None), pad=False)
    own, new_line = _new_lines(markdown)
    return lines, own, new_line


def _new_lines(markdown: Any) -> tuple[bool, bool]:
    """rich's ``new_line`` flag where the first top-level element of ``markdown`` is
    rendered (set by an element inside it, since it starts unset) and at the end: the same
    walk over the tokens as ``Markdown.__rich_console__``."""
    from rich.markdown import UnknownElement

    depth, new_line, first = 0, False, None
    for token in markdown._flatten_tokens(markdown.parsed):
        kind = token.type
        if kind in ("text", "hardbreak", "softbreak", "link_open", "link_close", "html_inline"):
            continue
        if token.tag in markdown.inlines and kind not in ("fence", "code_block"):
            continue
        if token.nesting == 1:
            depth += 1
            continue
        depth -= token.nesting == -1
        if depth <= 0 and first is None:
            first = new_line and kind != "inline"
        new_line = (markdown.elements.get(kind) or UnknownElement).new_line
    return bool(first), new_line


def _trimmed(lines: list[list[Any]]) -> list[list[Any]]:
    """``lines`` without their trailing empty lines (the space before a next block, whose
    size depends on that block: printed with it)."""
    end = len(lines)
    while end and all(not seg.text.strip() and not (seg.style and seg.style.bgcolor) for seg in lines[end - 1]):
        end -= 1  # a code block's last line is blank but for its background: kept
    return lines[:end]


class Raw:
    """Text printed as it is: no markup, no wrapping by rich (the terminal wraps), a
    line at a time for nothing (rich's ``Text`` handles each line: ten times slower)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        yield Segment(self.text)


class _Lines:
    """Lines of rendered segments, printed as they are."""

    def __init__(self, lines: list[list[Any]]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        for line in self.lines:
            yield from line
            yield Segment.line()
