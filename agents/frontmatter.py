"""The YAML front matter of ``SKILL.md`` and command files: the subset those files use.

A file may start with a line ``---``, mappings ``key: value`` and a closing ``---``; the
rest is the body. Values: plain scalars, single- or double-quoted strings, ``[a, b]``
flow lists, block lists (``- item`` lines under ``key:``), ``|``/``>`` block scalars
(literal and folded), and nested mappings one level deep (``metadata:`` with indented
``key: value`` lines). ``true``/``false`` become booleans; nothing else is converted.
That is what agentskills.io's specification and the common command formats need; a
full YAML parser would be a new dependency for no gain.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FrontMatterError", "split"]

_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*:(?:\s+(.*))?$")


class FrontMatterError(ValueError):
    """The front matter is malformed; the message names the line."""


def _scalar(raw: str, line_no: int) -> Any:
    raw = raw.strip()
    if raw.startswith('"'):
        if len(raw) < 2 or not raw.endswith('"'):
            raise FrontMatterError(f"line {line_no}: unclosed double quote")
        body = raw[1:-1]
        return re.sub(r'\\(["\\nt])', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'"):
            raise FrontMatterError(f"line {line_no}: unclosed single quote")
        return raw[1:-1].replace("''", "'")
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return [_scalar(x, line_no) for x in inner.split(",")] if inner else []
    if " #" in raw:
        raw = raw.split(" #", 1)[0].rstrip()
    if raw in ("true", "True"):
        return True
    if raw in ("false", "False"):
        return False
    return raw


def _block(lines: list[str], i: int, style: str) -> tuple[str, int]:
    """A ``|`` or ``>`` block scalar starting at ``lines[i]``; returns it and the next index."""
    body: list[str] = []
    while i < len(lines) and (not lines[i].strip() or lines[i][:1] in " \t"):
        body.append(lines[i].strip())
        i += 1
    while body and not body[-1]:
        body.pop()
    if style.startswith("|"):
        return "\n".join(body), i
    return " ".join(b for b in body if b), i


def _mapping(lines: list[str], first_line: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        n = first_line + i
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        if line[:1] in " \t":
            raise FrontMatterError(f"line {n}: unexpected indentation")
        m = _KEY.match(line.rstrip())
        if m is None:
            raise FrontMatterError(f"line {n}: expected `key: value`")
        key, value = m.group(1), (m.group(2) or "").strip()
        i += 1
        if value and value[0] in "|>":
            out[key], i = _block(lines, i, value)
        elif value:
            out[key] = _scalar(value, n)
        else:
            nested = []
            while i < len(lines) and (not lines[i].strip() or lines[i][:1] in " \t"):
                nested.append(lines[i])
                i += 1
            items = [x.strip() for x in nested if x.strip()]
            if items and all(x.startswith("- ") or x == "-" for x in items):
                out[key] = [_scalar(x[1:], n) for x in items]
            elif items:
                out[key] = _mapping([x.strip() for x in nested], n + 1)
            else:
                out[key] = ""
    return out


def split(text: str) -> tuple[dict[str, Any], str]:
    """``(front matter, body)`` of a file's text; ``({}, text)`` when it has none.

    Raises:
        FrontMatterError: the front matter is opened but not closed, or a line is not
            of the subset described in the module docstring.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].rstrip() == "---":
            meta = _mapping([x.rstrip("\r") for x in lines[1:end]], 2)
            return meta, "\n".join(lines[end + 1 :]).lstrip("\n")
    raise FrontMatterError("the front matter opened by `---` on line 1 is never closed by another `---`")
