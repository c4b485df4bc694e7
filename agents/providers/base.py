"""The interface every model provider adapter implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec

from ..core.conversation import ModelRequest, ModelResponse, Usage


class TextDelta(msgspec.Struct, frozen=True):
    """A piece of streamed text (live only: deltas are never logged).

    ``kind``: ``text`` or ``thinking`` (sent on to clients); or, for the agent loop only
    (so that an answer cut off mid-stream is kept and counted), ``usage``: the usage the
    stream reported so far (``usage``; Anthropic's ``message_start`` has the input
    tokens), and ``restart``: a retried attempt streams its answer from the start.
    """

    text: str
    kind: str = "text"
    usage: Usage | None = None


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
