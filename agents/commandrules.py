"""Matching approval rules against bash command lines (the ``bash(...)`` kind).

``command_segments`` gives the simple commands of a line as bash parses it
(``shellsplit``); ``deny_candidates`` every text a deny or ask rule is tried on;
``command_regex`` compiles a command pattern; ``other_names`` finds a hard-linked file's
other names (file identity, for the path kinds). Used by ``permissions``.
"""

from __future__ import annotations

import os
import re

from .shellsplit import ShellSplit, split_commands

__all__ = ["MAX_LINK_SCAN", "command_regex", "command_segments", "deny_candidates", "normalize", "other_names"]

_REDIRECTION = re.compile(r"^(?:[0-9]+|\{\w+\})?(?:&>>|<<<|<<-|<<|<>|<&|>>|>&|>\||&>|<|>)")


def command_regex(pattern: str) -> re.Pattern[str]:
    pat = " ".join(pattern.split())
    tail = pat.endswith(" *") and not pat.endswith("\\ *")
    if tail:
        pat = pat[:-2]
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if c == "\\" and i + 1 < len(pat):
            out.append(re.escape(pat[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out) + ("(?: .*)?" if tail else ""), re.DOTALL)


def normalize(text: str) -> str:
    return " ".join(text.split())

def command_segments(command: str) -> list[str] | None:
    """The simple commands of a command line as bash parses it (``shellsplit``), each
    with its words joined by one space; redirections stay with their command; heredoc
    bodies, comments and structure words (``if``, ``do``, ``{``) are not commands.
    ``None`` when the line does not parse (an unclosed quote)."""
    split = split_commands(command)
    if not split.parsed:
        return None
    return [c.text for c in split.top_level if c.text]


def deny_candidates(command: str, split: ShellSplit) -> set[str]:
    """Every text a deny or ask rule is tried on: the whole line, every simple command
    bash would run (those in substitutions, ``eval`` and ``sh -c`` strings too, with and
    without redirections), and the pieces between any shell punctuation or quote outside
    heredoc bodies (so text inside quotes is seen too)."""
    found = {normalize(command)}
    for c in split.commands:
        found.add(c.text)
        found.add(normalize(" ".join(w for w in c.words if not _REDIRECTION.match(w))))
    visible, last = [], 0
    for start, end in split.heredoc_bodies:
        visible.append(command[last:start])
        last = end
    visible.append(command[last:])
    text = "\n".join(visible)
    found.update(normalize(piece) for piece in re.split(r"[;&|()\n`\"'$<>{}]", text))
    found.discard("")
    return found | {u for c in found for u in _unwrapped(c)}


#: Words that run the command after them: a deny rule for ``curl`` must also catch
#: ``env curl``, ``time curl``, ``if true; then curl`` ... (their options are skipped too).
_WRAPPERS = frozenset({
    "env", "time", "command", "exec", "nice", "nohup", "xargs", "sudo", "doas", "timeout", "stdbuf",
    "ionice", "setsid", "chrt", "taskset", "builtin", "then", "else", "elif", "do", "if", "while", "until", "!",
})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _unwrapped(text: str) -> set[str]:
    """``text`` without leading assignments, wrapper commands and their options, and with
    the command's path reduced to its name (``/usr/bin/curl x`` -> ``curl x``)."""
    out: set[str] = set()
    words = text.split(" ")
    for _ in range(8):
        changed = False
        while words and (_ASSIGNMENT.match(words[0]) or (words[0] in _WRAPPERS)):
            wrapper = words.pop(0)
            changed = True
            while words and (words[0].startswith("-") or (wrapper in ("timeout", "nice", "chrt", "taskset")
                                                           and words[0][:1].isdigit())):
                words.pop(0)
        if words and "/" in words[0]:
            words[0] = words[0].rsplit("/", 1)[1]
            changed = True
        if not changed:
            break
        out.add(" ".join(words))
    out.discard("")
    return out


MAX_LINK_SCAN = 200_000
"""How many workspace entries are looked at to find a hard-linked file's other names."""


def other_names(abs_path: str, workspace: str) -> list[tuple[str, str | None]]:
    """The other names in ``workspace`` of a file with hard links (same device and
    inode), as ``(absolute, relative)`` pairs; ``[]`` for a file with one name."""
    try:
        st = os.stat(abs_path)
    except OSError:
        return []
    if st.st_nlink < 2 or not os.path.isfile(abs_path):
        return []
    found, seen = [], 0
    for root, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            seen += 1
            path = os.path.join(root, name)
            if seen > MAX_LINK_SCAN:
                return found + [(workspace + "/\0unknown", None)]  # too many: no allow by name
            try:
                other = os.lstat(path)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino) and path != abs_path:
                found.append((path, os.path.relpath(path, workspace)))
    return found
