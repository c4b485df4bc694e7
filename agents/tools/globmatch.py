"""Glob patterns matched against workspace-relative file paths, in Python.

ripgrep's own ``--glob`` overrides ignore rules (a gitignored file that matches is
listed), so ``glob`` lists the files ripgrep does not ignore and matches them here.

Syntax (as in ripgrep and gitignore): ``*`` any run of characters within one path
component, ``?`` one such character, ``[abc]``/``[!a-z]`` a class, ``{a,b}`` either
alternative, ``**`` any number of directories (``**/x``, ``a/**/b``, ``a/**``), ``\\``
escapes. A pattern without ``/`` matches the file name at any depth; a pattern with
``/`` matches the path from the search root (a leading ``/`` or ``./`` is dropped); a
trailing ``/`` matches everything below that directory.
"""

from __future__ import annotations

import re

__all__ = ["compile_glob"]


def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile ``pattern`` to a regex matched (``fullmatch``) against ``/``-separated paths.

    Raises:
        ValueError: the pattern is empty.
    """
    pat = pattern.strip()
    while pat.startswith("./"):
        pat = pat[2:]
    if not pat:
        raise ValueError("the glob pattern is empty")
    anchored = "/" in pat.rstrip("/")
    pat = pat.lstrip("/")
    if pat.endswith("/"):
        pat += "**"
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + _translate(pat), re.DOTALL)


def _translate(pat: str) -> str:
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        at_start = i == 0 or pat[i - 1] == "/"
        if pat.startswith("**/", i) and at_start:
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i) and at_start and i + 2 == n:
            out.append(".*")
            i += 2
        elif c == "*":
            while i < n and pat[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := _class_end(pat, i)) != -1:
            body = pat[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "{" and (end := _brace_end(pat, i)) != -1:
            alternatives = _split_top_level(pat[i + 1 : end])
            out.append("(?:" + "|".join(_translate(a) for a in alternatives) + ")")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pat[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _class_end(pat: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1."""
    i = start + 1
    if i < len(pat) and pat[i] in "!^":
        i += 1
    if i < len(pat) and pat[i] == "]":
        i += 1
    end = pat.find("]", i)
    return end


def _brace_end(pat: str, start: int) -> int:
    depth = 0
    for i in range(start, len(pat)):
        if pat[i] == "{":
            depth += 1
        elif pat[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_top_level(body: str) -> list[str]:
    parts, depth, current = [], 0, []
    for c in body:
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += (c == "{") - (c == "}")
        current.append(c)
    parts.append("".join(current))
    return parts
