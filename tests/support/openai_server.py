"""A real local HTTP server that plays the OpenAI APIs (Responses, Chat Completions, Azure).

It is ``AnthropicServer`` (same queue, recording and answers: ``replay``,
``replay_chunks``, ``raw``, ``Answer``) answering OpenAI's paths with an
``x-request-id`` header. Usage::

    from tests.support.openai_server import OpenAIServer, responses_stream, chat_stream

    with OpenAIServer() as server:
        server.enqueue(responses_stream([{"type": "message", "text": "hi"}]))
        credentials = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.base_url}
        ...
        server.requests[0].body["input"]

The API:

* ``OpenAIServer()``: answers ``/v1/responses``, ``/v1/chat/completions`` and Azure's
  ``/openai/responses`` and ``/openai/v1/responses`` (query strings ignored; recorded in
  ``RecordedRequest.path``). ``base_url`` ends in ``/v1``; ``endpoint`` is the bare
  root (for ``AZURE_OPENAI_ENDPOINT``).
* ``responses_stream(items, *, error=None, flat_error=False, incomplete=None, ...)``: a
  Responses stream in the recorded format. ``items`` are ``{"type": "message",
  "text"}``, ``{"type": "function_call", "call_id", "name", "arguments"}`` (a string,
  sent in fragments) and ``{"type": "reasoning", "encrypted_content", "summary"}``.
  With ``error="server_error"`` (any code) the stream stops after the items' deltas
  with an ``error`` event (nested form, or flat with ``flat_error``) and
  ``response.failed``, as in ``openai_responses/failed.sse``.
* ``chat_stream(text=None, tool_calls=(), *, finish_reason=None, usage=True,
  error=None, done=True, ...)``: a Chat Completions stream; ``tool_calls`` are
  ``{"id", "name", "arguments"}`` whose argument fragments are interleaved by index.
* ``openai_error(status, code, message, *, type_=None, headers=None)``: an OpenAI
  JSON error answer.
* ``OpenAIServer(window_tokens=...)`` and the other options of ``AnthropicServer``; over
  the window it answers 400 ``context_length_exceeded`` (or, ``overflow_in_stream``, a
  stream ending in ``response.failed`` with that code).
* ``check_responses_pairing(requests)`` / ``check_chat_pairing(requests)``: every
  function call in a request's history is answered by an output with its call id, and
  no output answers nothing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any

from tests.support.anthropic_server import (
    FIXTURES,
    Answer,
    AnthropicServer,
    End,
    RecordedRequest,
    raw,
    replay,
    replay_chunks,
)

__all__ = [
    "FIXTURES",
    "Answer",
    "OpenAIServer",
    "chat_stream",
    "check_chat_pairing",
    "check_responses_pairing",
    "openai_error",
    "raw",
    "replay",
    "replay_chunks",
    "responses_stream",
]

_ids = itertools.count(1)


class OpenAIServer(AnthropicServer):
    """The server; see the module docstring. Use it as a context manager."""

    routes = ("/v1/responses", "/v1/chat/completions", "/openai/responses", "/openai/v1/responses")
    request_id_header = "x-request-id"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.endpoint = self.base_url
        self.base_url = f"{self.endpoint}/v1"

    def overflow_answer(self, tokens: int) -> Answer:
        """OpenAI's answer to a request over ``window_tokens``: ``context_length_exceeded``."""
        text = "Your input exceeds the context window of this model. Please adjust your input and try again."
        if self.overflow_in_stream:
            return responses_stream([], error="context_length_exceeded", error_message=text)
        return openai_error(400, "context_length_exceeded", text, type_="invalid_request_error")


def openai_error(
    status: int,
    code: str | None,
    message: str,
    *,
    type_: str | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """An OpenAI-shaped JSON error answer (``{"error": {message, type, param, code}}``)."""
    error = {"message": message, "type": type_ or code, "param": None, "code": code}
    body = json.dumps({"error": error})
    lines = [f"HTTP/1.1 {status} Error", "content-type: application/json"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines.append(f"content-length: {len(body.encode())}")
    return Answer(raw=("\r\n".join(lines) + "\r\n\r\n" + body).encode())


def _pieces(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // max(parts, 1)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: dict[str, Any], *, named: bool = True) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {data['type']}\n" if named else ""
    return f"{head}data: {payload}\n\n".encode()


def _response(
    response_id: str, model: str, status: str, output: list, usage: Any, error: Any = None
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1758035000,
        "status": status,
        "error": error,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "store": False,
        "usage": usage,
    }


def responses_stream(
    items: Sequence[dict[str, Any]],
    *,
    error: str | None = None,
    flat_error: bool = False,
    incomplete: str | None = None,
    model: str = "gpt-test",
    input_tokens: int = 100,
    cached_tokens: int = 0,
    output_tokens: int = 7,
    fragments: int = 3,
    end: End = "finish",
    error_message: str | None = None,
) -> Answer:
    """A Responses API stream in the recorded format, one event per HTTP chunk
    (``error_message``: the message of the ``error``, default ``"CODE (local)"``)."""
    response_id = f"resp_local_{next(_ids):06d}"
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": _response(response_id, model, "in_progress", [], None),
        }
    ]
    output: list[dict[str, Any]] = []
    for index, spec in enumerate(items):
        kind = spec["type"]
        prefix = {"message": "msg", "function_call": "fc", "reasoning": "rs"}.get(kind, "item")
        item_id = f"{prefix}_local_{next(_ids):06d}"
        if kind == "message":
            added = {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            }
            deltas = [
                {
                    "type": "response.output_text.delta",
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                    "obfuscation": "x",
                }
                for piece in _pieces(spec["text"], 2)
            ]
            done = {
                **added,
                "status": "completed",
                "content": [
                    {"type": "output_text", "annotations": [], "logprobs": [], "text": spec["text"]}
                ],
            }
        elif kind == "function_call":
            added = {
                "id": item_id,
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": spec["call_id"],
                "name": spec["name"],
            }
            deltas = [
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item_id,
                    "output_index": index,
                    "delta": piece,
                    "obfuscation": "x",
                }
                for piece in _pieces(spec["arguments"], fragments)
            ]
            done = {**added, "status": "completed", "arguments": spec["arguments"]}
        elif kind == "reasoning":
            summary = spec.get("summary", "")
            added = {
                "id": item_id,
                "type": "reasoning",
                "encrypted_content": "gAAAA-stale",
                "summary": [],
            }
            deltas = [
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": 0,
                    "delta": piece,
                    "obfuscation": "x",
                }
                for piece in _pieces(summary, 2)
                if piece
            ]
            done = {
                "id": item_id,
                "type": "reasoning",
                "encrypted_content": spec["encrypted_content"],
                "summary": [{"type": "summary_text", "text": summary}] if summary else [],
            }
        else:
            raise ValueError(f"responses_stream(): unsupported item type {kind!r}")
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        events += deltas
        if error is None:
            events.append(
                {"type": "response.output_item.done", "output_index": index, "item": done}
            )
            output.append(done)
    if error is not None:
        detail = {"type": error, "code": error, "message": error_message or f"{error} (local)", "param": None}
        events.append(
            {"type": "error", **detail} if flat_error else {"type": "error", "error": detail}
        )
        failed = _response(
            response_id, model, "failed", [], None, {"code": error, "message": detail["message"]}
        )
        events.append({"type": "response.failed", "response": failed})
    else:
        usage = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        }
        status = "incomplete" if incomplete else "completed"
        final = _response(response_id, model, status, output, usage)
        if incomplete:
            final["incomplete_details"] = {"reason": incomplete}
        events.append({"type": f"response.{status}", "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return Answer(chunks=tuple(_sse(e) for e in events), end=end)


def chat_stream(
    text: str | None = None,
    tool_calls: Sequence[dict[str, Any]] = (),
    *,
    finish_reason: str | None = None,
    usage: bool = True,
    error: str | None = None,
    done: bool = True,
    model: str = "local-model",
    prompt_tokens: int = 50,
    cached_tokens: int = 0,
    completion_tokens: int = 9,
    fragments: int = 3,
    end: End = "finish",
) -> Answer:
    """A Chat Completions stream, one chunk per HTTP chunk, tool fragments interleaved."""
    completion_id = f"chatcmpl-local{next(_ids):06d}"

    def chunk(delta: dict[str, Any] | None, reason: str | None = None, **extra: Any) -> dict:
        choices = (
            []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]
        )
        out = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": 1758035200,
            "model": model,
            "choices": choices,
        }
        if usage:
            out["usage"] = None
        out.update(extra)
        return out

    chunks = [chunk({"role": "assistant", "content": "" if text is not None else None})]
    for piece in _pieces(text or "", 3) if text else []:
        chunks.append(chunk({"content": piece}))
    for index, call in enumerate(tool_calls):
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
    split = [_pieces(call["arguments"], fragments) for call in tool_calls]
    for step in range(max((len(s) for s in split), default=0)):
        for index in reversed(range(len(split))):  # later indices first: order must not matter
            if step < len(split[index]):
                chunks.append(
                    chunk(
                        {
                            "tool_calls": [
                                {"index": index, "function": {"arguments": split[index][step]}}
                            ]
                        }
                    )
                )
    if error is not None:
        chunks.append({"error": {"message": f"{error} (local)", "type": error, "code": error}})
    else:
        reason = finish_reason or ("tool_calls" if tool_calls else "stop")
        chunks.append(chunk({}, reason))
        if usage:
            chunks.append(
                chunk(
                    None,
                    usage={
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                        "prompt_tokens_details": {"cached_tokens": cached_tokens},
                    },
                )
            )
    body = [b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n" for c in chunks]
    if done and error is None:
        body.append(b"data: [DONE]\n\n")
    return Answer(chunks=tuple(body), end=end)


def check_responses_pairing(requests: Iterable[RecordedRequest]) -> None:
    """Assert each Responses request pairs every ``function_call`` with one output after it.

    Raises:
        AssertionError: naming the request and the call ids at fault.
    """
    for r, request in enumerate(requests):
        calls: list[str] = []
        for item in request.body["input"]:
            if item.get("type") == "function_call":
                calls.append(item["call_id"])
            elif item.get("type") == "function_call_output":
                assert item["call_id"] in calls, (
                    f"request {r}: output for {item['call_id']} answers no earlier call"
                )
                calls.remove(item["call_id"])
        assert not calls, f"request {r}: function calls {calls} are never answered"


def check_chat_pairing(requests: Iterable[RecordedRequest]) -> None:
    """Assert each Chat request answers every ``tool_calls`` id with ``tool`` messages right after.

    Raises:
        AssertionError: naming the request, message index and ids at fault.
    """
    for r, request in enumerate(requests):
        messages = request.body["messages"]
        for i, msg in enumerate(messages):
            if msg["role"] == "tool":
                continue
            ids = [c["id"] for c in msg.get("tool_calls") or []]
            answers = []
            for follower in messages[i + 1 :]:
                if follower["role"] != "tool":
                    break
                answers.append(follower["tool_call_id"])
            if msg["role"] == "assistant":
                assert sorted(answers) == sorted(ids), (
                    f"request {r}: message {i} calls {ids}, answered by {answers}"
                )
