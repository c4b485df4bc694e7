"""The base of the HTTP streaming adapters: client ownership, retries, the call shape.

Each adapter says where it posts (``_url``), what it sends (``_body``) and how it reads one
streamed answer (``_stream_once``); this class does the rest the same way for all of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
from musec.agents.core.conversation import ModelRequest, ModelResponse
from musec.agents.core.errors import ProviderError

from .base import OnDelta, TextDelta
from .ratelimit import OnRateLimited, RateLimiter
from .retry import OnRetry, RetryPolicy, stream_with_retries
from .sse import DEFAULT_TIMEOUT, DRAIN_S, SSEEvent, drain


class StreamingHTTPProvider:
    """A provider that streams answers over HTTP + SSE.

    Args:
        model: the model id (used when ``ModelRequest.model`` is empty).
        api_key: the credential; never logged, never in a message or ``repr``.
        base_url: the API root (trailing ``/`` dropped).
        http_client: a shared client; when given, ``aclose`` leaves it open.
        timeout: per-phase deadlines; ``read`` is the idle-stream timeout.
        retry_policy: the retry policy (``retry.RetryPolicy``).
        on_retry: told about each retry before its wait (see ``retry.RetryNotice``).
        limiter: the credential's shared ``ratelimit.RateLimiter``; each attempt waits on
            it first and feeds it the response's headers and usage. ``None``: no limit.
        on_rate_limited: told before each wait on ``limiter`` (``ratelimit.RateLimitWait``).

    Attributes:
        endpoint: host (and port) of ``base_url``, for the log: where calls go, never
            the key.
        catalog_id: the catalog entry this provider serves (set by ``make_provider``).
    """

    name = ""

    def __init__(
        self,
        model: str,
        api_key: str,
        *,
        base_url: str,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
        on_retry: OnRetry | None = None,
        limiter: RateLimiter | None = None,
        on_rate_limited: OnRateLimited | None = None,
    ):
        self.model = model
        self.catalog_id = ""
        self.limiter = limiter
        self.on_rate_limited = on_rate_limited
        self._sent_bytes = 0
        self._drain_s = DRAIN_S  # 0 once this server kept a finished answer's body open
        self.base_url = base_url.rstrip("/")
        self.url = self._url()
        self.timeout = timeout
        self.retry_policy = retry_policy or RetryPolicy()
        self.on_retry = on_retry
        self._api_key = api_key
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(timeout=timeout)
        parts = urlsplit(self.base_url)
        self.endpoint = f"{parts.hostname or ''}:{parts.port}" if parts.port else parts.hostname or ""

    def _url(self) -> str:
        raise NotImplementedError

    def _body(self, request: ModelRequest) -> bytes:
        raise NotImplementedError

    async def _stream_once(self, body: bytes, on_delta: OnDelta) -> ModelResponse:
        raise NotImplementedError

    async def _end_of_answer(self, events: AsyncIterator[SSEEvent]) -> None:
        """Read the rest of a finished answer's body (``sse.drain``) so its connection is
        reused; a server that kept one open past ``DRAIN_S`` is not waited for again."""
        if self._drain_s and not await drain(events, self._drain_s):
            self._drain_s = 0.0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, url={self.url!r})"

    async def complete(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        """Stream one answer, retrying per ``retry_policy``; see ``Provider.complete``.

        ``on_delta`` gets text (``kind="text"``) and thinking or reasoning summaries
        (``kind="thinking"``) as they arrive. A retried attempt streams its answer from the
        start; the ``RetryNotice`` says how many characters of the failed attempt to drop.
        A partial answer is never returned.

        Raises:
            QuotaExhausted, ProviderAuthError, ProviderBadRequest: at once, never retried.
            ProviderOverloaded, ProviderUnreachable: after the last attempt.
            ProviderError: anything else the API or the transport did wrong.
        """
        body = self._body(request)
        # Uncached input is about what was added since the last call (the rest is a cached
        # prefix); 4 bytes a token. The reported usage replaces the estimate afterwards.
        grown = len(body) - self._sent_bytes
        estimate = max(grown if grown > 0 else len(body), 4) // 4

        attempts = 0

        async def attempt(counted: OnDelta) -> ModelResponse:
            nonlocal attempts
            attempts += 1
            if attempts > 1:  # what the failed attempt streamed is dropped
                await on_delta(TextDelta("", kind="restart"))
            if self.limiter is None:
                return await self._read(body, counted)
            await self.limiter.acquire(estimate, self.on_rate_limited)
            try:
                response = await self._read(body, counted)
            except BaseException as error:
                self.limiter.refund(estimate)
                if isinstance(error, ProviderError) and error.status == 429 and error.retry_after_s:
                    # Everyone on this credential waits, not just this caller. A 429 that
                    # names no wait is this caller's to back off from (the retry policy).
                    self.limiter.pause(min(error.retry_after_s, self.retry_policy.max_retry_after_s))
                raise
            self.limiter.settle(estimate, response.usage)
            return response

        response = await stream_with_retries(attempt, on_delta, self.retry_policy, self.on_retry)
        self._sent_bytes = len(body)
        return response

    async def _read(self, body: bytes, on_delta: OnDelta) -> ModelResponse:
        """``_stream_once``; an event of a shape the adapter cannot read (a field of another
        type: a proxy's or a local server's quirk) is a ``ProviderError`` naming it, never a
        traceback. What the caller's ``on_delta`` raises passes through as it is."""
        theirs: BaseException | None = None

        async def passing(delta: TextDelta) -> None:
            nonlocal theirs
            try:
                await on_delta(delta)
            except BaseException as exc:
                theirs = exc
                raise

        try:
            return await self._stream_once(body, passing)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            if exc is theirs:
                raise
            raise ProviderError(
                f"{self.name}: malformed answer from {self.url}: an event musec cannot read "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc

    def _saw_headers(self, headers: httpx.Headers) -> None:
        """Every response's headers, errors included: rate-limit feedback."""
        if self.limiter is not None:
            self.limiter.observe(headers)

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._owns_client:
            await self._client.aclose()
