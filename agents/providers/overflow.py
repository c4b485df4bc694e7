"""Telling a context overflow from any other refused request.

A request longer than the model's window is refused as a bad request (HTTP 400, or an
``error`` event in the stream), like a malformed one; but unlike a malformed request it is
cured by making the history shorter, so the providers name it ``ContextOverflow`` and the
agent loop compacts and tries once more (issue 12 part 5).

Sources (the forms recognised, HTTP body or stream event alike):
    Anthropic (https://docs.claude.com/en/api/errors): ``invalid_request_error`` with
    "prompt is too long: 208786 tokens > 200000 maximum", or "input length and
    `max_tokens` exceed context limit: 188240 + 21333 > 200000"; ``request_too_large``
    (HTTP 413) for a body over the byte limit.
    OpenAI (https://platform.openai.com/docs/guides/error-codes; Responses and Chat
    Completions): code ``context_length_exceeded`` ("Your input exceeds the context window
    of this model", "This model's maximum context length is 128000 tokens. However, your
    messages resulted in 130415 tokens"), also in ``response.failed``. OpenAI-compatible
    servers (vLLM) send the Chat Completions wording with no code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from musec.agents.core.errors import ContextOverflow

__all__ = ["overflow_error"]

_CODES = frozenset({"context_length_exceeded", "request_too_large", "string_above_max_length"})
_WORDS = (
    "prompt is too long",
    "exceed context limit",
    "exceeds the context window",
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
)
#: Only a refused request can be an overflow (a 429 may speak of tokens per minute).
_STATUSES = frozenset({400, 413, 422})
# "208786 tokens > 200000 maximum"; "188240 + 21333 > 200000"
_ANTHROPIC_COUNTS = re.compile(r"(\d+)\s*tokens?\s*>\s*(\d+)|(\d+)\s*\+\s*\d+\s*>\s*(\d+)")
# "maximum context length is 128000 tokens. However, your messages resulted in 130415 tokens"
_OPENAI_LIMIT = re.compile(r"maximum context length is (\d+)", re.I)
_OPENAI_TOKENS = re.compile(r"resulted in (\d+) tokens|requested (\d+) tokens", re.I)


def _counts(message: str) -> tuple[int | None, int | None]:
    found = _ANTHROPIC_COUNTS.search(message)
    if found:
        tokens, limit = (found.group(1), found.group(2)) if found.group(1) else (found.group(3), found.group(4))
        return int(tokens), int(limit)
    limit = _OPENAI_LIMIT.search(message)
    tokens = _OPENAI_TOKENS.search(message)
    return (int(next(g for g in tokens.groups() if g)) if tokens else None,
            int(limit.group(1)) if limit else None)


def overflow_error(
    provider: str, status: int | None, error: Mapping[str, Any] | None, *, request_id: str | None = None
) -> ContextOverflow | None:
    """``ContextOverflow`` when ``error`` says the request is over the model's window, else ``None``.

    Args:
        provider: the provider's name, for the message.
        status: the HTTP status, or ``None`` for an error carried by the stream.
        error: the API's error object (``{type, code, message}``), from the body or the
            stream event; ``None`` when there was none (then only HTTP 413 counts).
        request_id: the provider's request id, for the message.
    """
    if status is not None and status not in _STATUSES:
        return None
    error = error or {}
    code = str(error.get("code") or "")
    kind = str(error.get("type") or "")
    text = str(error.get("message") or "")
    lowered = text.lower()
    if not (code in _CODES or kind in _CODES or status == 413 or any(w in lowered for w in _WORDS)):
        return None
    tokens, limit = _counts(text)
    where = f"HTTP {status}" if status is not None else "stream error"
    message = f"{provider} {where}: the request is over the model's context window ({code or kind or 'overflow'}: {text[:300]})"
    if request_id:
        message += f" (request-id {request_id})"
    return ContextOverflow(message, status=status, tokens=tokens, limit=limit)
