"""Shared HTTP + server-sent-events plumbing of the provider adapters.

One place maps every foreign failure to a ``ProviderError`` (``agents.errors``): HTTP
status codes, httpx transport errors and timeouts, and SSE framing problems. SSE framing
itself is httpx-sse's (WHATWG event-stream interpretation:
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation);
this module only decodes each event's ``data`` as a JSON object.

Nothing here logs or formats request headers, so an API key never reaches a message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx_sse
import msgspec
from musec.agents.core.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderOverloaded,
    ProviderUnreachable,
)

from .overflow import overflow_error
from .quota import quota_error
from .retry import parse_retry_after

__all__ = ["DEFAULT_TIMEOUT", "DONE", "DRAIN_S", "SSEEvent", "drain", "error_from_response", "post_sse"]

#: ``SSEEvent.event`` of the Chat Completions end-of-stream sentinel ``data: [DONE]``.
DONE = "[DONE]"

#: Per-phase deadlines for a model call. ``read`` is the idle-stream timeout: the longest
#: silence (no bytes, not even a ``ping``) tolerated while an answer streams.
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=30.0)

#: How long the end of a body is awaited after the event that finishes an answer (``drain``).
DRAIN_S = 0.25

_MAX_MESSAGE_CHARS = 500
_json = msgspec.json.Decoder()

#: HTTP statuses worth retrying, as in the Anthropic and OpenAI SDKs (529 = overloaded).
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
_BAD_REQUEST_STATUSES = frozenset({400, 404, 413, 422})


class SSEEvent(msgspec.Struct, frozen=True):
    """One dispatched SSE event whose data parsed as a JSON object."""

    event: str
    data: dict[str, Any]


def _truncate(text: str, limit: int = _MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_object(body: bytes) -> dict[str, Any] | None:
    """The ``error`` object of an Anthropic/OpenAI JSON error body, if it has one."""
    try:
        parsed = _json.decode(body)
    except msgspec.DecodeError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error if isinstance(error, dict) else None


def _error_detail(body: bytes, error: dict[str, Any] | None) -> str:
    """``type: message`` from the API's error object, else the raw text."""
    if error is not None:
        kind = error.get("type") or error.get("code") or "error"
        return _truncate(f"{kind}: {error.get('message', '')}")
    return _truncate(body.decode("utf-8", "replace").strip())


def error_from_response(
    provider: str, status: int, headers: Mapping[str, str], body: bytes
) -> ProviderError:
    """Map an HTTP error response to the ``ProviderError`` named by its condition.

    An exhausted quota (``quota.quota_error``: OpenAI ``insufficient_quota``, an
    Anthropic spend or plan limit) -> ``QuotaExhausted``, never retried, whatever the
    status; a request over the model's window (``overflow.overflow_error``) ->
    ``ContextOverflow``; otherwise 401/403 -> ``ProviderAuthError``; 400/404/413/422 -> ``ProviderBadRequest``;
    408/409/429/5xx (529 included) -> ``ProviderOverloaded`` carrying the server's
    ``retry-after`` in ``retry_after_s``; any other status -> ``ProviderError``.
    The message holds the status, the API's error type and message, and the request id.
    """
    request_id = headers.get("request-id") or headers.get("x-request-id")
    error = _error_object(body)
    quota = quota_error(provider, status, headers, error, request_id=request_id)
    if quota is not None:
        return quota
    overflow = overflow_error(provider, status, error, request_id=request_id)
    if overflow is not None:
        return overflow
    message = f"{provider} HTTP {status}: {_error_detail(body, error)}"
    if request_id:
        message += f" (request-id {request_id})"
    if status in (401, 403):
        return ProviderAuthError(message, status=status)
    if status in _BAD_REQUEST_STATUSES:
        return ProviderBadRequest(message, status=status)
    if status in _RETRYABLE_STATUSES or status >= 500:
        return ProviderOverloaded(message, status=status, retry_after_s=parse_retry_after(headers))
    return ProviderError(message, status=status)


def _transport_error(
    provider: str, url: str, exc: Exception, timeout: httpx.Timeout
) -> ProviderError:
    match exc:
        case httpx_sse.SSEError():  # before TransportError, its base class
            return ProviderError(f"{provider}: {url} did not answer with an event stream: {exc}")
        case httpx.ReadTimeout():
            return ProviderUnreachable(
                f"{provider}: no data from {url} for {timeout.read} s (idle-stream timeout)"
            )
        case httpx.TimeoutException():
            return ProviderUnreachable(
                f"{provider}: timed out talking to {url}: {type(exc).__name__}"
            )
        case httpx.UnsupportedProtocol() | httpx.InvalidURL():
            return ProviderError(f"{provider}: invalid endpoint URL {url}: {exc}")
        case httpx.TransportError():
            return ProviderUnreachable(
                f"{provider}: connection to {url} failed: {type(exc).__name__}: {_truncate(str(exc))}"
            )
        case _:
            return ProviderError(f"{provider}: {type(exc).__name__}: {_truncate(str(exc))}")


class SSEStream:
    """The events of one successful (HTTP 2xx) streaming response."""

    def __init__(self, provider: str, source: httpx_sse.EventSource):
        self._provider = provider
        self._source = source
        self.response = source.response

    async def __aiter__(self) -> AsyncIterator[SSEEvent]:
        """Yield each event with non-empty ``data`` (comments and keep-alives are skipped).

        ``data: [DONE]`` (Chat Completions' end of stream) is yielded as an event named
        ``DONE`` with empty data.

        Raises:
            ProviderError: an event's data is not a JSON object.
        """
        async with aclosing(self._source.aiter_sse()) as events:
            async for sse in events:
                if not sse.data:
                    continue
                if sse.data == DONE:
                    yield SSEEvent(event=DONE, data={})
                    continue
                try:
                    data = _json.decode(sse.data)
                except msgspec.DecodeError as exc:
                    raise ProviderError(
                        f"{self._provider}: malformed JSON in {sse.event or 'message'!r} event: {exc}"
                    ) from exc
                if not isinstance(data, dict):
                    raise ProviderError(
                        f"{self._provider}: {sse.event or 'message'!r} event data is not a JSON object"
                    )
                yield SSEEvent(event=sse.event, data=data)


@asynccontextmanager
async def post_sse(
    client: httpx.AsyncClient,
    provider: str,
    url: str,
    *,
    headers: Mapping[str, str],
    body: bytes,
    timeout: httpx.Timeout,
    on_headers: Callable[[httpx.Headers], None] | None = None,
) -> AsyncIterator[SSEStream]:
    """POST ``body`` (JSON bytes) and stream the answer's SSE events.

    Every httpx/httpx-sse failure inside the block, including while the caller iterates
    the stream, is re-raised as a ``ProviderError`` (``raise ... from``). ``on_headers``
    sees the response headers of every answer, errors included (rate-limit feedback).

    Raises:
        ProviderError: the HTTP status mapped by ``error_from_response``; a transport
            failure or timeout as ``ProviderUnreachable``; a non-SSE answer.
    """
    try:
        async with httpx_sse.aconnect_sse(
            client, "POST", url, headers=dict(headers), content=body, timeout=timeout
        ) as source:
            response = source.response
            if on_headers is not None:
                on_headers(response.headers)
            if response.status_code >= 400:
                raise error_from_response(
                    provider, response.status_code, response.headers, await response.aread()
                )
            yield SSEStream(provider, source)
    except (httpx.HTTPError, httpx_sse.SSEError) as exc:
        raise _transport_error(provider, url, exc, timeout) from exc


async def drain(events: AsyncIterator[SSEEvent], timeout_s: float = DRAIN_S, max_events: int = 8) -> bool:
    """Read what follows the event that finished an answer, up to the end of the body.

    A response closed before its body ends takes its connection with it, so the next call
    opens a new one (a TCP and TLS handshake each turn). What follows the last event the
    adapters need is the chunked body's terminator and at most a few events (a trailing
    ``[DONE]``, a usage chunk), which a server sends at once; the OpenAI SDKs read streams
    to their end for the same reason.

    Args:
        events: the rest of the answer's events (the adapter's own iterator).
        timeout_s: how long to wait for the end of the body.
        max_events: events read at most before giving up.

    Returns:
        ``True`` when the body ended in time (the connection can serve the next call);
        ``False`` when it did not, or broke: the caller closes the response as before, and
        the answer, complete already, is not affected.
    """
    with anyio.move_on_after(timeout_s):
        try:
            count = 0
            async for _ in events:
                count += 1
                if count >= max_events:
                    return False
        except (ProviderError, httpx.HTTPError, httpx_sse.SSEError):
            return False
        return True
    return False
