"""Context accounting: how full an agent's context window is (issue 12 part 1).

The measure of the next request an agent would send is the provider's own count of the
last request it answered plus an estimate of what changed since:

    tokens = prompt_tokens(last) + output_tokens(last)
             + (chars(next request) - chars(last request) - chars(last answer)) / chars_per_token

``prompt_tokens`` is everything the provider read (musec's ``Usage``: uncached input +
cache reads + cache writes); the answer it wrote becomes history, so its ``output_tokens``
count too. The difference in characters covers tool results and messages appended since,
and goes negative when old tool results were cleared (``agents/budget.py``).
``chars_per_token`` is calibrated from the last reported call of the same provider
(``chars(last request) / prompt_tokens(last)``), so it follows the provider's tokenizer on
this conversation's own mix of code and prose; before any report it is a per-provider
default. Before the first answer (or for a provider that reports no usage, such as the
scripted model) the whole request is estimated.

No tokenizer library is used: Anthropic publishes none for its current models, and
OpenAI's (``tiktoken``) downloads its encoding files on first use, which an offline
daemon cannot do; the calibrated ratio is within a few percent on a long conversation.

The accounting is a fold: ``ContextMeter.on_request`` / ``on_response`` take the numbers
logged in ``model_request`` (``request_chars``) and ``model_response`` (``usage``), so a
resumed or replayed agent knows how full it is before its first request.

For compaction: ``Agent.context_use()`` (agents/loop.py) gives a ``ContextUse`` for the
request the agent would send now; ``over(use, fraction)`` says whether it passes a share
of the window (``False`` when the window is unknown); ``agent.history.context.tokens_of(m)``
estimates one message (where to cut). Old tool results are cleared (``agents/budget.py``,
at ``[context].clear_at``) before a request is built, so compaction sees the context after
that cheaper step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec

from .core.conversation import (
    Block,
    Message,
    ModelRequest,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
    Usage,
)

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "ContextMeter",
    "ContextUse",
    "block_chars",
    "message_chars",
    "over",
    "prompt_tokens",
    "request_chars",
]

#: Characters per token before a provider has reported a count (code and English prose
#: mixed; calibrated away after the first answer). Keyed by provider name.
DEFAULT_CHARS_PER_TOKEN: dict[str, float] = {
    "anthropic": 3.5,
    "openai": 4.0,
    "azure": 4.0,
    "openai-compat": 3.7,
    "scripted": 4.0,
}
_FALLBACK_CHARS_PER_TOKEN = 3.7
# A calibration outside these bounds is a provider reporting something else (a cached
# prefix counted elsewhere, a proxy's zeros): it is not used.
_CPT_BOUNDS = (1.0, 12.0)

_encode = msgspec.json.Encoder(order="deterministic").encode


def block_chars(block: Block) -> int:
    """The characters of one block that a provider reads as tokens.

    Text and tool results by their text; a tool call by its name and its arguments as
    JSON (as sent); thinking by its text (the signature is not read as tokens);
    redacted thinking and encrypted reasoning by a quarter of their opaque data (base64,
    a rough share of the reasoning tokens they stand for).
    """
    match block:
        case TextBlock(text=text):
            return len(text)
        case ToolResultBlock(content=content):
            return len(content)
        case ToolCallBlock(name=name, input=input, raw_input=raw):
            return len(name) + (len(raw) if raw is not None else len(_encode(input)))
        case ThinkingBlock(thinking=thinking):
            return len(thinking)
        case RedactedThinkingBlock(data=data):
            return len(data) // 4
        case ReasoningBlock(item=item, summary=summary):
            return len(summary) + len(str(item.get("encrypted_content") or "")) // 4
    return 0  # pragma: no cover - every block kind is matched above


def message_chars(message: Message) -> int:
    """The characters of a message's blocks (``block_chars`` summed)."""
    return sum(block_chars(b) for b in message.content)


class _Prefix:
    """The characters of a growing message list, in time proportional to what changed.

    A history appends messages and replaces its last one, so every message but the last is
    counted once; the count is redone from the start when the list is another list or its
    counted part changed (clearing, compaction, a model switch's conversion).
    """

    def __init__(self) -> None:
        self._list: Any = None
        self._count = 0
        self._chars = 0
        self._last: Any = None

    def chars(self, messages: list[Message]) -> int:
        stable = len(messages) - 1
        if (messages is not self._list or stable < self._count
                or (self._count and messages[self._count - 1] is not self._last)):
            self._list, self._count, self._chars, self._last = messages, 0, 0, None
        for m in messages[self._count:stable]:
            self._chars += message_chars(m)
            self._count += 1
            self._last = m
        return self._chars + (message_chars(messages[-1]) if stable >= 0 else 0)


def request_chars(request: ModelRequest, fixed_chars: int | None = None) -> int:
    """The characters of a whole request: system prompt, tool specs (as JSON) and messages.

    Args:
        request: the request.
        fixed_chars: the system prompt's and tools' characters when already known
            (``ContextMeter`` keeps them; they change only with the tools offered).
    """
    if fixed_chars is None:
        fixed_chars = len(request.system) + sum(len(_encode(t)) for t in request.tools)
    return fixed_chars + sum(message_chars(m) for m in request.messages)


def prompt_tokens(usage: Usage) -> int:
    """The tokens a provider read for one request: uncached input, cache reads and writes."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


@dataclass(frozen=True)
class ContextUse:
    """How full an agent's context is for the request it would send now.

    Attributes:
        tokens: the request's size in tokens: ``reported_tokens + estimated_tokens``.
        window_tokens: the model's context window (the catalog's
            ``context_window_tokens``); ``None`` when the catalog does not know it.
        reported_tokens: the provider's count of the last request and its answer
            (prompt + output); 0 before any report.
        estimated_tokens: the estimate of what changed since (may be negative after
            old tool results were cleared).
        chars_per_token: the ratio the estimate used.
        calibrated: whether that ratio came from a report of this provider.
        last_usage: the last reported usage (input, cache read, cache write, output).
    """

    tokens: int
    window_tokens: int | None
    reported_tokens: int = 0
    estimated_tokens: int = 0
    chars_per_token: float = _FALLBACK_CHARS_PER_TOKEN
    calibrated: bool = False
    last_usage: Usage = Usage()

    @property
    def fraction(self) -> float | None:
        """``tokens / window_tokens``, or ``None`` with no known window."""
        if not self.window_tokens:
            return None
        return self.tokens / self.window_tokens

    @property
    def percent(self) -> float | None:
        """The share of the window in use, in percent (one decimal), or ``None``."""
        f = self.fraction
        return None if f is None else round(100.0 * f, 1)

    def fields(self) -> dict[str, Any]:
        """The numbers as event and wire fields: ``context_tokens``,
        ``context_window_tokens`` (0: unknown), ``context_percent`` (-1.0: unknown)."""
        percent = self.percent
        return {
            "context_tokens": self.tokens,
            "context_window_tokens": self.window_tokens or 0,
            "context_percent": -1.0 if percent is None else percent,
        }

    def describe(self) -> str:
        """``"41.2k tokens, 21% of 200k"`` (or ``"41.2k tokens"`` with no window)."""
        text = f"{_short(self.tokens)} tokens"
        if self.window_tokens:
            text += f", {self.percent:.0f}% of {_short(self.window_tokens)}"
        return text


def _short(n: int) -> str:
    if abs(n) >= 1_000_000:
        return f"{n / 1_000_000:.1f}M".replace(".0M", "M")
    if abs(n) >= 1_000:
        return f"{n / 1_000:.1f}k".replace(".0k", "k")
    return str(n)


def over(use: ContextUse, fraction: float) -> bool:
    """Whether ``use`` passes ``fraction`` (0..1) of its window; ``False`` with no window."""
    f = use.fraction
    return f is not None and f >= fraction


class ContextMeter:
    """One agent's context accounting.

    Fed the way the log is folded: ``on_request`` with a ``model_request``'s provider and
    request size, ``on_response`` with its answer's usage and size. ``use`` measures the
    request the agent would send now.

    Args:
        window_tokens: the model's context window, ``None`` when unknown (``switch``
            changes it with the model).
    """

    def __init__(self, window_tokens: int | None = None) -> None:
        self.window_tokens = window_tokens
        self.provider = ""
        self._calibration: dict[str, float] = {}  # provider -> chars per token
        self._pending_chars = 0  # the size of the request in flight
        self._last_chars = 0  # the size of the last answered request plus its answer
        self._last_usage: Usage | None = None
        self._prefix = _Prefix()
        self._fixed: tuple[Any, int] | None = None  # (key of system + tools, their chars)

    def switch(self, window_tokens: int | None) -> None:
        """The agent's model changed: a new window; the last report stays until the new
        provider answers (its own calibration, if it answered before, is used)."""
        self.window_tokens = window_tokens

    def on_request(self, provider: str, chars: int) -> None:
        """A request of ``chars`` characters (``request_chars``) goes to ``provider``."""
        self.provider = provider
        self._pending_chars = chars

    def on_response(self, usage: Usage, answer_chars: int) -> None:
        """The answer to the request in flight: its reported ``usage`` and the characters
        of its content (``block_chars`` summed). A usage with no prompt tokens (the
        scripted model, a proxy that reports none) leaves the meter estimating."""
        read = prompt_tokens(usage)
        if read <= 0 or self._pending_chars <= 0:
            return
        ratio = self._pending_chars / read
        if _CPT_BOUNDS[0] <= ratio <= _CPT_BOUNDS[1]:
            self._calibration[self.provider] = ratio
        self._last_usage = usage
        self._last_chars = self._pending_chars + answer_chars

    def chars_per_token(self) -> tuple[float, bool]:
        """The ratio used for this provider and whether it is calibrated."""
        if self.provider in self._calibration:
            return self._calibration[self.provider], True
        return DEFAULT_CHARS_PER_TOKEN.get(self.provider, _FALLBACK_CHARS_PER_TOKEN), False

    def measure(self, system: str, tools: list[ToolSpec], messages: list[Message]) -> tuple[ContextUse, int]:
        """The ``ContextUse`` of a request made of these parts, and its size in characters.

        Pass the history's own ``messages`` list (not a copy): its counted prefix is kept
        while the list only grows; a fold that rewrites earlier messages (clearing,
        compaction, a model switch) assigns a new list, and the count starts again.
        """
        key = (system, tuple(t.name for t in tools))
        if self._fixed is None or self._fixed[0] != key:
            self._fixed = (key, len(system) + sum(len(_encode(t)) for t in tools))
        chars = self._fixed[1] + self._prefix.chars(messages)
        return self.use_at(chars), chars

    def tokens_of(self, value: Message | int) -> int:
        """Estimated tokens of a message (or of a number of characters) at this provider's
        ratio: what cutting or keeping part of a history frees or costs."""
        chars = value if isinstance(value, int) else message_chars(value)
        return math.ceil(chars / self.chars_per_token()[0])

    def use_at(self, chars: int) -> ContextUse:
        """The ``ContextUse`` of a request of ``chars`` characters."""
        cpt, calibrated = self.chars_per_token()
        usage = self._last_usage
        if usage is None:
            est = math.ceil(chars / cpt)
            return ContextUse(est, self.window_tokens, 0, est, round(cpt, 3), calibrated)
        reported = prompt_tokens(usage) + usage.output_tokens
        est = math.ceil((chars - self._last_chars) / cpt)
        return ContextUse(max(reported + est, 0), self.window_tokens, reported, est, round(cpt, 3), calibrated, usage)
