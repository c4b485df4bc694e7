"""An answer cut off while it streamed (Esc, Ctrl-C, the wall-time limit, or a model call
that failed mid-stream once its retries ran out): what the agent keeps of it and what it
counts (issue 18).

The loop records such an answer as a ``model_response`` marked ``interrupted``: its text as
streamed (thinking is dropped: it has no signature yet; so is a half-made tool call), and
its usage: what the stream reported (Anthropic's ``message_start`` carries the input
tokens; OpenAI's streams report usage only at their end) with the output tokens estimated
from the characters streamed, 4 a token (``usage_estimated``). Where the stream reported no
input (an OpenAI answer cut off before its end), the input is the context meter's estimate
of the request (``Agent.context_use``, agents/context.py: the last reported count plus what
changed since), all as uncached input (``with_input``, ``input_estimated``): the provider
read the request whether or not it finished the answer.

The text goes back into the model's context on the next turn, followed by a note that it
was cut off (``CUT_OFF_NOTES``; the history fold adds it), as Claude Code does: the model
then knows what it had said and that the person stopped it, and a request never ends
with an assistant message (which Anthropic would take as a prefill to continue).
"""

from __future__ import annotations

import math

import msgspec

from .context import prompt_tokens
from .core.conversation import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:  # the history fold imports the notes: it needs no provider
    from .providers.base import TextDelta

CHARS_PER_TOKEN = 4

# What the model is told after the text of an answer cut off (``interrupted`` -> note).
CUT_OFF_NOTES = {
    "person": "[the person interrupted this answer here]",
    "max_wall": "[this answer was cut off here: the wall-time limit (--max-wall) passed]",
    "error": "[this answer broke off here: the model call failed before it was complete]",
}


class Streamed:
    """What one model call has streamed so far."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._thinking_chars = 0
        self._usage: Usage | None = None
        self.started = False  # the stream reported anything (usage or text)

    def take(self, delta: TextDelta) -> bool:
        """Note ``delta``; whether it goes on to the clients (text and thinking do)."""
        self.started = True
        if delta.kind == "usage":
            self._usage = delta.usage
            return False
        if delta.kind == "restart":  # a retried attempt: what the failed one streamed is dropped
            self.__init__()  # type: ignore[misc]
            return False
        if delta.kind == "text":
            self._text.append(delta.text)
        else:
            self._thinking_chars += len(delta.text)
        return True

    @property
    def text(self) -> str:
        """The answer's text streamed so far."""
        return "".join(self._text)

    def usage(self) -> tuple[Usage, bool]:
        """The usage so far: the reported one, its output tokens at least the estimate of
        what streamed; and whether the output tokens are that estimate."""
        reported = self._usage or Usage()
        chars = sum(map(len, self._text)) + self._thinking_chars
        estimate = math.ceil(chars / CHARS_PER_TOKEN)
        if estimate <= reported.output_tokens:
            return reported, False
        return msgspec.structs.replace(reported, output_tokens=estimate), True


def with_input(usage: Usage, request_tokens: int) -> tuple[Usage, bool]:
    """``usage`` with ``request_tokens`` (the estimate of the request) as its input when the
    stream reported none; and whether it did that."""
    if prompt_tokens(usage) > 0 or request_tokens <= 0:
        return usage, False
    return msgspec.structs.replace(usage, input_tokens=request_tokens), True
