"""The interface every model provider adapter implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec

from ..core.conversation import ModelRequest, ModelResponse


class TextDelta(msgspec.Struct, frozen=True):
    """A piece of streamed text (live only: deltas are never logged)."""

    text: str
    kind: str = "text"  # "text" or "thinking"


OnDelta = Callable[[TextDelta], Awaitable[None]]


class Provider(Protocol):
    """A model client.

    ``complete`` streams one answer, calling ``on_delta`` for each text piece as it
    arrives, and returns the assembled response. It raises ``ProviderError`` subclasses
    (see ``agents.errors``) for failures it could not recover from by retrying.
    """

    name: str
    model: str

    async def complete(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse: ...

    async def aclose(self) -> None: ...
