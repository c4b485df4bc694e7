"""The interactive prompt (prompt_toolkit): history across sessions in a 0600 file under
the state directory, completion of slash commands and ``@path`` mentions, Enter sends and
Alt-Enter (or Esc then Enter) starts a new line, pasted text kept whole (bracketed paste),
and the status line at the bottom."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .slash import BUILTIN, history_path
from .status import SessionStatus


def make_prompt(status: SessionStatus, slash: set[str], workspace: str = ".",
                wake_fd: int | None = None) -> Callable[..., str]:
    """A function that reads one message (raises EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C
    at an empty prompt; Ctrl-C with text typed clears it, as a shell does);
    with ``wake_fd`` (the daemon's socket) it gives way when the daemon sends something
    (``interactive_input.Woken``), taking what was typed as its argument the next time.
    The prompt is erased when done: the client shows the message sent itself."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("c-c")
    def _clear_or_leave(event: Any) -> None:  # as a shell does: Ctrl-C drops the typed line first
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt(), style="class:aborting")

    session: Any = PromptSession(
        history=prompt_history(), completer=_completer(workspace, slash), complete_while_typing=True,
        key_bindings=bindings, bottom_toolbar=lambda: " " + status.text(),
        prompt_continuation=lambda width, line_number, wrap_count: "… ".rjust(width),
        erase_when_done=wake_fd is not None,
    )
    if wake_fd is None:
        return lambda default="": session.prompt("› ", default=default)
    from .interactive_input import prompt_until

    return lambda default="": prompt_until(session, wake_fd, default)


def prompt_history() -> Any:
    """The prompt history (prompt_toolkit ``FileHistory`` over ``history_path``) whose
    file keeps each message as ``history_line`` writes it; ``None`` when the file cannot
    be made."""
    from prompt_toolkit.history import FileHistory

    class _KeyFreeHistory(FileHistory):  # type: ignore[misc]
        def store_string(self, string: str) -> None:
            super().store_string(history_line(string))

    try:
        return _KeyFreeHistory(str(history_path()))
    except OSError:
        return None


def history_line(text: str) -> str:
    """What the prompt history file keeps of a message: ``text`` with every key-shaped
    run and every value of this terminal's secret variables written ``[REDACTED]``, as
    the session log has it (``protocol.redact_keys``); up-arrow in this client still
    recalls it whole from memory."""
    import os

    from musec.daemon import protocol as p

    return p.redact_keys(text, p.secret_values(os.environ))


def _completer(workspace: str, slash: set[str]) -> Any:
    from prompt_toolkit.completion import Completer, Completion

    names = [*BUILTIN, *("/" + n for n in sorted(slash))]
    root = Path(workspace)

    class _Complete(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Iterable[Any]:
            text = document.text_before_cursor
            if text.startswith("/") and " " not in text:
                for name in names:
                    if name.startswith(text):
                        yield Completion(name, start_position=-len(text), display_meta=BUILTIN.get(name, ""))
                return
            found = _PARTIAL.search(text)
            if found is not None:
                partial = found.group(1) if found.group(1) is not None else found.group(2)
                yield from _paths(root, partial, len(found.group(0)))

    def _paths(base: Path, partial: str, typed: int) -> Iterable[Any]:
        folder, _, stem = partial.rpartition("/")
        where = (base / folder).expanduser() if folder else base
        try:
            entries = sorted(where.iterdir())[:500]
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(stem) and not entry.name.startswith(".git"):
                rel = (folder + "/" if folder else "") + entry.name + ("/" if entry.is_dir() else "")
                yield Completion(mention(rel), start_position=-typed)

    return _Complete()


# A mention being typed at the end of the input: ``@src/x`` or ``@"a b`` (the daemon reads
# the finished ones: agents/attachments.py; the same starts and quoting).
_PARTIAL = re.compile(r'(?<![^\s(\[{<,;])@(?:"([^"\n]*)|([^\s"`]*))$')


def mention(path: str) -> str:
    """How a completed path is written: ``@src/x.py``, or quoted when it holds a space or
    ends with punctuation (``@"a b.txt"``); a folder's quote stays open for the next part."""
    if not re.search(r"\s", path) and path[-1:] not in ".,;:!?')]}>":
        return "@" + path
    return f'@"{path}' + ("" if path.endswith("/") else '"')
