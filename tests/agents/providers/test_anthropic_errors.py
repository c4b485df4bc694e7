"""HTTP and transport failures, mapped once at the boundary and retried by the policy."""

from __future__ import annotations

import socket

import httpx
import pytest
from musec.agents.core.conversation import Message, ModelRequest, TextBlock
from musec.agents.core.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderOverloaded,
    ProviderUnreachable,
)
from musec.agents.providers import RetryPolicy, make_provider

from tests.support.anthropic_server import FIXTURES, Answer, error_response, message, raw

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(model="", system="", messages=[Message("user", [TextBlock("hi")])], tools=[])
HELLO = message([{"type": "text", "text": "hello"}])


async def test_429_retry_after_is_honoured_capped_and_reported(server, provider, deltas):
    notices = []

    async def on_retry(notice):
        notices.append(notice)

    provider.on_retry = on_retry
    server.enqueue(raw(FIXTURES / "anthropic" / "http_429.txt"), HELLO)
    response = await provider.complete(REQUEST, deltas)
    assert response.text == "hello"
    [notice] = notices
    assert notice.error.status == 429
    assert notice.error.retry_after_s == 17.0
    assert notice.delay_s == provider.retry_policy.max_retry_after_s  # capped
    assert "rate_limit_error" in str(notice.error)
    assert "req_011CwEDyDX3kU5ntRhg3Y8o3" in str(notice.error)
    assert len(server.requests) == 2


async def test_429_when_attempts_run_out(server, provider, deltas, api_key):
    provider.retry_policy = RetryPolicy(max_attempts=1)
    server.enqueue(raw(FIXTURES / "anthropic" / "http_429.txt"))
    with pytest.raises(ProviderOverloaded) as caught:
        await provider.complete(REQUEST, deltas)
    assert caught.value.status == 429 and caught.value.retry_after_s == 17.0
    assert api_key not in str(caught.value) and api_key not in repr(provider)


@pytest.mark.parametrize("status", [500, 502, 503, 529])
async def test_server_errors_are_retried_with_backoff(server, provider, deltas, status):
    notices = []
    provider.on_retry = notices.append
    server.enqueue(error_response(status, "overloaded_error", "Overloaded"), HELLO)
    assert (await provider.complete(REQUEST, deltas)).text == "hello"
    [notice] = notices
    assert notice.error.status == status
    assert 0 < notice.delay_s <= provider.retry_policy.max_delay_s


async def test_retries_stop_at_max_attempts(server, provider, deltas):
    notices = []
    provider.on_retry = notices.append
    server.enqueue(*[error_response(529, "overloaded_error", "Overloaded")] * 3, HELLO)
    with pytest.raises(ProviderOverloaded):
        await provider.complete(REQUEST, deltas)
    assert [n.attempt for n in notices] == [1, 2]
    assert len(server.requests) == 3 and server.pending == 1


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (401, "authentication_error", ProviderAuthError),
        (403, "permission_error", ProviderAuthError),
        (400, "invalid_request_error", ProviderBadRequest),
        (404, "not_found_error", ProviderBadRequest),
        (422, "invalid_request_error", ProviderBadRequest),
    ],
)
async def test_client_errors_are_not_retried(
    server, provider, deltas, api_key, status, kind, error
):
    server.enqueue(error_response(status, kind, "nope"), HELLO)
    with pytest.raises(error) as caught:
        await provider.complete(REQUEST, deltas)
    assert caught.value.status == status
    assert f"HTTP {status}" in str(caught.value) and kind in str(caught.value)
    assert api_key not in str(caught.value)
    assert len(server.requests) == 1


async def test_connection_refused_is_unreachable(http_client, deltas, fast_retries, api_key):
    with socket.socket() as s:  # a port with nothing listening once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    notices = []
    provider = make_provider(
        "anthropic/claude-test",
        {"ANTHROPIC_API_KEY": api_key, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}/"},
        http_client=http_client,
        retry_policy=fast_retries,
        on_retry=notices.append,
    )
    with pytest.raises(ProviderUnreachable) as caught:
        await provider.complete(REQUEST, deltas)
    assert len(notices) == fast_retries.max_attempts - 1
    assert api_key not in str(caught.value)


async def test_idle_stream_times_out(server, http_client, deltas, api_key):
    data = (FIXTURES / "anthropic" / "text_only.sse").read_bytes()
    server.enqueue(Answer(chunks=(data[:700],), end="hang"))  # then silence
    provider = make_provider(
        "anthropic/claude-test",
        {"ANTHROPIC_API_KEY": api_key, "ANTHROPIC_BASE_URL": server.base_url},
        http_client=http_client,
        retry_policy=RetryPolicy(max_attempts=1),
        timeout=httpx.Timeout(5.0, read=0.2),
    )
    with pytest.raises(ProviderUnreachable, match="idle-stream timeout"):
        await provider.complete(REQUEST, deltas)


async def test_non_sse_success_is_an_error(server, provider, deltas):
    body = b'{"ok": true}'
    server.enqueue(
        raw(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body)
        )
    )
    with pytest.raises(ProviderError, match="did not answer with an event stream"):
        await provider.complete(REQUEST, deltas)


async def test_provider_owns_its_client_when_none_injected(server, deltas, api_key):
    provider = make_provider(
        "anthropic/claude-test",
        {"ANTHROPIC_API_KEY": api_key, "ANTHROPIC_BASE_URL": server.base_url},
    )
    server.enqueue(HELLO)
    try:
        assert (await provider.complete(REQUEST, deltas)).text == "hello"
    finally:
        await provider.aclose()
