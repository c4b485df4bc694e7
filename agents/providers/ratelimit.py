"""Daemon-wide rate limits: one limiter per credential, shared by every agent and session.

Fan-out drains a team's limit faster than one chat, so every model call of the daemon
that uses the same credential waits on the same ``RateLimiter`` before each attempt. The
limiter knows four per-minute budgets (requests, input tokens, output tokens, all tokens),
each a token bucket (https://docs.claude.com/en/api/rate-limits: "the token bucket
algorithm... capacity is continuously replenished up to your maximum limit"):

* The catalog's ``rate_limits`` give each bucket's capacity up front, when known.
* The provider's response headers correct it after every response, errors included:
  ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``
  (reset an RFC 3339 time; https://docs.claude.com/en/api/rate-limits#response-headers)
  and ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset a duration such
  as ``6m0s`` or ``20ms``; https://platform.openai.com/docs/guides/rate-limits). The
  server's ``remaining`` replaces the local estimate, and the bucket refills so that it
  is full at the server's ``reset``.
* A 429 with ``retry-after`` (or ``retry-after-ms``) pauses everyone on the credential,
  not just the caller, for that long (capped by the retry policy).
* A 429 that says nothing (no ``retry-after``, no rate-limit headers: vLLM, llama.cpp, a
  proxy or gateway) changes nothing shared: the caller retries after the retry policy's
  backoff, as for any retryable error. Nothing is guessed from it: a limit made up from
  one refusal (fresh-user s8 J1: the requests of the last minute less one) held every
  later request of every session to a few a minute while they all succeeded.
  So a refusal leaves nothing behind but the pause the server asked for, which ends on
  its own: the limiter never slows requests the server answers beyond the limits the
  server's headers or the person's ``models.toml`` named.

The catalog's per-model limits are given only where the person configured them (their
tier, in ``models.toml``); the shipped lowest-tier numbers would hold a faster account or
a header-less gateway to waits it does not need (``catalog.RateLimits.configured``).

Input tokens are reserved before a call (an estimate the caller gives) and settled with
the usage the provider reports afterwards, so a bucket may go into debt and the next
caller waits it off. Waiting is never silent: ``acquire`` tells its ``on_wait`` callback
(which the daemon logs as a ``rate_limited`` event) before each wait.

Limiters are keyed by provider, endpoint and a SHA-256 digest of the API key; the key
itself is never stored. Nothing here starts a task: waiters queue on one lock per
credential (FIFO) and sleep on anyio's clock, woken early when new headers arrive.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio

__all__ = [
    "OnRateLimited",
    "RateLimitRegistry",
    "RateLimitWait",
    "RateLimiter",
    "credential_id",
    "parse_duration_s",
    "rate_limit_headers",
]

_DIMENSIONS = ("requests", "input_tokens", "output_tokens", "tokens")


@dataclass(frozen=True)
class RateLimitWait:
    """What ``on_wait`` is told before the limiter makes a caller wait.

    Attributes:
        credential: the limiter's id (``provider:host:digest``, never the key).
        wait_s: seconds the caller is about to wait (it may be woken earlier, or wait
            again if the budget is still short).
        reason: the budget that is short: ``requests``, ``input_tokens``,
            ``output_tokens``, ``tokens`` or ``retry_after`` (a 429 paused the credential).
    """

    credential: str
    wait_s: float
    reason: str


OnRateLimited = Callable[[RateLimitWait], Awaitable[None] | None]


def credential_id(provider: str, base_url: str, api_key: str) -> str:
    """The id of a credential: ``provider:host:first 12 hex digits of sha256(key)``.

    The host is part of it so two keyless local servers get separate limiters.
    """
    digest = hashlib.sha256(api_key.encode()).hexdigest()[:12]
    return f"{provider}:{_host(base_url)}:{digest}"


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration_s(value: str) -> float | None:
    """Seconds in an OpenAI reset duration (``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``).

    A bare number is seconds. Returns ``None`` when ``value`` is not a duration.
    """
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * scale[u] for n, u in parts)


def _reset_in_s(value: str, now_s: float) -> float | None:
    """Seconds until a reset given as an RFC 3339 time or an OpenAI duration."""
    if "T" in value or "-" in value:
        try:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            return None
        return max(when.timestamp() - now_s, 0.0)
    return parse_duration_s(value)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None


_ANTHROPIC = {
    "requests": "requests",
    "tokens": "tokens",
    "input-tokens": "input_tokens",
    "output-tokens": "output_tokens",
}
_OPENAI = {"requests": "requests", "tokens": "tokens"}


def rate_limit_headers(
    headers: Mapping[str, str], *, now_s: float | None = None
) -> dict[str, tuple[float | None, float | None, float | None]]:
    """The rate-limit state a response's headers report, per budget.

    Args:
        headers: response headers (lower-case names, as httpx gives them).
        now_s: the wall-clock time (Unix seconds) to measure RFC 3339 resets from.

    Returns:
        ``{budget: (limit, remaining, reset_in_s)}`` for each budget the headers name
        (``requests``, ``tokens``, ``input_tokens``, ``output_tokens``); a part the
        headers leave out is ``None``.
    """
    now = time.time() if now_s is None else now_s
    found: dict[str, tuple[float | None, float | None, float | None]] = {}
    for name, dimension in _ANTHROPIC.items():
        prefix = f"anthropic-ratelimit-{name}-"
        _collect(found, dimension, headers, prefix + "limit", prefix + "remaining", prefix + "reset", now)
    for name, dimension in _OPENAI.items():
        _collect(found, dimension, headers, f"x-ratelimit-limit-{name}",
                 f"x-ratelimit-remaining-{name}", f"x-ratelimit-reset-{name}", now)
    return found


def _collect(found: dict, dimension: str, headers: Mapping[str, str], limit: str,
             remaining: str, reset: str, now: float) -> None:
    values = (
        _number(headers.get(limit)),
        _number(headers.get(remaining)),
        _reset_in_s(headers[reset], now) if reset in headers else None,
    )
    if any(v is not None for v in values):
        found[dimension] = values


class _Bucket:
    """One per-minute budget: a token bucket, or a server window when the size is unknown."""

    def __init__(self, capacity: float | None, now: float):
        self.capacity = capacity
        self.level = capacity or 0.0
        self.rate = capacity / 60.0 if capacity else 0.0  # units per second
        self.at = now
        self.window_left: float | None = None  # unknown size: the server's remaining...
        self.window_until: float | None = None  # ...until its reset

    def _refill(self, now: float) -> None:
        if self.capacity:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now
        if self.window_until is not None and now >= self.window_until:
            self.window_left = self.window_until = None

    def wait_s(self, need: float, now: float) -> float:
        self._refill(now)
        wait = 0.0
        if self.capacity:
            short = min(need, self.capacity) - self.level
            if short > 0:
                wait = short / self.rate
        if self.window_until is not None and self.window_left is not None and self.window_left < need:
            wait = max(wait, self.window_until - now)
        return wait

    def take(self, amount: float, now: float) -> None:
        self._refill(now)
        if self.capacity:
            self.level = min(self.capacity, self.level - amount)
        if self.window_left is not None:
            self.window_left -= amount

    def observe(self, limit: float | None, remaining: float | None, reset_in: float | None,
                now: float) -> None:
        self._refill(now)
        if limit:
            self.capacity = limit
        if remaining is None:
            return
        if self.capacity:
            self.level = min(remaining, self.capacity)
            # Full again at the server's reset, and never slower than the nominal rate.
            derived = (self.capacity - self.level) / reset_in if reset_in else 0.0
            self.rate = max(derived, self.capacity / 60.0)
        elif reset_in is not None:
            self.window_left, self.window_until = remaining, now + reset_in


class RateLimiter:
    """The shared budget of one credential; get it from ``RateLimitRegistry.limiter_for``.

    Args:
        credential: the id from ``credential_id`` (shown in ``RateLimitWait``).
        limits: per-minute capacities by budget name (``requests``, ``input_tokens``,
            ``output_tokens``, ``tokens``); a missing or ``None`` one is unknown until the
            headers tell it.
        clock: the clock waits are measured on (anyio's, which is also the loop's);
            only for tests that need another.
    """

    def __init__(
        self,
        credential: str,
        limits: Mapping[str, int | None] | None = None,
        *,
        clock: Callable[[], float] = anyio.current_time,
    ):
        self.credential = credential
        self._clock = clock
        self._buckets: dict[str, _Bucket] | None = None
        self._limits = dict(limits or {})
        self._paused_until = 0.0
        self._lock: anyio.Lock | None = None
        self._changed: anyio.Event | None = None

    def __repr__(self) -> str:
        return f"RateLimiter({self.credential!r})"

    # The buckets and the lock are made on first use, inside the event loop.
    def _state(self) -> dict[str, _Bucket]:
        if self._buckets is None:
            now = self._clock()
            self._buckets = {d: _Bucket(self._limits.get(d) or None, now) for d in _DIMENSIONS}
            self._lock = anyio.Lock()
            self._changed = anyio.Event()
        return self._buckets

    def add_limits(self, limits: Mapping[str, int | None]) -> None:
        """Tighten the known capacities (the smallest limit of the models on this key wins)."""
        if self._buckets is None:  # not used yet: no clock needed
            for dimension, value in limits.items():
                if value and (not self._limits.get(dimension) or value < self._limits[dimension]):
                    self._limits[dimension] = value
            return
        buckets = self._buckets
        for dimension, value in limits.items():
            bucket = buckets.get(dimension)
            if bucket is not None and value and (not bucket.capacity or value < bucket.capacity):
                bucket.observe(value, min(bucket.level, value) if bucket.capacity else value,
                               None, self._clock())

    def _wait(self, need: dict[str, float]) -> tuple[float, str]:
        now = self._clock()
        waits = [(self._paused_until - now, "retry_after")]
        waits += [(self._state()[d].wait_s(n, now), d) for d, n in need.items()]
        return max(waits)

    async def acquire(self, input_tokens: int = 0, on_wait: OnRateLimited | None = None) -> float:
        """Wait until one request of about ``input_tokens`` input tokens fits, then take it.

        Callers queue in order; each wait is announced to ``on_wait`` first.

        Args:
            input_tokens: the caller's estimate of the request's uncached input tokens.
            on_wait: called (sync or async) with a ``RateLimitWait`` before each wait.

        Returns:
            The seconds waited (0.0 when the budget allowed the call at once).
        """
        self._state()
        assert self._lock is not None
        need = {"requests": 1.0, "input_tokens": float(input_tokens), "output_tokens": 1.0,
                "tokens": float(input_tokens) + 1.0}
        waited = 0.0
        async with self._lock:
            while True:
                wait_s, reason = self._wait(need)
                if wait_s <= 0:
                    break
                started = self._clock()
                if on_wait is not None:
                    told = on_wait(RateLimitWait(self.credential, round(wait_s, 3), reason))
                    if inspect.isawaitable(told):
                        await told
                assert self._changed is not None
                with anyio.move_on_after(wait_s):
                    await self._changed.wait()  # new headers or a pause: look again
                waited += self._clock() - started
            now = self._clock()
            for dimension, amount in need.items():
                self._state()[dimension].take(amount, now)
        return waited

    def settle(self, input_tokens_estimate: int, usage: Any) -> None:
        """Replace a call's estimate by the usage the provider reported.

        ``usage`` has ``input_tokens`` (uncached), ``cache_read_tokens``,
        ``cache_write_tokens`` and ``output_tokens`` (``conversation.Usage``). Input
        budgets count uncached input and cache writes (Anthropic does not count cache
        reads against its input limit); the all-tokens budget counts everything.
        """
        buckets, now = self._state(), self._clock()
        uncached = usage.input_tokens + usage.cache_write_tokens
        everything = uncached + usage.cache_read_tokens + usage.output_tokens
        buckets["input_tokens"].take(uncached - input_tokens_estimate, now)
        buckets["output_tokens"].take(usage.output_tokens - 1, now)
        buckets["tokens"].take(everything - input_tokens_estimate - 1, now)

    def refund(self, input_tokens_estimate: int) -> None:
        """Give back a failed call's token reservation (its request still counts)."""
        buckets, now = self._state(), self._clock()
        for dimension, amount in (("input_tokens", input_tokens_estimate), ("output_tokens", 1),
                                  ("tokens", input_tokens_estimate + 1)):
            buckets[dimension].take(-amount, now)

    def observe(self, headers: Mapping[str, str]) -> None:
        """Fold a response's rate-limit headers into the budgets (see the module docstring)."""
        reported = rate_limit_headers(headers)
        if not reported:
            return
        buckets, now = self._state(), self._clock()
        for dimension, (limit, remaining, reset_in) in reported.items():
            buckets[dimension].observe(limit, remaining, reset_in, now)
        self._wake()

    def pause(self, seconds: float) -> None:
        """Make every caller on this credential wait ``seconds`` from now (a 429's retry-after)."""
        self._state()
        self._paused_until = max(self._paused_until, self._clock() + max(seconds, 0.0))
        self._wake()

    def _wake(self) -> None:
        assert self._changed is not None
        self._changed.set()
        self._changed = anyio.Event()


class RateLimitRegistry:
    """The daemon's limiters, one per credential (``Daemon.rate_limits``).

    Holds no key: limiters are found by ``credential_id``.
    """

    def __init__(self) -> None:
        self._limiters: dict[str, RateLimiter] = {}

    def limiter_for(
        self, provider: str, base_url: str, api_key: str,
        limits: Mapping[str, int | None] | None = None,
    ) -> RateLimiter:
        """The shared limiter of this credential, made on first use.

        ``limits`` (the catalog's per-minute limits of the model about to be used)
        tighten the known capacities; the headers correct them later.
        """
        key = credential_id(provider, base_url, api_key)
        limiter = self._limiters.get(key)
        if limiter is None:
            limiter = self._limiters[key] = RateLimiter(key, limits)
        elif limits:
            limiter.add_limits(limits)
        return limiter

    def __len__(self) -> int:
        return len(self._limiters)
