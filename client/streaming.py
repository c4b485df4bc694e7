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
        self._cut = 0  # the latest place a block may end, in ``text`` (0: none yet)

    @property
    def tail(self) -> str:
        """The text after the last complete block."""
        return self.text[self._base:]

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
            self._fence = mark
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
        self.text, self._base, self._scanned, self._fence = "", 0, 0, ""
        return rest


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
        self._before = ""  # the last block printed of the message being streamed...
        self._skip = 0  # ...and its number of lines (without the space after it)
        self._live: Any = None
        self._spinner: Any = None
        self._drawn_at = 0.0

    @property
    def streaming(self) -> bool:
        """Whether a message is being streamed (some of its text came)."""
        return bool(self.stream.text)

    def feed(self, text: str) -> None:
        """A streamed piece of the main agent's text: complete blocks are printed, the
        rest is drawn live (at most every 50 ms; ``tick`` draws what is left)."""
        for block in self.stream.feed(text):
            self._print_block(block, last=False)
        self._show()
        if time.monotonic() - self._drawn_at >= 0.05:
            self._draw()

    def finish(self) -> str:
        """The message is complete: print what was not printed yet; return the whole
        text streamed (to compare with the logged message)."""
        whole = self.stream.text
        rest = self.stream.finish()
        if rest.strip():
            self._print_block(rest, last=True)
        self._before, self._skip = "", 0
        self._show()
        return whole

    def print(self, renderable: Any, **kwargs: Any) -> None:
        """Print above the live area (a line of an event)."""
        self.console.print(renderable, **kwargs)

    def _print_block(self, source: str, *, last: bool) -> None:
        """Print a complete block for good, as it is in the whole message: the space
        before it (which depends on it and on the block before), its lines, and when it
        is the ``last`` of the message, the space after it as rich prints a message."""
        lines = _rendered(self.console, source, self._before, self._skip)
        self.console.print(_Lines(lines if last else _trimmed(lines)))
        self._before, self._skip = ("", 0) if last else (source, len(_trimmed(_rendered(self.console, source))))
        self._draw()  # the live area as it is now (rich drew the one before under the block)

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
        wanted = self.waiting or bool(self.stream.tail.strip())
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

    def _draw(self) -> None:
        if self._live is not None:
            self._live.refresh()
            self._drawn_at = time.monotonic()

    def close(self) -> None:
        """Print what is left and erase the live area (before a question, at the turn's end)."""
        self.waiting = False
        rest = self.stream.flush()
        if rest.strip():
            self._print_block(rest, last=False)
        self._show()

    def _renderable(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        parts: list[Any] = []
        height = max(3, self.console.size.height - 2)
        tail = self.stream.tail.strip("\n")
        if tail.strip():
            lines = _trimmed(_rendered(self.console, tail, self._before, self._skip))
            keep = height - (1 if self.waiting else 0)
            parts.append(_Lines(lines[-keep:]))
        if self.waiting and self._spinner is not None:
            self._spinner.update(text=Text(self.spinner_text(), style="dim"))
            parts.append(self._spinner)
        return Group(*parts)


def _rendered(console: Any, source: str, before: str = "", skip: int = 0) -> list[list[Any]]:
    """The markdown ``source`` as lines of segments at the console's width (code
    highlighted, no hyperlinks: a link's target would be hidden behind text the model
    chose), as they are in a rendering of the whole message where the block ``before``
    comes just before it. rich's space between two blocks depends on both (a table
    after a paragraph starts two lines down, after a rule three), so the two are rendered
    together and the ``skip`` lines of ``before`` (rendered alone, trimmed) are cut off."""
    from rich.markdown import Markdown

    def render(text: str) -> list[list[Any]]:
        return console.render_lines(Markdown(text, code_theme="monokai", hyperlinks=False),
                                    console.options.update(height=None), pad=False)

    if not before:
        return render(source)
    return render(f"{before}\n\n{source}")[skip:]


def _trimmed(lines: list[list[Any]]) -> list[list[Any]]:
    """``lines`` without their trailing empty lines (the space before a next block, whose
    size depends on that block: printed with it)."""
    end = len(lines)
    while end and all(not seg.text.strip() and not (seg.style and seg.style.bgcolor) for seg in lines[end - 1]):
        end -= 1  # a code block's last line is blank but for its background: kept
    return lines[:end]


class _Lines:
    """Lines of rendered segments, printed as they are."""

    def __init__(self, lines: list[list[Any]]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        for line in self.lines:
            yield from line
            yield Segment.line()
