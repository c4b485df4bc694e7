"""``Recorder``: where an agent-side component writes its events (the session's log).

Background roles and the fan-out run take a ``Recorder`` instead of the daemon's
``Session``, so agent code never imports the daemon (DESIGN §1).
"""

from __future__ import annotations

from typing import Any, Protocol


class Recorder(Protocol):
    """Something that records events of one session (the daemon's ``Session`` is one).

    Attributes:
        id: the session's id (names worktrees and branches, and tags log lines).
    """

    id: str

    def record(self, type: str, *, agent: str = "main", sync: bool = False, **fields: Any) -> dict[str, Any]:
        """Append one event of ``agent`` (``sync``: on disk before returning); return it as written.

        Raises:
            OSError: the log could not be written.
        """
        ...
