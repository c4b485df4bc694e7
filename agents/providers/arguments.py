"""Parsing streamed tool-call arguments without ever guessing.

The model streams a tool call's input as JSON text in fragments. When the joined text is
not a JSON object (cut off by ``max_tokens``, an interrupted generation, a model that
wrote a list), the call must not run, and certainly not with ``{}``: the caller gets an
``input_error`` naming the problem, which the agent loop sends back as the tool result.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["parse_arguments"]

_decoder = msgspec.json.Decoder()


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """``(input, None)`` for a JSON object, ``({}, problem)`` otherwise.

    An empty or all-whitespace text is a call without arguments: ``({}, None)``.
    """
    if not raw.strip():
        return {}, None
    try:
        parsed = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        return {}, (
            f"tool input is not valid JSON ({exc}); received {len(raw)} characters: {raw[:200]!r}"
        )
    if not isinstance(parsed, dict):
        return {}, f"tool input is JSON {type(parsed).__name__}, not an object: {raw[:200]!r}"
    return parsed, None
