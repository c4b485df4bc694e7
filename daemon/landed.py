"""What a stopped session's calls left behind, found out on resume (issue 13 cases 4, 5).

A file tool announces its write before the rename (``file_edit_started``: the file's
hashes before and after, and its temporary file), so a resume that finds the call
unanswered can tell whether the write landed: the file hashes to the new content (it
landed: ``file_edited`` is recorded and the model is told the change is on disk), to the
old one (it did not: the model is told the file is as it was), or to neither (something
else changed it since: the model is told to read it). The temporary file is removed. A
write call with no announcement stopped before it wrote anything.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from musec.agents.core.events import (
    AnyEvent,
    FileEdited,
    FileEditStarted,
    ToolFinished,
    ToolStarted,
)

#: The tools that change files only through an announced ``atomic_write``.
WRITE_TOOLS = frozenset({"write_file", "edit_file"})
TMP_SUFFIX = ".musec-tmp"


def settle_write(call: ToolStarted, intent: FileEditStarted | None, edit_logged: bool,
                 workspace: Path | None) -> list[AnyEvent]:
    """The events that answer a cut-off ``write_file``/``edit_file`` call truthfully, after
    removing its temporary file.

    Args:
        call: the call's ``tool_started``.
        intent: its ``file_edit_started``, if the tool got that far.
        edit_logged: its ``file_edited`` is in the log already.
        workspace: where a call with no announcement may have left a temporary file
            (the main agent's workspace), or ``None`` to leave it.
    """
    if intent is None:
        _sweep(call, workspace)
        name = str(call.input.get("path", "the file"))
        return [_answer(call, True, f"not done: the daemon stopped before this call wrote anything; {name} is as "
                                    "it was before this call. Make the change again if it is still wanted")]
    _remove_tmp(intent.tmp_path)
    now = _sha256(intent.abs_path) if intent.abs_path else "unknown"
    name = intent.path
    if now == intent.after_sha256:
        events: list[AnyEvent] = [] if edit_logged else [FileEdited(
            agent=call.agent, call_id=call.call_id, path=intent.path, before_sha256=intent.before_sha256,
            after_sha256=intent.after_sha256, diff=intent.diff)]
        return [*events, _answer(call, False, (
            f"the daemon stopped before this call's result was recorded, but its write landed: {name} is on disk "
            "with the new content; do not make the change again"))]
    if now == intent.before_sha256:
        return [_answer(call, True, (
            f"not done: the daemon stopped before the new content of {name} was put in place; {name} is as it "
            "was before this call. Make the change again if it is still wanted"))]
    return [_answer(call, True, (
        f"unknown: the daemon stopped during this call, and {name} now holds neither its content from before "
        "this call nor the new content (something else changed it since, or it could not be read); read it "
        "before going on"))]


def _answer(call: ToolStarted, is_error: bool, content: str) -> ToolFinished:
    return ToolFinished(agent=call.agent, call_id=call.call_id, tool=call.tool, is_error=is_error, content=content,
                        untrusted=False)


def _sha256(path: str) -> str | None:
    """The file's SHA-256, ``None`` when there is none, ``"unknown"`` when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        return "unknown"


def _remove_tmp(tmp_path: str) -> None:
    """Remove a temporary file ``atomic_write`` made (a regular file named like one)."""
    path = Path(tmp_path)
    if tmp_path and path.name.endswith(TMP_SUFFIX) and path.is_file() and not path.is_symlink():
        path.unlink(missing_ok=True)


def _sweep(call: ToolStarted, workspace: Path | None) -> None:
    """Remove the temporary files of the call's target (``.NAME.XXXXXXXX.musec-tmp``)
    that a stop before the announcement left: only regular files, only beside the target."""
    target = call.input.get("path")
    if workspace is None or not isinstance(target, str) or not target:
        return
    path = Path(os.path.expanduser(target)) if target.startswith("~") else workspace / target
    try:
        leftovers = list(path.parent.glob(f".{path.name}.*{TMP_SUFFIX}"))
    except (OSError, ValueError):
        return
    for leftover in leftovers:
        _remove_tmp(str(leftover))
