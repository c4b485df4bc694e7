"""Showing a session's events to a person: streamed text, tool calls and results compactly.

On a terminal the model's text streams as markdown rendered by rich (code blocks
highlighted: complete blocks printed as they complete, the one being written live under
them; ``streaming`` says how and why), edits show as coloured unified diffs, and a spinner
shows the elapsed time and tokens while a turn runs; elsewhere (a pipe, a headless run) it
is plain text as it streams. rich is imported only when a terminal is written to, never
for ``musec --version`` or ``sessions``.

Every string taken from an event is cleaned with ``output.safe`` before it is written (or
handed to rich as text, never as markup); the only escapes in the output are this
module's own (colours, rich's styles, the bell) and only on a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from .calls import CallHeads, call_summary
from .calls import short as _short
from .output import counted, cut, safe
from .streaming import PLAIN_AFTER_CHARS, MarkdownStream, Raw, plain_words
from .words import answer_words, goal_words, hook_lines, hook_words, interrupted_words, interrupter_words

__all__ = ["Renderer", "attachment_lines", "goal_words", "hook_words", "interrupted_words", "log_line_summary"]


def _blocks(ev: dict[str, Any]) -> list[dict[str, Any]]:
    content = ev.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _input(ev: dict[str, Any]) -> dict[str, Any]:
    value = ev.get("input")
    return value if isinstance(value, dict) else {}


def _s(ev: dict[str, Any], key: str, default: str = "") -> str:
    """``ev[key]`` as clean text."""
    value = ev.get(key, default)
    return safe(value if isinstance(value, str) else str(value))


class Renderer:
    """Turns event lines and deltas into terminal output (text mode).

    Args:
        out: where to write (default: ``sys.stdout`` when the renderer is made).
        color: colours on or off (default: when ``out`` is a terminal).
        turn_ends: show a turn that ended short of finishing (``needs_approval``...);
            a headless run says it once, at the session's end, instead.
        rich: render with rich on a terminal (markdown, diffs, the spinner): the
            interactive client and ``attach``; a headless run streams plain text to a
            terminal, and writes each message whole to a pipe or file.
    """

    def __init__(self, out: TextIO | None = None, color: bool | None = None, turn_ends: bool = True,
                 rich: bool = False) -> None:
        self.out = sys.stdout if out is None else out
        self.color = self.out.isatty() if color is None else color
        self.rich = rich and self.color
        # Streamed text goes to a terminal only: a pipe or file gets each message once it is
        # complete, so a retried call's broken-off attempt never lands in what a script reads
        # (fresh-user trial s5, F9: the answer four times over).
        self.live_text = self.out.isatty()
        self.turn_ends = turn_ends
        self._streamed = False
        self._at_line_start = True
        self._skip_deltas = False
        self.last_result = ""  # the last tool result in full (``/last`` shows it)
        self.answered: set[str] = set()  # approvals this client answered (call ids)
        self.interrupted_here = False  # this terminal asked to interrupt the turn (until its turn_ended)
        self._console: Any = None
        self._area: Any = None  # the live bottom of the screen (streaming.LiveArea), on a terminal
        self._wait_started = 0.0
        self._tokens = self._tokens_exact = 0  # so far this turn: estimated from deltas, exact from usage
        self.in_turn = False  # a turn runs (the spinner comes back after each event)
        self.long_turn_s = 10.0  # a turn longer than this rings the bell when it ends
        self.messages = False  # show the person's messages (``user_message``): a terminal that follows a session
        self.own_messages: set[str] = set()  # client_msg_ids of the messages typed here (already on the screen)
        self.typing: Any = lambda: ""  # the line typed ahead while the agent works (shown with the spinner)
        self._unstarted = CallHeads()  # calls the model made that have not started (refused ones never do)
        # Say a hook that can never run when the session starts (``musec run``: no banner says it).
        self.start_warnings = False

    @property
    def console(self) -> Any:
        """rich's Console on ``out`` (made when first needed, only on a terminal)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.out, force_terminal=True, highlight=False, emoji=False)
        return self._console

    @property
    def area(self) -> Any:
        """The live bottom of the screen: the text being streamed and the spinner."""
        if self._area is None:
            from .streaming import LiveArea

            self._area = LiveArea(self.console, self.waiting_text)
        return self._area

    def start_wait(self) -> None:
        """A turn runs: show a spinner with the elapsed time and the tokens so far."""
        if not self.rich or (self._area is not None and self._area.waiting):
            return
        self.in_turn = True
        if not self._wait_started:
            self._wait_started = time.monotonic()
            self._tokens = self._tokens_exact = 0
        self.area.wait(True)

    def stop_wait(self, *, turn_over: bool = False) -> None:
        """Take the spinner away, and print the text streamed so far whole (before a
        question, at an interrupt, or when the turn is over)."""
        if self._area is not None:
            self._area.close()
        if turn_over:
            self.in_turn = False
            if self._wait_started and time.monotonic() - self._wait_started >= self.long_turn_s:
                self.notify("the turn is over")
            self._wait_started = 0.0

    def tick(self) -> None:
        """Redraw the live area (the spinner turns, the seconds count); called while the
        client waits for the daemon."""
        if self._area is not None:
            self._area.tick()

    def notify(self, message: str) -> None:
        """Ring the terminal: the bell and an OSC 9 notification (``message`` is cleaned)."""
        if self.color:
            self.out.write(f"\x1b]9;musec: {safe(message)}\x07\a")
            self.out.flush()

    def waiting_text(self) -> str:
        """What the spinner says: ``working 12s · 340 tokens``."""
        elapsed = time.monotonic() - self._wait_started if self._wait_started else 0.0
        typed = safe(str(self.typing()))
        return (f"working {elapsed:.0f}s · {counted(self._tokens, 'token')} (Esc or Ctrl-C interrupts)"
                + (f" › {typed[-40:]}▏" if typed else ""))

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _line(self, text: str) -> None:
        if self._console is not None and self.rich:
            from rich.text import Text

            self.console.print(Text.from_ansi(text), soft_wrap=True)
            return
        if not self._at_line_start:
            self.out.write("\n")
        self.out.write(text + "\n")
        self._at_line_start = True
        self.out.flush()

    def delta(self, text: str, kind: str = "text", agent: str = "main") -> None:
        """Write a streamed piece of the model's text (thinking is not shown); each line of
        an agent other than main starts with its name, as its logged events do."""
        if kind != "text" or not text or self._skip_deltas:
            return
        if not self.rich and not self.live_text:  # a pipe: the complete message, once (``_response``)
            return
        text = safe(text)
        if self.rich:  # the main agent's as markdown as it comes; the others' whole, when complete
            self._tokens += max(1, len(text) // 4)
            if agent == "main":
                self.area.feed(text)
            return
        if agent != "main":
            prefix = self._c("35", f"[{agent}] ")
            lines = text.split("\n")
            text = "\n".join((prefix + line) if (i or self._at_line_start) and line else line
                              for i, line in enumerate(lines))
        self.out.write(text)
        self._streamed = True
        self._at_line_start = text.endswith("\n")
        self.out.flush()

    def resynced(self) -> None:
        """This client fell behind and re-attached: streamed text was lost, so the message
        in progress is shown whole from the log when it is complete."""
        if self._area is not None and self._area.streaming:
            self._area.finish()
        if not self._at_line_start:
            self._line("")
        self._line(self._c("2", "(fell behind; going on from the log)"))
        self._streamed = False
        self._skip_deltas = True

    def interrupting(self) -> None:
        """This terminal asked the daemon to interrupt the turn: its end says "by you"."""
        self.interrupted_here = True

    def note(self, text: str) -> None:
        """A line of the client's own (dim), between the session's events."""
        self._line(self._c("2", safe(text)))

    def person(self, text: str, who: str = "") -> None:
        """A person's message as the prompt showed it: ``› text``, its further lines
        indented (at most ``MESSAGE_LINES``), ``who`` sent it after it when not this terminal."""
        lines = safe(text).rstrip().split("\n") or [""]
        shown = lines[:MESSAGE_LINES]
        if len(lines) > MESSAGE_LINES:
            shown.append(f"… {counted(len(lines) - MESSAGE_LINES, 'more line')}")
        for i, line in enumerate(shown):
            tail = self._c("2", f"  ({who})") if who and i == len(shown) - 1 else ""
            self._line(("› " if i == 0 else "  ") + line + tail)

    def instructions(self, prefix: str, text: str) -> None:
        """What musec told another agent (a worker's task, the goal evaluator's prompt),
        dimmed and labelled as musec's, never under the person's ``›``: the person did
        not type it. Its first lines only (``musec log ID --json`` has it whole)."""
        lines = [ln for ln in safe(text).strip().split("\n") if ln.strip()] or [""]
        more = f" … {counted(len(lines) - 3, 'more line')}" if len(lines) > 3 else ""
        for i, line in enumerate(lines[:3]):
            head = "musec's instructions: " if i == 0 else "  "
            self._line(prefix + self._c("2", head + line + (more if i == min(2, len(lines) - 1) else "")))

    def event(self, ev: dict[str, Any], *, backlog: bool = False) -> None:  # noqa: C901 - one branch per event kind
        """Show one logged event (a decoded log line); ``backlog``: one read from the log
        on resume or attach (history), not one that happens now."""
        kind = ev.get("type")
        agent = _s(ev, "agent", "main")
        prefix = "" if agent == "main" else self._c("35", f"[{agent}] ")
        head = self._unstarted.fold(ev)
        if head and kind in ("tool_finished", "tool_interrupted"):  # a call that never started: its header first
            self._line(prefix + self._c("36", "● ") + head)
        if kind == "user_message":
            if agent != "main":  # a worker's task, the evaluator's or critic's prompt: musec wrote it
                if self.messages:
                    self.instructions(prefix, _s(ev, "text"))
            elif self.messages and ev.get("client_msg_id") not in self.own_messages:
                from_elsewhere = not backlog and bool(ev.get("client_msg_id"))
                text, feedback = _s(ev, "text"), ""
                if not ev.get("client_msg_id") and text.startswith(PLAN_FEEDBACK):  # musec's words around the person's
                    text, feedback = text.removeprefix(PLAN_FEEDBACK).lstrip(), "your feedback on the plan"
                self.person(text, "from another terminal" if from_elsewhere else feedback)
            for line in attachment_lines(ev):
                self._line(prefix + "  " + self._c("33" if " not attached: " in line else "2", line))
        elif kind == "model_response":
            self._response(ev, prefix, agent)
        elif kind == "tool_started":
            self._line(prefix + self._c("36", "● ") + call_summary(ev.get("tool", "?"), _input(ev)))
        elif kind == "tool_finished":
            self.last_result = safe(str(ev.get("content", "")))
            self._line(prefix + "  " + self._c("2", "⎿ " + self.result_summary(ev)))
        elif kind == "tool_interrupted":
            self._line(prefix + "  " + self._c("33", f"⎿ interrupted: {_s(ev, 'reason')}"))
        elif kind == "file_edited":
            diff = str(ev.get("diff", ""))
            added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
            removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
            stats = f"(+{added} -{removed})"
            if diff.startswith("(diff of "):  # too big to diff: say so rather than +0 -0
                stats = "(" + diff.strip().strip("()").partition(": ")[2] + "; no diff shown)"
            self._line(prefix + "  " + self._c("32", f"✎ {_s(ev, 'path')} {stats}"))
            if self.rich:
                self._diff(safe(diff))
        elif kind == "agent_message":
            body = _s(ev, "body").strip().splitlines()
            head = f"[{_s(ev, 'from')} → {_s(ev, 'to')}, {_s(ev, 'priority', 'normal')}] "
            self._line(self._c("35", head) + (body[0] if body else ""))
            for extra in body[1:6]:
                self._line("    " + extra)
        elif kind == "agent_failed":
            self._line(self._c("31", f"[{agent}] failed: {_s(ev, 'error')}; restarting in {_s(ev, 'retry_in_s')} s"))
        elif kind == "approval_resolved":
            self._line(prefix + self._c("33", "  " + self.resolved_words(ev)))
        elif kind == "approval_mode_changed":
            self._line(self._c("33", f"(approval mode {_s(ev, 'approval')}, was {_s(ev, 'previous')})"))
        elif kind == "model_retry":
            why = _s(ev, "error").splitlines()[0] if _s(ev, "error") else f"status {_s(ev, 'status')}"
            shown = self._streamed  # a live text stream showed the attempt's text
            if agent == "main" and self._area is not None and self._area.streaming:
                shown = True
                self._area.finish()  # the attempt's text as it came; the next attempt streams afresh
            dropped = " (the text streamed above is dropped)" if ev.get("discarded_output_chars") and shown else ""
            self._line(prefix + self._c("33", f"  retrying the model call ({_s(ev, 'attempt')}/{_s(ev, 'max_attempts')}) "
                                              f"in {_s(ev, 'delay_s')} s: {_short(why, 100)}{dropped}"))
        elif kind == "rate_limited":
            self._line(prefix + self._c("33", f"  rate limited ({_short(_s(ev, 'reason'), 80)}): waiting {_s(ev, 'wait_s')} s"))
        elif kind in ("hook_ran", "hook_context") or (kind == "session_started" and self.start_warnings and not backlog):
            for line in hook_lines(ev):
                self._line(prefix + "  " + self._c("33", line))
        elif kind in ("goal_set", "goal_checked", "goal_updated"):
            self._line(self._c("34", goal_words(ev)))
            if kind == "goal_updated" and ev.get("summary"):
                for line in _s(ev, "summary").strip().splitlines()[:8]:
                    self._line("    " + line)
        elif kind in ("plan_started", "plan_proposed", "plan_approved", "grill_round"):
            self._plan(ev)
        elif kind == "turn_ended" and self.turn_ends and ev.get("exit_reason") not in ("finished", None):
            who = interrupter_words(ev, self.interrupted_here)
            self._line(self._c("33", f"[{_s(ev, 'exit_reason')}] {_s(ev, 'message')}{who}".rstrip()))
        if kind == "turn_ended" and _s(ev, "agent", "main") == "main":
            self.interrupted_here = False

    def _response(self, ev: dict[str, Any], prefix: str, agent: str) -> None:
        """A complete (or interrupted) model message: what was not streamed here yet, then
        the interruption when it was cut off (its partial text is all there is)."""
        usage = ev.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("output_tokens"), int):
            self._tokens = self._tokens_exact = self._tokens_exact + usage["output_tokens"]
        text = "".join(str(b.get("text", "")) for b in _blocks(ev) if b.get("type") == "text")
        if self.rich:
            streamed = self._area.finish() if agent == "main" and self._area is not None and self._area.streaming else ""
            if text.strip() and not streamed.strip():  # not streamed here: the backlog, another agent, a resync
                self._markdown(prefix, safe(text.strip()))
        elif not self._streamed:
            if text.strip():
                self._line(prefix + safe(text.strip()))
        elif not self._at_line_start:
            self._line("")
        self._streamed = False
        self._skip_deltas = False
        if ev.get("interrupted"):
            self._line(prefix + "  " + self._c("33", "⎿ " + interrupted_words(ev)))

    def _plan(self, ev: dict[str, Any]) -> None:
        """Plan mode: its start, the proposed plan (whole: it is the result of planning), its approval."""
        kind = ev.get("type")
        if kind == "plan_started":
            self._line(self._c("36", f"[plan mode: read-only until a plan is approved; plan document {_s(ev, 'path')}]"))
        elif kind == "plan_proposed":
            self._line(self._c("36", f"[plan proposed, sha256 {_s(ev, 'sha256')[:12]}]"))
            for line in safe(_s(ev, "text")).rstrip("\n").split("\n"):
                self._line(line)
        elif kind == "grill_round":
            self._line(self._c("35", f"[grill {_s(ev, 'round')}] {_s(ev, 'decision')}: {_short(_s(ev, 'answer'), 200)} "
                                     f"({_s(ev, 'answered_by')})"))
        else:
            self._line(self._c("32", f"[plan approved by {_s(ev, 'by')} ({_s(ev, 'action')}); approval mode {_s(ev, 'approval')}]"))

    def resolved_words(self, ev: dict[str, Any]) -> str:
        """Who answered an approval, a plan or a grill's question, in words (``answer_words``)."""
        return answer_words(ev, ev.get("call_id") in self.answered)

    def _markdown(self, prefix: str, text: str) -> None:
        from rich.markdown import Markdown
        from rich.text import Text

        if prefix:
            self.console.print(Text.from_ansi(prefix.rstrip()))
        rest = ""
        if len(text) > PLAIN_AFTER_CHARS:  # as a streamed one: its blocks up to the limit rendered, the rest plain
            stream = MarkdownStream()
            stream.feed(text[:PLAIN_AFTER_CHARS])
            text, rest = text[:stream.done], text[stream.done:]
        # No hyperlinks: a link's target would be hidden behind text the model chose.
        if text.strip():
            self.console.print(Markdown(text, code_theme="monokai", hyperlinks=False))
        if rest:
            self.console.print(Text(plain_words(), style="dim"))
            self.console.print(Raw(rest.rstrip("\n") + "\n"), end="", crop=False)

    def show_diff(self, diff: str) -> None:
        """A diff before an approval question: coloured when rich, else plain, cleaned."""
        if self.rich:
            self._diff(safe(diff), max_lines=200)
        else:
            for ln in safe(diff).splitlines():
                self._line("    " + ln)

    def _diff(self, diff: str, max_lines: int = 60) -> None:
        """A unified diff, coloured: additions green, removals red, hunks cyan."""
        from rich.text import Text

        lines = [ln for ln in diff.splitlines() if not ln.startswith(("---", "+++"))]
        for ln in lines[:max_lines]:
            style = "green" if ln.startswith("+") else "red" if ln.startswith("-") else "cyan" if ln.startswith("@@") else "dim"
            self.console.print(Text("    " + ln, style=style), soft_wrap=True)
        if len(lines) > max_lines:
            self.console.print(Text(f"    … {counted(len(lines) - max_lines, 'more line')} (musec log shows them)", style="dim"))

    @staticmethod
    def result_summary(ev: dict[str, Any]) -> str:
        """A tool result in a few words: exit status and size, or the error's first line.

        The size is the whole result's (a command's output, the file read, the files that
        matched) and, when the model saw only part of it, how much it saw:
        ``3,000,002 lines, the model saw 5,092`` (not the lines of the cut text alone:
        fresh-user s8 H4)."""
        content = str(ev.get("content", ""))
        lines = content.splitlines()
        if ev.get("is_error") and not ev.get("timed_out"):
            return "error: " + _short(lines[0] if lines else content, 100)
        size = _result_size(ev, len(lines))
        if ev.get("timed_out"):
            return f"timed out · {size} of output"
        status = ev.get("exit_status")
        head = f"exit {_short(status, 12)} · " if status is not None else ""
        return f"{head}{size}"


def _count(ev: dict[str, Any], key: str) -> int | None:
    value = ev.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _result_size(ev: dict[str, Any], seen: int) -> str:
    """``N lines``, or, when the model saw part of the result, ``WHOLE lines, the model saw
    N`` (``over WHOLE lines (SIZE)`` when only a floor is known); a log older than those
    counts says the bytes of the whole result kept as a blob instead."""
    whole, produced = _count(ev, "whole_lines"), _count(ev, "whole_bytes")
    if whole is not None:
        size = ("over " if ev.get("whole_lines_at_least") else "") + _lines(whole)
        if produced is not None and ev.get("whole_lines_at_least"):
            size += f" ({_size(produced)})"
        return f"{size}, the model saw {seen:,}"
    kept = _count(ev, "full_bytes")
    if kept is not None and ev.get("blob"):  # an older log: the whole result's bytes only
        return f"{_size(kept)}, the model saw {_lines(seen)}"
    return _lines(seen)


def _lines(n: int) -> str:
    return f"{n:,} line" + ("" if n == 1 else "s")


def attachment_lines(ev: dict[str, Any]) -> list[str]:
    """One line per ``@path`` mention of a ``user_message``: ``⎘ @PATH attached (SIZE)``, or
    ``⎘ @PATH not attached: WHY``; never the content (cleaned, cut to 160 characters)."""
    found = ev.get("attachments")
    out = []
    for a in found if isinstance(found, list) else []:
        if not isinstance(a, dict):
            continue
        path, kind = _s(a, "path"), _s(a, "kind", "file")
        if kind == "refused":
            out.append(f"⎘ @{path} not attached: {_s(a, 'refused')}")
        elif kind == "directory":
            out.append(f"⎘ @{path} attached (directory listing)")
        else:
            size = a.get("size_bytes", 0)
            words = _size(size if isinstance(size, int) else 0) + (", binary: not inlined" if kind == "binary" else "")
            words += "; its head and tail only: over the budget" if a.get("partial") is True else ""
            out.append(f"⎘ @{path} attached ({words})")
    return [_short(line, 160) for line in out]


def _size(n: int) -> str:
    if n < 1024:
        return counted(n, "byte")
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


PLAN_FEEDBACK = "[the person did not approve the plan; keep planning]"  # daemon/plans.py wraps the person's feedback in it
MESSAGE_LINES = 12  # lines of a person's message shown when it is replayed or comes from another terminal


def log_line_summary(ev: dict[str, Any], calls: CallHeads | None = None) -> str:
    """One line for ``musec log``: seq, time, agent, type and the gist, all cleaned.
    ``calls``: the calls seen so far (fed every line in order), so that the answer to a
    call that never started (refused) names the call, as ``tool_started`` does for one that ran."""
    head = calls.fold(ev) if calls is not None else ""
    try:
        t = time.strftime("%H:%M:%S", time.localtime(float(ev.get("ts", 0))))
    except (TypeError, ValueError, OverflowError, OSError):
        t = "??:??:??"
    kind = _s(ev, "type", "?")
    detail = ""
    if kind in ("tool_started", "approval_requested"):
        detail = call_summary(ev.get("tool", "?"), _input(ev))
    elif kind == "tool_finished":
        detail = f"{head or _s(ev, 'tool')} {Renderer.result_summary(ev)}"
    elif kind == "tool_interrupted" and head:
        detail = f"{head} {_s(ev, 'reason')}"
    elif kind == "model_response":
        blocks = _blocks(ev)
        text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
        calls = [str(b.get("name")) for b in blocks if b.get("type") == "tool_call"]
        detail = _short(text, 71) + (f" → {', '.join(calls)}" if calls else "") + (" (interrupted)" if ev.get("interrupted") else "")
    elif kind == "user_message":
        attached = ev.get("attachments")
        by = "" if _s(ev, "agent", "main") == "main" else "musec's instructions: "  # not the person's words
        detail = by + _short(ev.get("text", ""), 80) + (f" (+{len(attached)} mentioned)" if isinstance(attached, list) and attached else "")
    elif kind == "file_edited":
        detail = _s(ev, "path")
    elif kind in ("session_ended", "turn_ended"):
        detail = _s(ev, "exit_reason")
    elif kind in ("goal_set", "goal_checked", "goal_updated"):
        detail = goal_words(ev).removeprefix("◎ ")
    elif kind == "session_started":
        detail = f"{_s(ev, 'model')} in {_s(ev, 'workspace')}"
    # fixed columns (a log is printed as it is read): a longer agent id is cut, every type fits
    line = f"{_s(ev, 'seq', '?'):>5}  {t}  {cut(_s(ev, 'agent'), 12):<12} {kind:<21} {detail}".rstrip()
    return " ".join(safe(line).split("\n"))
