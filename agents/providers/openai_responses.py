"""OpenAI Responses API adapter (``openai/MODEL``), also served by Azure OpenAI (``azure/DEPLOYMENT``).

Requests are stateless: ``store: false`` with ``include: ["reasoning.encrypted_content"]``,
so the server keeps nothing and each request carries the whole history. Reasoning items
come back with ``encrypted_content`` and are sent back verbatim on the next turn, taken
from ``response.output_item.done`` (the ``output_item.added`` copy may be incomplete).
``function_call`` items are sent back with their ``id`` and byte-exact ``arguments``,
each followed by the ``function_call_output`` with the same ``call_id``.
``prompt_cache_key`` is the session id, so one session's requests share a cache shard.

Sources:
    Responses API and streaming events:
    https://platform.openai.com/docs/api-reference/responses/create and
    https://platform.openai.com/docs/api-reference/responses-streaming.
    Reasoning items under ``store: false``:
    https://platform.openai.com/docs/guides/reasoning and
    https://platform.openai.com/docs/guides/conversation-state.
    Prompt caching (``prompt_cache_key``): https://platform.openai.com/docs/guides/prompt-caching.
    Azure OpenAI Responses (``POST {endpoint}/openai/responses?api-version=...``, the
    deployment named in ``model``, key in ``api-key``):
    https://learn.microsoft.com/azure/ai-foundry/openai/how-to/responses.
    The ``error`` event has two shapes: flat ``{type, code, message, param}`` (API
    reference) and nested ``{type, error: {type, code, message, param}}`` (captured);
    both are accepted.

Usage is normalised to musec's convention (``conversation.Usage``, as Anthropic reports
it): ``input_tokens`` counts only uncached input, ``cache_read_tokens`` the cached part.
OpenAI's ``input_tokens`` includes ``input_tokens_details.cached_tokens``, so the cached
part is subtracted.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import aclosing
from typing import Any
from urllib.parse import quote

import msgspec
from musec.agents.core.conversation import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningBlock,
    TextBlock,
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

from .arguments import parse_arguments
from .base import OnDelta, TextDelta
from .http import StreamingHTTPProvider
from .overflow import overflow_error
from .quota import quota_error
from .sse import SSEEvent, post_sse

__all__ = [
    "AZURE_API_VERSION",
    "DEFAULT_BASE_URL",
    "INCLUDE",
    "AzureResponsesProvider",
    "OpenAIResponsesProvider",
    "build_request_body",
    "stream_error",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Azure OpenAI api-version used when ``AZURE_OPENAI_API_VERSION`` is not passed.
AZURE_API_VERSION = "2025-04-01-preview"
INCLUDE = ["reasoning.encrypted_content"]

_encoder = msgspec.json.Encoder()
_RETRYABLE_CODES = frozenset(
    {
        "server_error",
        "rate_limit_exceeded",
        "server_is_overloaded",
        "slow_down",
        "overloaded",
        "overloaded_error",
        "api_error",
        "internal_error",
        "timeout",
    }
)
_AUTH_CODES = frozenset({"invalid_api_key", "authentication_error", "permission_error"})


# --- request conversion -------------------------------------------------------------------


def _function_call_item(call: ToolCallBlock) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call"}
    if call.provider_item_id:
        item["id"] = call.provider_item_id
    item["status"] = "completed"
    item["arguments"] = (
        call.raw_input if call.raw_input is not None else _encoder.encode(call.input).decode()
    )
    item["call_id"] = call.id
    item["name"] = call.name
    return item


def _text_message(role: str, texts: list[str]) -> dict[str, Any]:
    part = "input_text" if role == "user" else "output_text"
    return {
        "type": "message",
        "role": role,
        "content": [{"type": part, "text": t} for t in texts],
    }


def messages_to_input(messages: list[Message]) -> list[dict[str, Any]]:
    """The neutral history as Responses ``input`` items, in order.

    Consecutive text blocks form one message item; a tool call becomes a
    ``function_call`` item and a tool result a ``function_call_output`` with the same
    ``call_id``; a ``ReasoningBlock`` is its raw item, verbatim. Anthropic thinking
    blocks mean nothing to OpenAI and are left out.
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        texts: list[str] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                if block.text:
                    texts.append(block.text)
                continue
            if texts:
                items.append(_text_message(message.role, texts))
                texts = []
            match block:
                case ReasoningBlock(item=item):
                    items.append(dict(item))
                case ToolCallBlock():
                    items.append(_function_call_item(block))
                case ToolResultBlock(call_id=call_id, content=content):
                    items.append(
                        {"type": "function_call_output", "call_id": call_id, "output": content}
                    )
                case _:
                    pass  # ThinkingBlock, RedactedThinkingBlock: Anthropic only.
        if texts:
            items.append(_text_message(message.role, texts))
    return items


def build_request_body(
    request: ModelRequest, model: str, *, reasoning: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /responses`` for ``request``.

    Stable parts first (tools, instructions), then the append-only input, so every
    request repeats the previous one's prefix.
    """
    body: dict[str, Any] = {"model": model}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
                "strict": False,
            }
            for t in request.tools
        ]
    if request.system:
        body["instructions"] = request.system
    body["input"] = messages_to_input(request.messages)
    body["max_output_tokens"] = request.max_output_tokens
    if reasoning:
        body["reasoning"] = dict(reasoning)
    body["store"] = False
    body["include"] = list(INCLUDE)
    if request.session_id:
        body["prompt_cache_key"] = request.session_id
    body["stream"] = True
    return body


# --- errors -------------------------------------------------------------------------------


def stream_error(
    provider: str, error: Mapping[str, Any] | None, request_id: str | None
) -> ProviderError:
    """Map an error carried by the stream (``error`` event or ``response.failed``).

    ``error`` is the flat event, the nested event's ``error`` object, or the failed
    response's ``error``. Server errors and rate limits are retryable
    (``ProviderOverloaded``); an exhausted quota is ``QuotaExhausted``.
    """
    error = error or {}
    code = str(error.get("code") or error.get("type") or "error")
    message = f"{provider} stream error {code}: {str(error.get('message') or '')[:500]}"
    if request_id:
        message += f" (request-id {request_id})"
    quota = quota_error(provider, None, {}, error, request_id=request_id)
    if quota is not None:
        return quota
    overflow = overflow_error(provider, None, error, request_id=request_id)
    if overflow is not None:
        return overflow
    if code in _RETRYABLE_CODES:
        return ProviderOverloaded(message)
    if code in _AUTH_CODES:
        return ProviderAuthError(message)
    if code.startswith("invalid_") or code in ("context_length_exceeded", "not_found"):
        return ProviderBadRequest(message)
    return ProviderError(message)


def _event_error(data: dict[str, Any]) -> Mapping[str, Any]:
    nested = data.get("error")
    return nested if isinstance(nested, dict) else data


# --- stream assembly ----------------------------------------------------------------------


class _Item:
    __slots__ = ("args", "done", "item", "texts")

    def __init__(self, item: dict[str, Any]):
        self.item = item
        self.done = False
        self.texts: list[str] = []
        self.args: list[str] = []


def _message_text(item: dict[str, Any]) -> str:
    parts = item.get("content") or []
    return "".join(
        str(p.get("text") or p.get("refusal") or "")
        for p in parts
        if isinstance(p, dict) and p.get("type") in ("output_text", "refusal")
    )


def _summary_text(item: dict[str, Any]) -> str:
    return "\n\n".join(
        str(s.get("text", "")) for s in item.get("summary") or [] if isinstance(s, dict)
    )


class _Assembler:
    """Folds one response's stream events into a ``ModelResponse``."""

    def __init__(self, provider: str, request_id: str | None):
        self.provider = provider
        self.request_id = request_id
        self.response: dict[str, Any] = {}
        self.items: dict[int, _Item] = {}
        self.finished = False

    def _at(self, data: dict[str, Any]) -> _Item | None:
        index = data.get("output_index")
        return self.items.get(index) if isinstance(index, int) else None

    def feed(self, event: SSEEvent) -> TextDelta | None:
        """Apply one event; return the text it streams, if any.

        Raises:
            ProviderError: for an ``error`` event or ``response.failed``.
        """
        data = event.data
        match data.get("type", event.event):
            case "response.created" | "response.in_progress":
                self.response = data.get("response") or self.response
            case "response.output_item.added":
                item = data.get("item")
                if isinstance(item, dict) and isinstance(data.get("output_index"), int):
                    self.items[data["output_index"]] = _Item(dict(item))
            case "response.output_item.done":
                item = data.get("item")
                if isinstance(item, dict) and isinstance(data.get("output_index"), int):
                    state = self.items.setdefault(data["output_index"], _Item(item))
                    state.item = item  # the complete item: replaces what ``added`` said
                    state.done = True
            case "response.output_text.delta" | "response.refusal.delta":
                return self._text(data, "text")
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                return self._text(data, "thinking")
            case "response.function_call_arguments.delta":
                state = self._at(data)
                if state is not None:
                    state.args.append(str(data.get("delta", "")))
            case "response.completed" | "response.incomplete":
                self.response = data.get("response") or self.response
                self.finished = True
            case "response.failed":
                response = data.get("response") or {}
                raise stream_error(self.provider, response.get("error"), self.request_id)
            case "error":
                raise stream_error(self.provider, _event_error(data), self.request_id)
            case _:
                pass  # content_part.*, *.done, future events: the item.done carries all.
        return None

    def _text(self, data: dict[str, Any], kind: str) -> TextDelta | None:
        text = str(data.get("delta", ""))
        state = self._at(data)
        if state is not None and kind == "text":
            state.texts.append(text)
        return TextDelta(text, kind=kind) if text else None

    def _blocks(self) -> list[Block]:
        states = [self.items[i] for i in sorted(self.items)]
        if not states:  # a server that only sends the final response
            states = [_Item(o) for o in self.response.get("output") or [] if isinstance(o, dict)]
            for state in states:
                state.done = True
        content: list[Block] = []
        for state in states:
            item = state.item
            match item.get("type"):
                case "message":
                    text = _message_text(item) if state.done else "".join(state.texts)
                    if text:
                        content.append(TextBlock(text))
                case "reasoning":
                    if state.done:  # an unfinished item's encrypted_content is not replayable
                        content.append(ReasoningBlock(item=item, summary=_summary_text(item)))
                case "function_call":
                    raw = str(item.get("arguments") or "") if state.done else "".join(state.args)
                    parsed, problem = parse_arguments(raw)
                    content.append(
                        ToolCallBlock(
                            id=str(item.get("call_id", "")),
                            name=str(item.get("name", "")),
                            input=parsed,
                            input_error=problem,
                            provider_item_id=item.get("id"),
                            raw_input=raw,
                        )
                    )
                case _:
                    pass  # hosted tools and future item kinds are not part of our model.
        return content

    def result(self) -> ModelResponse:
        """The assembled response.

        Raises:
            ProviderUnreachable: the stream ended before ``response.completed`` or
                ``response.incomplete`` (retryable; no partial answer is returned).
        """
        if not self.finished:
            raise ProviderUnreachable(
                f"{self.provider}: the stream ended before response.completed"
            )
        usage = self.response.get("usage") or {}
        cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
        status = str(self.response.get("status") or "completed")
        incomplete = self.response.get("incomplete_details") or {}
        ids = {"response_id": self.response.get("id"), "request_id": self.request_id}
        return ModelResponse(
            content=self._blocks(),
            stop_reason=str(incomplete.get("reason") or status),
            usage=Usage(
                input_tokens=max(int(usage.get("input_tokens") or 0) - cached, 0),
                output_tokens=int(usage.get("output_tokens") or 0),
                cache_read_tokens=cached,
            ),
            model=str(self.response.get("model", "")),
            provider_ids={k: str(v) for k, v in ids.items() if v},
        )


# --- the providers ------------------------------------------------------------------------


class OpenAIResponsesProvider(StreamingHTTPProvider):
    """Streams OpenAI Responses API answers (``POST {base_url}/responses``).

    Args:
        model: the model id (used when ``ModelRequest.model`` is empty).
        api_key: sent as ``Authorization: Bearer``; never logged, never in a message.
        base_url: API root including ``/v1`` (``OPENAI_BASE_URL``).
        http_client: a shared client; when given, ``aclose`` leaves it open.
        timeout: per-phase deadlines; ``read`` is the idle-stream timeout.
        retry_policy: the retry policy (``retry.RetryPolicy``).
        on_retry: told about each retry before its wait.
        reasoning: the request's ``reasoning`` object (e.g. ``{"summary": "auto"}``) for
            reasoning models; left out when ``None``.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        api_key: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        reasoning: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ):
        self.reasoning = dict(reasoning) if reasoning else None
        super().__init__(model, api_key, base_url=base_url, **kwargs)

    def _url(self) -> str:
        return f"{self.base_url}/responses"

    def _auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"}

    def _body(self, request: ModelRequest) -> bytes:
        model = request.model or self.model
        return _encoder.encode(build_request_body(request, model, reasoning=self.reasoning))

    async def _stream_once(self, body: bytes, on_delta: OnDelta) -> ModelResponse:
        headers = {
            **self._auth_headers(),
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        async with post_sse(
            self._client, self.name, self.url, headers=headers, body=body, timeout=self.timeout,
            on_headers=self._saw_headers,
        ) as stream:
            response_headers = stream.response.headers
            request_id = response_headers.get("x-request-id") or response_headers.get(
                "apim-request-id"
            )
            assembler = _Assembler(self.name, request_id)
            async with aclosing(aiter(stream)) as events:
                async for event in events:
                    delta = assembler.feed(event)
                    if delta is not None:
                        await on_delta(delta)
                    if assembler.finished:
                        await self._end_of_answer(events)  # the connection goes back to the pool
                        break
        return assembler.result()


class AzureResponsesProvider(OpenAIResponsesProvider):
    """The Responses API on Azure OpenAI (``azure/DEPLOYMENT``).

    ``POST {endpoint}/openai/responses?api-version=VERSION`` with the deployment name as
    ``model`` and the key in ``api-key``. An endpoint that already ends in
    ``/openai/v1`` (Azure's v1 surface) is used as the API root:
    ``{endpoint}/responses``, with ``api-version`` only when one is given.

    Args:
        deployment: the Azure deployment name.
        api_key: ``AZURE_OPENAI_API_KEY``; sent as ``api-key``.
        endpoint: ``AZURE_OPENAI_ENDPOINT`` (``https://RESOURCE.openai.azure.com``).
        api_version: the ``api-version`` query parameter.
        Other arguments as for ``OpenAIResponsesProvider``.
    """

    name = "azure"

    def __init__(
        self,
        deployment: str,
        api_key: str,
        *,
        endpoint: str,
        api_version: str | None = None,
        **kwargs: Any,
    ):
        self.api_version = api_version
        super().__init__(deployment, api_key, base_url=endpoint, **kwargs)

    def _url(self) -> str:
        if self.base_url.endswith("/openai/v1"):
            url = f"{self.base_url}/responses"
            return f"{url}?api-version={quote(self.api_version)}" if self.api_version else url
        version = quote(self.api_version or AZURE_API_VERSION)
        return f"{self.base_url}/openai/responses?api-version={version}"

    def _auth_headers(self) -> dict[str, str]:
        return {"api-key": self._api_key}
