"""Telling an exhausted quota from a rate limit.

Both usually arrive as HTTP 429, but only a rate limit clears by waiting seconds: a quota
(prepaid credit, a monthly spend limit, a subscription plan's usage window) stays
exhausted for hours or until someone pays, so retrying it is a retry storm. This module
recognises the quota cases and finds the reset time when the provider gives one.

Sources:
    OpenAI error codes (``insufficient_quota``: "You exceeded your current quota, please
    check your plan and billing details"):
    https://platform.openai.com/docs/guides/error-codes.
    Anthropic errors and rate limits: https://docs.claude.com/en/api/errors and
    https://docs.claude.com/en/api/rate-limits. A workspace spend limit answers "You have
    reached your specified API usage limits. You will regain access on YYYY-MM-DD at
    HH:MM UTC."; an empty prepaid balance answers "Your credit balance is too low";
    plan (unified) limits send ``anthropic-ratelimit-unified-status: rejected`` with
    ``anthropic-ratelimit-unified-reset`` (Unix seconds).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from musec.agents.core.errors import QuotaExhausted

__all__ = ["quota_error"]

_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "quota_exceeded"})
_QUOTA_WORDS = (
    "usage limit",
    "spend limit",
    "spending limit",
    "credit balance",
    "exceeded your current quota",
    "regain access",
    "billing",
)
_REGAIN = re.compile(
    r"regain access on (\d{4}-\d{2}-\d{2})(?:\s+at\s+(\d{1,2}:\d{2})(?::\d{2})?)?", re.I
)


def _reset_from_headers(headers: Mapping[str, str]) -> datetime | None:
    if headers.get("anthropic-ratelimit-unified-status", "").lower() != "rejected":
        return None
    value = headers.get("anthropic-ratelimit-unified-reset")
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _reset_from_message(message: str) -> datetime | None:
    found = _REGAIN.search(message)
    if not found:
        return None
    day, clock = found.group(1), found.group(2) or "00:00"
    try:
        return datetime.fromisoformat(f"{day}T{clock.zfill(5)}:00+00:00")
    except ValueError:
        return None


def _describe(resets_at: datetime | None, now: datetime | None) -> str:
    if resets_at is None:
        return "the provider did not say when it resets (check the plan and billing)"
    now = now or datetime.now(UTC)
    seconds = max(int((resets_at - now).total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    return f"it resets at {resets_at:%Y-%m-%d %H:%M} UTC (in {hours} h {rest // 60} min)"


def quota_error(
    provider: str,
    status: int | None,
    headers: Mapping[str, str],
    error: Mapping[str, Any] | None,
    *,
    request_id: str | None = None,
    now: datetime | None = None,
) -> QuotaExhausted | None:
    """A ``QuotaExhausted`` when this failure is an exhausted quota, else ``None``.

    Args:
        provider: provider name for the message (``openai``, ``anthropic``...).
        status: the HTTP status, or ``None`` for an error event inside a stream.
        headers: the response headers (lower-case names, as httpx gives them).
        error: the API's ``error`` object (``type``, ``code``, ``message``).
        request_id: shown in the message when known.
        now: the current time, for the "in N h" part (tests inject it).

    A rate limit ("would exceed the rate limit... per minute") is not a quota: it stays a
    retryable ``ProviderOverloaded``.
    """
    error = error or {}
    code = str(error.get("code") or "")
    kind = str(error.get("type") or "")
    text = str(error.get("message") or "")
    lowered = text.lower()
    header_reset = _reset_from_headers(headers)
    is_quota = (
        code in _QUOTA_CODES
        or kind in _QUOTA_CODES
        or header_reset is not None
        or (
            status in (None, 400, 402, 403, 429)
            and "rate limit" not in lowered
            and any(word in lowered for word in _QUOTA_WORDS)
        )
    )
    if not is_quota:
        return None
    resets_at = header_reset or _reset_from_message(text)
    label = code or kind or "quota"
    where = f"HTTP {status}" if status is not None else "stream error"
    message = f"{provider} {where}: quota exhausted ({label}: {text[:300]}); " + _describe(
        resets_at, now
    )
    if request_id:
        message += f" (request-id {request_id})"
    return QuotaExhausted(message, status=status, resets_at=resets_at)
