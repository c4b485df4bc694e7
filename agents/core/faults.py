"""Crash points for restart-safety tests (``MUSEC_CRASH_AT=<point>``).

When the daemon's environment names a point, the process exits at once (``os._exit``,
no cleanup, as a ``kill -9`` would) the first time it reaches it. Points:

- ``after_tool_started``: the ``tool_started`` event is on disk, the tool has not begun.
- ``during_tool``: the tool is running (its process is killed with the daemon).
- ``before_tool_finished``: the tool is done, its ``tool_finished`` not yet written.
- ``mid_model_stream``: the first piece of a model answer has streamed.
- ``mid_edit``: an edit's new content is written to its temp file, not yet renamed.
- ``mid_append``: half of a ``tool_finished`` line is written to the log.

Unset, each check is one dictionary lookup.
"""

from __future__ import annotations

import os

POINTS = ("after_tool_started", "during_tool", "before_tool_finished", "mid_model_stream", "mid_edit", "mid_append")
CRASH_EXIT_STATUS = 137


def armed(point: str) -> bool:
    """Whether the process should crash at ``point``."""
    return os.environ.get("MUSEC_CRASH_AT") == point


def crash_at(point: str) -> None:
    """Exit the process immediately if ``point`` is armed."""
    if armed(point):
        os._exit(CRASH_EXIT_STATUS)
