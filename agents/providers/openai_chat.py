"""OpenAI-compatible Chat Completions adapter (``openai-compat/MODEL``).

For local and self-hosted servers that speak ``POST {base_url}/chat/completions``: vLLM,
llama.cpp's ``llama-server``, Ollama (``/v1``), LM Studio. Tool results travel as
``role: "tool"`` messages right after the assistant message whose ``tool_calls`` they
answer. The stream is folded as openai-python does: ``tool_calls`` fragments are grouped
by their ``index`` (never by arrival order or list position, since fragments of several
calls may interleave), ``id``/``name`` come in a call's first fragment, ``arguments``
fragments concatenate. ``stream_options.include_usage`` asks for the usage chunk
(``choices: []``) that comes after the ``finish_reason`` chunk, so reading continues to
``data: [DONE]``.

Sources:
    https://platform.openai.com/docs/api-reference/chat/create (``stream_options``),
    https://platform.openai.com/docs/api-reference/chat-streaming (the chunk object),
    https://platform.openai.com/docs/guides/function-calling (streamed tool calls).

Usage is normalised to musec's convention: ``input_tokens`` is the uncached part of
``prompt_tokens`` and ``cache_read_tokens`` is ``prompt_tokens_details.cached_tokens``.
"""

from __future__ import annotations

import math
from contextlib import aclosing
from typing import Any

import anyio
import msgspec
from musec.agents.core.conversation import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from musec.agents.core.errors import ProviderUnreachable

from .arguments import parse_arguments
from .base import OnDelta, TextDelta
from .http import StreamingHTTPProvider
from .openai_responses import stream_error
from .sse import DONE, SSEEvent, post_sse

__all__ = ["OpenAIChatProvider", "build_request_body"]

_encoder = msgspec.json.Encoder()
#: Seconds the rest of a stream (the usage chunk, ``[DONE]``) is awaited after its
#: ``finish_reason``: a local server that sends neither and keeps the connection open
#: would otherwise hold a whole answer until the idle-stream timeout.
TAIL_S = 1.0


# --- request conversion -------------------------------------------------------------------


def _assistant_message(blocks: list[Block]) -> dict[str, Any]:
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {
                "name": b.name,
                "arguments": b.raw_input
                if b.raw_input is not None
                else _encoder.encode(b.input).decode(),
            },
        }
        for b in blocks
        if isinstance(b, ToolCallBlock)
    ]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


def messages_to_api(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """The neutral history as Chat Completions messages.

    The system prompt comes first; in a user message the tool results come first, as
    ``tool`` messages (the API wants them right after the assistant's ``tool_calls``),
    then its text as one ``user`` message. Reasoning and thinking blocks are left out.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant_message(message.content))
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                out.append(
                    {"role": "tool", "tool_call_id": block.call_id, "content": block.content}
                )
        # Separate blocks (a person's message, each file it attached, an agent's note) are
        # separate paragraphs of the one user message Chat Completions takes.
        text = "\n\n".join(b.text for b in message.content if isinstance(b, TextBlock) and b.text)
        if text:
            out.append({"role": "user", "content": text})
    return out


def build_request_body(request: ModelRequest, model: str) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /chat/completions`` for ``request``.

    ``max_tokens`` (not ``max_completion_tokens``) because every compatible server
    takes it.
    """
    body: dict[str, Any] = {"model": model}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
    body["messages"] = messages_to_api(request.system, request.messages)
    body["max_tokens"] = request.max_output_tokens
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return body


# --- stream assembly ----------------------------------------------------------------------


class _Call:
    __slots__ = ("args", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []


class _Assembler:
    """Folds the chunks of choice 0 into a ``ModelResponse``."""

    def __init__(self, provider: str, request_id: str | None):
        self.provider = provider
        self.request_id = request_id
        self.completion_id = ""
        self.model = ""
        self.texts: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False

    def feed(self, event: SSEEvent) -> list[TextDelta]:
        """Apply one chunk; return the text pieces it streams.

        Raises:
            ProviderError: for a chunk carrying an ``error`` object (mapped like the
                Responses stream errors).
        """
        if event.event == DONE:
            self.done = True
            return []
        chunk = event.data
        if isinstance(chunk.get("error"), dict):
            raise stream_error(self.provider, chunk["error"], self.request_id)
        self.completion_id = str(chunk.get("id") or self.completion_id)
        self.model = str(chunk.get("model") or self.model)
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        out: list[TextDelta] = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is never requested
            delta = choice.get("delta") or {}
            for key, kind in (("reasoning_content", "thinking"), ("reasoning", "thinking")):
                piece = delta.get(key)
                if isinstance(piece, str) and piece:
                    out.append(TextDelta(piece, kind=kind))
            for key in ("content", "refusal"):
                piece = delta.get(key)
                if isinstance(piece, str) and piece:
                    self.texts.append(piece)
                    out.append(TextDelta(piece))
            for fragment in delta.get("tool_calls") or []:
                self._tool_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            index = len(self.calls)  # servers that leave out index send whole calls
        call = self.calls.setdefault(index, _Call())
        call.id = call.id or str(fragment.get("id") or "")
        function = fragment.get("function") or {}
        call.name = call.name or str(function.get("name") or "")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.args.append(arguments)
        elif isinstance(arguments, dict):  # a few servers send parsed arguments
            call.args.append(_encoder.encode(arguments).decode())

    def result(self) -> ModelResponse:
        """The assembled response.

        Raises:
            ProviderUnreachable: the stream ended before a ``finish_reason`` (retryable;
                no partial answer is returned).
        """
        if self.finish_reason is None:
            raise ProviderUnreachable(f"{self.provider}: the stream ended before finish_reason")
        content: list[Block] = []
        text = "".join(self.texts)
        if text:
            content.append(TextBlock(text))
        for number, (_, call) in enumerate(sorted(self.calls.items())):
            raw = "".join(call.args)
            parsed, problem = parse_arguments(raw)
            content.append(
                ToolCallBlock(
                    id=call.id or f"call_{self.completion_id or 'local'}_{number}",
                    name=call.name,
                    input=parsed,
                    input_error=problem,
                    raw_input=raw,
                )
            )
        usage = self.usage or {}
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        ids = {"completion_id": self.completion_id, "request_id": self.request_id}
        return ModelResponse(
            content=content,
            stop_reason=self.finish_reason,
            usage=Usage(
                input_tokens=max(int(usage.get("prompt_tokens") or 0) - cached, 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
                cache_read_tokens=cached,
            ),
            model=self.model,
            provider_ids={k: str(v) for k, v in ids.items() if v},
        )


# --- the provider -------------------------------------------------------------------------


class OpenAIChatProvider(StreamingHTTPProvider):
    """Streams Chat Completions answers (``POST {base_url}/chat/completions``).

    Args:
        model: the server's model name (used when ``ModelRequest.model`` is empty).
        base_url: API root including ``/v1`` (``OPENAI_BASE_URL`` or a catalog
            ``base_url``), e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as ``Authorization: Bearer`` when not empty (local servers often
            need none); never logged.
        http_client, timeout, retry_policy, on_retry: as for the other providers.
    """

    name = "openai-compat"

    def __init__(self, model: str, *, base_url: str, api_key: str = "", **kwargs: Any):
        super().__init__(model, api_key, base_url=base_url, **kwargs)

    def _url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _body(self, request: ModelRequest) -> bytes:
        return _encoder.encode(build_request_body(request, request.model or self.model))

    async def _stream_once(self, body: bytes, on_delta: OnDelta) -> ModelResponse:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        assembler = _Assembler(self.name, None)
        try:
            async with post_sse(
                self._client, self.name, self.url, headers=headers, body=body, timeout=self.timeout,
                on_headers=self._saw_headers,
            ) as stream:
                assembler.request_id = stream.response.headers.get("x-request-id")
                async with aclosing(aiter(stream)) as events:
                    with anyio.CancelScope() as tail:
                        async for event in events:
                            for delta in assembler.feed(event):
                                await on_delta(delta)
                            if assembler.done:
                                await self._end_of_answer(events)  # the connection goes back to the pool
                                break
                            if assembler.finish_reason is not None and tail.deadline == math.inf:
                                # a usage chunk and [DONE] follow at once, or never (a local server)
                                tail.deadline = anyio.current_time() + TAIL_S
        except ProviderUnreachable:
            if assembler.finish_reason is None:
                raise  # the connection dropped after the answer's end, without [DONE]: it is whole
        return assembler.result()
