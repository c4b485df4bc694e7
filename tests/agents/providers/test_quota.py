"""Quota exhaustion is told apart from rate limits, never retried, and says when it resets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from musec.agents.core.conversation import Message, ModelRequest, TextBlock
from musec.agents.core.errors import QuotaExhausted
from musec.agents.providers.quota import quota_error

from tests.support.anthropic_server import FIXTURES, error_response, message, raw

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(model="", system="", messages=[Message("user", [TextBlock("hi")])], tools=[])
HELLO = message([{"type": "text", "text": "hello"}])
SPEND = (
    "You have reached your specified API usage limits. "
    "You will regain access on 2031-05-01 at 00:00 UTC."
)


async def test_anthropic_429_spend_limit_is_not_retried_and_says_when(server, provider, deltas):
    notices = []
    provider.on_retry = notices.append
    server.enqueue(error_response(429, "rate_limit_error", SPEND, {"retry-after": "1"}), HELLO)
    with pytest.raises(QuotaExhausted) as caught:
        await provider.complete(REQUEST, deltas)
    assert caught.value.resets_at == datetime(2031, 5, 1, tzinfo=UTC)
    assert "resets at 2031-05-01 00:00 UTC" in str(caught.value)
    assert caught.value.status == 429 and not caught.value.retryable
    assert notices == [] and len(server.requests) == 1


async def test_anthropic_unified_limit_header_gives_the_reset(server, provider, deltas):
    headers = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": "1900000000",
        "retry-after": "3600",
    }
    server.enqueue(error_response(429, "rate_limit_error", "Rate limited.", headers), HELLO)
    with pytest.raises(QuotaExhausted) as caught:
        await provider.complete(REQUEST, deltas)
    assert caught.value.resets_at == datetime.fromtimestamp(1900000000, UTC)
    assert len(server.requests) == 1


async def test_anthropic_rate_limit_fixture_stays_retryable(server, provider, deltas):
    server.enqueue(raw(FIXTURES / "anthropic" / "http_429.txt"), HELLO)
    assert (await provider.complete(REQUEST, deltas)).text == "hello"


async def test_anthropic_credit_balance_midstream_is_quota(server, provider, deltas):
    server.enqueue(
        message([{"type": "text", "text": "x"}], error="rate_limit_error"),
        HELLO,
    )
    # The synthesized error message is its type; a plain rate-limit event is retried.
    assert (await provider.complete(REQUEST, deltas)).text == "hello"
    error = quota_error(
        "anthropic",
        None,
        {},
        {
            "type": "invalid_request_error",
            "message": "Your credit balance is too low to access the API.",
        },
    )
    assert isinstance(error, QuotaExhausted) and error.resets_at is None


@pytest.mark.parametrize(
    ("status", "error", "is_quota"),
    [
        (429, {"code": "insufficient_quota", "message": "You exceeded your current quota"}, True),
        (429, {"code": "rate_limit_exceeded", "message": "Rate limit reached ... billing"}, False),
        (429, {"type": "rate_limit_error", "message": "would exceed the rate limit"}, False),
        (
            400,
            {"type": "invalid_request_error", "message": "messages: roles must alternate"},
            False,
        ),
        (None, {"code": "server_error", "message": "An error occurred"}, False),
    ],
)
def test_quota_classification(status, error, is_quota):
    now = datetime(2030, 1, 1, tzinfo=UTC)
    result = quota_error("openai", status, {}, error, request_id="req_1", now=now)
    assert (result is not None) is is_quota
    if result is not None:
        assert "req_1" in str(result) and "did not say when it resets" in str(result)
