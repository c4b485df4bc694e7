"""Anthropic Messages API adapter: request conversion and stream assembly.

Sources:
    Messages API and its streaming events:
    https://docs.claude.com/en/api/messages and
    https://docs.claude.com/en/api/messages-streaming (message_start,
    content_block_start/delta/stop, message_delta, message_stop, ping, error).
    Extended thinking (signatures sent back verbatim):
    https://docs.claude.com/en/docs/build-with-claude/extended-thinking.
    Prompt caching (``cache_control`` breakpoints, at most 4 per request):
    https://docs.claude.com/en/docs/build-with-claude/prompt-caching.
    Assembly follows ``anthropic-sdk-python``'s ``accumulate_event``: blocks are
    appended at ``content_block_start``; text and thinking deltas concatenate;
    ``input_json_delta`` fragments are joined and parsed at ``content_block_stop``;
    ``signature_delta`` replaces; ``message_delta.usage`` replaces (never adds) the
    ``message_start`` usage, field by field.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import msgspec
from musec.agents.core.conversation import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from musec.agents.core.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderOverloaded,
    ProviderUnreachable,
)

from .base import OnDelta, TextDelta
from .http import StreamingHTTPProvider
from .overflow import overflow_error
from .quota import quota_error
from .sse import SSEEvent, post_sse

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_BASE_URL", "AnthropicProvider", "build_request_body"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"

_EPHEMERAL = {"type": "ephemeral"}
_CACHEABLE = frozenset({"text", "tool_use", "tool_result"})  # thinking blocks cannot be marked
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


# --- request conversion -------------------------------------------------------------------


def _block_to_api(block: Block) -> dict[str, Any] | None:
    """One neutral block as an Anthropic content block; ``None`` for blocks it cannot take."""
    match block:
        case TextBlock(text=text):
            # The API refuses empty text blocks; an empty one carries nothing.
            return {"type": "text", "text": text} if text else None
        case ToolCallBlock(id=call_id, name=name, input=tool_input):
            return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
        case ToolResultBlock(call_id=call_id, content=content, is_error=is_error):
            out: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": content,
            }
            if is_error:
                out["is_error"] = True
            return out
        case ThinkingBlock(thinking=thinking, signature=signature):
            return {"type": "thinking", "thinking": thinking, "signature": signature}
        case RedactedThinkingBlock(data=data):
            return {"type": "redacted_thinking", "data": data}
        case ReasoningBlock():
            return None  # OpenAI encrypted reasoning means nothing to Anthropic.
    return None


def _messages_to_api(messages: list[Message]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        blocks = [b for b in map(_block_to_api, message.content) if b is not None]
        out.append({"role": message.role, "content": blocks})
    return out


def _mark_last_cacheable(content: list[dict[str, Any]]) -> bool:
    for block in reversed(content):
        if block["type"] in _CACHEABLE:
            block["cache_control"] = _EPHEMERAL
            return True
    return False


def build_request_body(request: ModelRequest, model: str) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /v1/messages`` for ``request``.

    Layout is cache-friendly: tools, then system, then the append-only history. Cache
    breakpoints (``cache_control: ephemeral``) go on the last tool, the system prompt,
    the latest message and the previous user message (the breakpoint the previous
    request wrote, so it is read back even when a turn adds more than the API's
    20-block lookback). Empty text blocks and an empty system prompt are left out.
    """
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_output_tokens}
    if request.tools:
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        tools[-1]["cache_control"] = _EPHEMERAL
        body["tools"] = tools
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    messages = _messages_to_api(request.messages)
    if messages:
        _mark_last_cacheable(messages[-1]["content"])
        if len(messages) >= 3:
            _mark_last_cacheable(messages[-3]["content"])
    body["messages"] = messages
    body["stream"] = True
    return body


# --- stream assembly ----------------------------------------------------------------------


def _stream_error(data: dict[str, Any], request_id: str | None) -> ProviderError:
    """Map an ``error`` event (sent after HTTP 200) to the error named by its type."""
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    kind = str(error.get("type", "error"))
    message = f"anthropic stream error {kind}: {str(error.get('message', ''))[:500]}"
    if request_id:
        message += f" (request-id {request_id})"
    quota = quota_error("anthropic", None, {}, error, request_id=request_id)
    if quota is not None:
        return quota
    overflow = overflow_error("anthropic", None, error, request_id=request_id)
    if overflow is not None:
        return overflow
    if kind in ("overloaded_error", "api_error", "rate_limit_error", "timeout_error"):
        return ProviderOverloaded(message)
    if kind in ("authentication_error", "permission_error"):
        return ProviderAuthError(message)
    if kind in ("invalid_request_error", "not_found_error", "request_too_large"):
        return ProviderBadRequest(message)
    return ProviderError(message)


def _tool_call(block: dict[str, Any]) -> ToolCallBlock:
    raw = "".join(block["json"])
    if not raw:
        start_input = block.get("input")
        return ToolCallBlock(
            block["id"], block["name"], start_input if isinstance(start_input, dict) else {}
        )
    try:
        parsed = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        problem = (
            f"tool input is not valid JSON ({exc}); received {len(raw)} characters: {raw[:200]!r}"
        )
        return ToolCallBlock(block["id"], block["name"], {}, input_error=problem)
    if not isinstance(parsed, dict):
        problem = f"tool input is JSON {type(parsed).__name__}, not an object: {raw[:200]!r}"
        return ToolCallBlock(block["id"], block["name"], {}, input_error=problem)
    return ToolCallBlock(block["id"], block["name"], parsed)


class _Assembler:
    """Folds one message's stream events into a ``ModelResponse``."""

    def __init__(self, request_id: str | None):
        self.request_id = request_id
        self.message: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: SSEEvent) -> TextDelta | None:
        """Apply one event; return the text it streams, if any.

        Raises:
            ProviderError: for an ``error`` event, mapped by its error type.
        """
        data = event.data
        match data.get("type", event.event):
            case "message_start":
                self.message = data.get("message") or {}
                self.usage = dict(self.message.get("usage") or {})
                return TextDelta("", kind="usage", usage=self._usage())  # kept if the answer is cut off
            case "content_block_start":
                block = dict(data.get("content_block") or {})
                # Pieces are collected in lists and joined once (long answers stay linear).
                block["json"] = []
                block["texts"] = [str(block.get("text") or block.get("thinking") or "")]
                self.blocks[int(data.get("index", len(self.blocks)))] = block
            case "content_block_delta":
                return self._delta(self.blocks.get(data.get("index", -1)), data.get("delta") or {})
            case "message_delta":
                delta = data.get("delta") or {}
                if "stop_reason" in delta:
                    self.stop_reason = delta["stop_reason"]
                new_usage = data.get("usage") or {}
                self.usage.update({k: v for k, v in new_usage.items() if v is not None})
            case "message_stop":
                self.stopped = True
            case "error":
                raise _stream_error(data, self.request_id)
            case _:
                pass  # ping, content_block_stop (parsed at the end) and future events.
        return None

    @staticmethod
    def _delta(block: dict[str, Any] | None, delta: dict[str, Any]) -> TextDelta | None:
        if block is None:
            return None
        match delta.get("type"):
            case "text_delta":
                text = str(delta.get("text", ""))
                block["texts"].append(text)
                return TextDelta(text) if text else None
            case "thinking_delta":
                text = str(delta.get("thinking", ""))
                block["texts"].append(text)
                return TextDelta(text, kind="thinking") if text else None
            case "signature_delta":
                block["signature"] = str(delta.get("signature", ""))
            case "input_json_delta":
                block["json"].append(str(delta.get("partial_json", "")))
        return None

    def _usage(self) -> Usage:
        return Usage(
            input_tokens=int(self.usage.get("input_tokens") or 0),
            output_tokens=int(self.usage.get("output_tokens") or 0),
            cache_read_tokens=int(self.usage.get("cache_read_input_tokens") or 0),
            cache_write_tokens=int(self.usage.get("cache_creation_input_tokens") or 0),
        )

    def result(self) -> ModelResponse:
        """The assembled response.

        Raises:
            ProviderUnreachable: the stream ended before ``message_stop`` (retryable).
        """
        if not self.stopped:
            raise ProviderUnreachable("anthropic: the stream ended before message_stop")
        content: list[Block] = []
        for _, block in sorted(self.blocks.items()):
            match block.get("type"):
                case "text":
                    content.append(TextBlock("".join(block["texts"])))
                case "thinking":
                    content.append(
                        ThinkingBlock("".join(block["texts"]), str(block.get("signature", "")))
                    )
                case "redacted_thinking":
                    content.append(RedactedThinkingBlock(block.get("data", "")))
                case "tool_use":
                    content.append(_tool_call(block))
                case _:
                    pass  # server tools and future block kinds are not part of our model.
        ids = {"message_id": self.message.get("id"), "request_id": self.request_id}
        return ModelResponse(
            content=content,
            stop_reason=self.stop_reason or "",
            usage=self._usage(),
            model=str(self.message.get("model", "")),
            provider_ids={k: str(v) for k, v in ids.items() if v},
        )


# --- the provider -------------------------------------------------------------------------


class AnthropicProvider(StreamingHTTPProvider):
    """Streams Anthropic Messages API answers (``POST {base_url}/v1/messages``).

    Args:
        model: the Anthropic model id (used when ``ModelRequest.model`` is empty).
        api_key: sent as ``x-api-key``; never logged, never in a message or ``repr``.
        base_url: API root without ``/v1`` (``ANTHROPIC_BASE_URL``).
        http_client: a shared client; when given, ``aclose`` leaves it open.
        timeout: per-phase deadlines; ``read`` is the idle-stream timeout.
        retry_policy: the retry policy (``retry.RetryPolicy``).
        on_retry: told about each retry before its wait (see ``retry.RetryNotice``).
    """

    name = "anthropic"

    def __init__(self, model: str, api_key: str, *, base_url: str = DEFAULT_BASE_URL, **kwargs: Any):
        super().__init__(model, api_key, base_url=base_url, **kwargs)

    def _url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _body(self, request: ModelRequest) -> bytes:
        return _encoder.encode(build_request_body(request, request.model or self.model))

    async def _stream_once(self, body: bytes, on_delta: OnDelta) -> ModelResponse:
        headers = {
            "x-api-key": self._api_key,
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
        }
        async with post_sse(
            self._client, self.name, self.url, headers=headers, body=body, timeout=self.timeout,
            on_headers=self._saw_headers,
        ) as stream:
            assembler = _Assembler(stream.response.headers.get("request-id"))
            async with aclosing(aiter(stream)) as events:
                async for event in events:
                    delta = assembler.feed(event)
                    if delta is not None:  # text, thinking, or the usage so far (message_start)
                        await on_delta(delta)
                    if assembler.stopped:
                        await self._end_of_answer(events)  # the connection goes back to the pool
                        break
        return assembler.result()
