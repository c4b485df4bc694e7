"""Working time folded from the events' ``ts`` (``--max-wall``, a goal's ``--max-wall``)."""

from __future__ import annotations

from .core.events import AnyEvent, SessionResumed

__all__ = ["WorkClock"]


class WorkClock:
    """Seconds worked, folded from the events' ``ts``: the time between consecutive events
    from a ``start`` to a ``stop``, summed across restarts. The time the daemon was down (the
    gap before ``session_resumed``) and the idle time between a stop and the next start do
    not count."""

    def __init__(self) -> None:
        self.spent_s = 0.0  # up to ``last``
        self.last: float | None = None  # ts of the latest event while running (None: stopped)

    def tick(self, event: AnyEvent) -> None:
        """Fold one event of any agent."""
        if self.last is not None:
            if not isinstance(event, SessionResumed):
                self.spent_s += max(0.0, event.ts - self.last)
            self.last = event.ts

    def start(self, ts: float, *, afresh: bool = False) -> None:
        """Run from ``ts`` on (``afresh``: from zero)."""
        if afresh:
            self.spent_s = 0.0
        if self.last is None or afresh:
            self.last = ts

    def stop(self) -> None:
        self.last = None

    def seconds(self, now: float) -> float:
        """Seconds worked up to ``now`` (Unix seconds)."""
        return self.spent_s + (max(0.0, now - self.last) if self.last is not None else 0.0)
