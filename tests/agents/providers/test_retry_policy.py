"""The retry policy on its own: backoff, jitter, retry-after, attempts, notices."""

from __future__ import annotations

import random

import pytest
from musec.agents.core.errors import ProviderBadRequest, ProviderOverloaded, ProviderUnreachable
from musec.agents.providers.retry import RetryPolicy, parse_retry_after, with_retries

pytestmark = pytest.mark.anyio


def test_backoff_doubles_with_bounded_jitter_and_a_cap():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0, jitter=0.25, rng=random.Random(7))
    error = ProviderUnreachable("down")
    for number, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0), (9, 8.0)]:
        for _ in range(50):
            assert 0.75 * ceiling <= policy.delay_s(number, error) <= ceiling


def test_retry_after_wins_over_backoff_and_is_capped():
    policy = RetryPolicy(max_retry_after_s=60.0)
    assert policy.delay_s(1, ProviderOverloaded("x", retry_after_s=17.0)) == 17.0
    assert policy.delay_s(1, ProviderOverloaded("x", retry_after_s=3600.0)) == 60.0
    assert policy.delay_s(1, ProviderOverloaded("x", retry_after_s=0.0)) == 0.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "17"}, 17.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Tue, 16 Sep 2025 14:03:29 GMT"}, 17.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers, seconds):
    now = 1758031392.0  # Tue, 16 Sep 2025 14:03:12 GMT
    assert parse_retry_after(headers, now_s=now) == seconds


async def test_non_retryable_error_is_raised_at_once(anyio_backend):
    calls = []

    async def attempt():
        calls.append(1)
        raise ProviderBadRequest("bad")

    with pytest.raises(ProviderBadRequest):
        await with_retries(attempt, RetryPolicy(max_attempts=5, base_delay_s=0.001))
    assert len(calls) == 1


async def test_retries_until_success_and_reports_each(anyio_backend):
    outcomes = [ProviderUnreachable("a"), ProviderOverloaded("b", retry_after_s=0.001), "ok"]
    notices = []

    async def attempt():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def on_retry(notice):
        notices.append(notice)

    policy = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.002)
    assert await with_retries(attempt, policy, on_retry, streamed_chars=lambda: 4) == "ok"
    assert [(n.attempt, n.max_attempts, n.discarded_output_chars) for n in notices] == [
        (1, 3, 4),
        (2, 3, 4),
    ]
    assert notices[1].delay_s == 0.001
    assert str(notices[0].error) == "a"
