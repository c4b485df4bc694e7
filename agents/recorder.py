"""``Recorder``: where an agent-side component writes its events (the session's log).

Background roles and the fan-out run take a ``Recorder`` instead of the daemon's
``Session``, so agent code never imports the daemon (DESIGN §1).
"""

from __future__ import annotations

from typing import Protocol

from .core.events import AnyEvent


class Recorder(Protocol):
    """Something that records events of one session (the daemon's ``Session`` is one).

    Attributes:
        id: the session's id (names worktrees and branches, and tags log lines).
    """

    id: str

    def record(self, event: AnyEvent) -> AnyEvent:
        """Append one event, fold it into the session's live views, and return it with its
        ``seq`` and ``ts`` set. A write-ahead event (``persistence``) is on disk before
        the effect it announces: the daemon's session makes it durable off the event loop
        and its agents await that before a tool, an edit or a model call starts.

        Raises:
            OSError: the log could not be written.
        """
        ...
