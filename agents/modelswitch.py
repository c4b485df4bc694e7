"""Switching an agent's model mid-session (issue 12 part 7): the history, converted.

``musec run --resume ID --model M`` and the interactive ``/model M`` record a
``model_switched`` event; the history fold (``History.apply``) then converts what was said
before with ``convert_history``, so the live run and replay make the same requests.

What changes: signed thinking (Anthropic ``thinking``/``redacted_thinking``) and encrypted
reasoning (OpenAI Responses ``reasoning`` items) are dropped whole. Their signatures and
encrypted content are issued for the model that wrote them: another provider cannot take
them at all, and another model of the same provider may refuse a request that carries them;
dropping a block whole never leaves half of one. Text, tool calls and tool results stay,
and every tool call keeps its id, so each result still answers its call. An assistant
message left with nothing is removed, and the user messages around it become one (roles
keep alternating).
"""

from __future__ import annotations

from .core.conversation import Message, ReasoningBlock, RedactedThinkingBlock, ThinkingBlock

__all__ = ["OPAQUE_BLOCKS", "convert_history"]

#: The block kinds a model switch drops.
OPAQUE_BLOCKS = (ThinkingBlock, RedactedThinkingBlock, ReasoningBlock)


def convert_history(messages: list[Message]) -> tuple[list[Message], int]:
    """The history for a new model, and how many blocks were dropped.

    Args:
        messages: the history, roles alternating, starting with ``user``.

    Returns:
        A new list (the input is not changed; messages without opaque blocks are the same
        objects) and the number of blocks dropped.
    """
    out: list[Message] = []
    dropped = 0
    for message in messages:
        kept = [b for b in message.content if not isinstance(b, OPAQUE_BLOCKS)]
        dropped += len(message.content) - len(kept)
        if not kept and message.role == "assistant":
            continue
        if len(kept) != len(message.content):
            message = Message(message.role, kept)
        if out and out[-1].role == message.role:  # an assistant message between them was removed
            out[-1] = Message(message.role, [*out[-1].content, *message.content])
        else:
            out.append(message)
    return out, dropped
