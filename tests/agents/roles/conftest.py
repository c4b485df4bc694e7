"""Fixtures for the role tests: an in-memory ``Recorder`` (a real implementation of the
protocol the roles take, not a stand-in for the session) and both event loops."""

from __future__ import annotations

import msgspec
import pytest
from musec.agents.core.events import AnyEvent, event_type


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


class EventList:
    """A ``Recorder`` that keeps the events in a list, numbered as a log would."""

    def __init__(self, session_id: str = "18f0c0ffee-abc123") -> None:
        self.id = session_id
        self.events: list[AnyEvent] = []

    def record(self, event: AnyEvent) -> AnyEvent:
        event = msgspec.structs.replace(event, seq=len(self.events))
        self.events.append(event)
        return event

    def of_type(self, type: str) -> list[AnyEvent]:
        return [e for e in self.events if event_type(e) == type]


@pytest.fixture
def recorder() -> EventList:
    return EventList()
