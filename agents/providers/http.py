"""The base of the HTTP streaming adapters: client ownership, retries, the call shape.

Each adapter says where it posts (``_url``), what it sends (``_body``) and how it reads one
streamed answer (``_stream_once``); this class does the rest the same way for all of them.
"""

from __future__ import annotations

import httpx
from musec.agents.conversation import ModelRequest, ModelResponse

from .base import OnDelta
from .retry import OnRetry, RetryPolicy, stream_with_retries
from .sse import DEFAULT_TIMEOUT


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
    ):
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self._url()
        self.timeout = timeout
        self.retry_policy = retry_policy or RetryPolicy()
        self.on_retry = on_retry
        self._api_key = api_key
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(timeout=timeout)

    def _url(self) -> str:
        raise NotImplementedError

    def _body(self, request: ModelRequest) -> bytes:
        raise NotImplementedError

    async def _stream_once(self, body: bytes, on_delta: OnDelta) -> ModelResponse:
        raise NotImplementedError

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
        return await stream_with_retries(
            lambda counted: self._stream_once(body, counted), on_delta, self.retry_policy, self.on_retry
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._owns_client:
            await self._client.aclose()
