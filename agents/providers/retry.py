"""The one retry policy of every model provider.

Retryable failures (``ProviderError.retryable``: HTTP 408/409/429/529/5xx, transport
errors, an ``overloaded_error``/``api_error`` event mid-stream, a stalled stream) are
tried again after a jittered exponential backoff. A ``retry-after`` the server sent is
honoured instead of the backoff, capped at ``RetryPolicy.max_retry_after_s``. Every
retry is reported through an ``on_retry`` callback before its wait so the agent loop can
log it; nothing is retried silently.

The defaults follow the Anthropic and OpenAI SDKs' retry behaviour (exponential backoff
from 0.5 s doubling to 8 s, 25 % jitter, ``retry-after`` honoured up to 60 s).
"""

from __future__ import annotations

import email.utils
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
from musec.agents.core.errors import ProviderError

__all__ = [
    "OnRetry",
    "RetryNotice",
    "RetryPolicy",
    "parse_retry_after",
    "stream_with_retries",
    "with_retries",
]

T = TypeVar("T")
D = TypeVar("D")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before trying a model call again.

    Attributes:
        max_attempts: total attempts including the first (1 means never retry).
        base_delay_s: backoff before the first retry, in seconds; doubles per retry.
        max_delay_s: cap on the exponential backoff, in seconds.
        max_retry_after_s: cap on a server's ``retry-after``, in seconds.
        jitter: fraction (0..1) by which each backoff is randomly shortened.
        rng: source of jitter; inject a seeded ``random.Random`` for reproducible tests.
    """

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 60.0
    jitter: float = 0.25
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay_s(self, retry_number: int, error: ProviderError) -> float:
        """Seconds to wait before retry number ``retry_number`` (1-based) after ``error``.

        A ``retry_after_s`` on the error wins over the backoff, capped at
        ``max_retry_after_s``.
        """
        if error.retry_after_s is not None and error.retry_after_s >= 0:
            return min(error.retry_after_s, self.max_retry_after_s)
        backoff = min(self.base_delay_s * 2 ** (retry_number - 1), self.max_delay_s)
        return backoff * (1.0 - self.jitter * self.rng.random())


@dataclass(frozen=True)
class RetryNotice:
    """What the ``on_retry`` callback is told before each wait.

    Attributes:
        attempt: the attempt that just failed (1-based).
        max_attempts: the policy's total attempts.
        delay_s: seconds the caller now waits before the next attempt.
        error: the retryable error that made the attempt fail (its ``status`` and
            ``retry_after_s`` say why and what the server asked for).
        discarded_output_chars: characters already streamed through ``on_delta`` by the
            failed attempt; the next attempt starts its answer afresh, so a live view
            should drop them.
    """

    attempt: int
    max_attempts: int
    delay_s: float
    error: ProviderError
    discarded_output_chars: int = 0


OnRetry = Callable[[RetryNotice], Awaitable[None] | None]


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    on_retry: OnRetry | None = None,
    *,
    streamed_chars: Callable[[], int] | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, retrying retryable ``ProviderError``s.

    Args:
        attempt: makes one complete call; must raise rather than return a partial result.
        policy: the retry policy.
        on_retry: called (sync or async) with a ``RetryNotice`` before each wait.
        streamed_chars: how many output characters the current attempt has streamed so
            far; reported as ``RetryNotice.discarded_output_chars``. Reset it per attempt.

    Returns:
        The first successful attempt's result.

    Raises:
        ProviderError: a non-retryable error at once, or the last retryable error when
            ``policy.max_attempts`` attempts have failed.
    """
    number = 1
    while True:
        try:
            return await attempt()
        except ProviderError as error:
            if not error.retryable or number >= policy.max_attempts:
                raise
            delay = policy.delay_s(number, error)
            notice = RetryNotice(
                attempt=number,
                max_attempts=policy.max_attempts,
                delay_s=delay,
                error=error,
                discarded_output_chars=streamed_chars() if streamed_chars else 0,
            )
        if on_retry is not None:
            result = on_retry(notice)
            if inspect.isawaitable(result):
                await result
        await anyio.sleep(delay)
        number += 1


async def stream_with_retries(
    stream_once: Callable[[Callable[[D], Awaitable[None]]], Awaitable[T]],
    on_delta: Callable[[D], Awaitable[None]],
    policy: RetryPolicy,
    on_retry: OnRetry | None = None,
) -> T:
    """``with_retries`` for a streaming call: counts what each attempt streamed.

    ``stream_once(counted_on_delta)`` makes one attempt, passing each delta (anything
    with a ``text``) to the callback it is given; the characters streamed by a failed
    attempt are reported as ``RetryNotice.discarded_output_chars``.
    """
    streamed = 0

    async def counted(delta: D) -> None:
        nonlocal streamed
        streamed += len(getattr(delta, "text", ""))
        await on_delta(delta)

    async def attempt() -> T:
        nonlocal streamed
        streamed = 0
        return await stream_once(counted)

    return await with_retries(attempt, policy, on_retry, streamed_chars=lambda: streamed)


def parse_retry_after(headers: Mapping[str, str], *, now_s: float | None = None) -> float | None:
    """Seconds the server asks to wait, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be integer/decimal seconds or an HTTP date (RFC 9110 §10.2.3);
    ``retry-after-ms`` is the Anthropic/OpenAI millisecond variant. Returns ``None``
    when neither header is present or parseable.
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_s is None else now_s
    return max(when.timestamp() - now, 0.0)
