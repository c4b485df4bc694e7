"""The provider-neutral conversation model.

Every provider adapter converts this model to its API's request and parses its API's
stream back into it; the agent loop, the event log and replay only ever see these types.
Blocks are frozen msgspec Structs in a tagged union (``tag_field="type"``), so a
``model_response`` event stores them as plain JSON and decodes back to the same values.

Sources: the block kinds follow the Anthropic Messages API content blocks
(text, tool_use, tool_result, thinking, redacted_thinking) and the OpenAI Responses API
items (reasoning with ``encrypted_content``, function_call, function_call_output).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import msgspec

__all__ = [
    "Block",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "ReasoningBlock",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "ToolSpec",
    "Usage",
    "request_digest",
]


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    """Plain text from the model or the person."""

    text: str


class ToolCallBlock(msgspec.Struct, frozen=True, tag="tool_call", tag_field="type"):
    """A tool call asked for by the model.

    ``id`` is the provider's id (``toolu_...``, ``call_...``) kept byte-exact; the tool
    result that answers it carries the same id. ``input`` is the parsed JSON object.
    ``input_error`` is set when the streamed arguments did not parse as a JSON object:
    such a call is never run, and the model is told why. ``raw_input`` is the argument
    text exactly as streamed, for APIs that take arguments as a string (OpenAI), so they
    get it back byte-exact; ``None`` when the API sent a parsed object.
    """

    id: str
    name: str
    input: dict[str, Any]
    input_error: str | None = None
    provider_item_id: str | None = None
    raw_input: str | None = None


class ToolResultBlock(msgspec.Struct, frozen=True, tag="tool_result", tag_field="type"):
    """The answer to one tool call (``call_id`` equals the call's ``id``)."""

    call_id: str
    content: str
    is_error: bool = False


class ThinkingBlock(msgspec.Struct, frozen=True, tag="thinking", tag_field="type"):
    """Anthropic extended thinking; ``signature`` is opaque and sent back verbatim."""

    thinking: str
    signature: str


class RedactedThinkingBlock(msgspec.Struct, frozen=True, tag="redacted_thinking", tag_field="type"):
    """Anthropic redacted thinking; ``data`` is opaque and sent back verbatim."""

    data: str


class ReasoningBlock(msgspec.Struct, frozen=True, tag="reasoning", tag_field="type"):
    """OpenAI Responses reasoning item; ``item`` is the raw item, sent back verbatim."""

    item: dict[str, Any]
    summary: str = ""


Block = TextBlock | ToolCallBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock | ReasoningBlock


class Message(msgspec.Struct, frozen=True):
    """One conversation message: ``role`` is ``user`` or ``assistant``.

    Tool results travel in ``user`` messages (as in the Anthropic API); adapters for APIs
    with a separate tool role split them out.
    """

    role: Literal["user", "assistant"]
    content: list[Block]


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool offered to the model: its name, description and JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(msgspec.Struct, frozen=True):
    """Everything a provider needs for one model call.

    Attributes:
        model: the provider's model id (without the ``provider/`` prefix).
        system: the system prompt.
        messages: the history, oldest first, roles alternating, starting with ``user``.
        tools: the tools offered.
        max_output_tokens: cap on the answer's length, in tokens.
        session_id: used as a cache key where the API has one.
    """

    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    max_output_tokens: int = 8192
    session_id: str = ""


class Usage(msgspec.Struct, frozen=True):
    """Token counts of one model call, as reported by the provider."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class ModelResponse(msgspec.Struct, frozen=True):
    """One complete model answer.

    ``stop_reason`` is the provider's own value (``end_turn``, ``tool_use``, ``max_tokens``,
    ``stop``...); ``provider_ids`` holds the message/response id and request id.
    """

    content: list[Block]
    stop_reason: str
    usage: Usage = Usage()
    model: str = ""
    provider_ids: dict[str, str] = {}

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        return [b for b in self.content if isinstance(b, ToolCallBlock)]

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


_encoder = msgspec.json.Encoder(order="deterministic")


def request_digest(request: ModelRequest) -> str:
    """SHA-256 (hex) of the request's deterministic JSON encoding.

    Kept in ``model_request`` events so replay can show that the next request it would
    send is byte-identical to the one the live run sent.
    """
    return hashlib.sha256(_encoder.encode(request)).hexdigest()
