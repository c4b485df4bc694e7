"""Custom slash commands, and how ``/NAME args`` and ``$NAME`` are recognised.

A command is a Markdown file ``NAME.md`` in ``<config dir>/commands/`` (the person's) or
``.musec/commands/`` (the project's, only in a trusted workspace; the person's wins on a
clash). Optional front matter gives ``description`` and ``argument-hint``. Invoking
``/NAME args`` sends the body as the person's message with ``$ARGUMENTS`` replaced by
``args`` (and ``$1`` ... ``$9`` by the words of ``args``); a body without ``$ARGUMENTS``
gets the arguments appended on a line of their own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .frontmatter import FrontMatterError, split

__all__ = ["Command", "Invocation", "discover_commands", "expand", "mentions", "parse_invocation"]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MAX_COMMAND_BYTES = 64 * 1024
_INVOCATION = re.compile(r"/([A-Za-z0-9][A-Za-z0-9_:-]{0,63})(?:\s+(.*))?", re.DOTALL)
_MENTION = re.compile(r"(?<![\w$])\$([a-z0-9]+(?:-[a-z0-9]+)*)\b")


@dataclass(frozen=True)
class Command:
    """One custom command: ``name``, ``description``, ``body``, ``path`` and ``scope``
    (``user`` or ``project``)."""

    name: str
    description: str
    body: str
    path: str
    scope: str
    argument_hint: str = ""


def discover_commands(dirs: Sequence[tuple[Path, str]]) -> tuple[list[Command], list[str]]:
    """The commands in ``dirs`` (``(directory, scope)`` in precedence order) and problems.

    Returns:
        Commands sorted by name, and one line per file skipped (bad name, unreadable,
        malformed front matter, shadowed).
    """
    found: dict[str, Command] = {}
    problems: list[str] = []
    for root, scope in dirs:
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*.md")):
            name = path.stem
            if not NAME.fullmatch(name):
                problems.append(f"{path}: a command name is letters, digits, - and _; rename the file")
                continue
            try:
                data = path.read_bytes()[:MAX_COMMAND_BYTES].decode("utf-8", "replace")
                meta, body = split(data)
            except (OSError, FrontMatterError) as exc:
                problems.append(f"{path}: {exc}")
                continue
            if name in found:
                problems.append(f"{path}: command /{name} is already defined by {found[name].path}; ignored")
                continue
            description = str(meta.get("description") or body.strip().split("\n", 1)[0][:80])
            found[name] = Command(name, description, body, str(path), scope, str(meta.get("argument-hint", "")))
    return sorted(found.values(), key=lambda c: c.name), problems


def expand(command: Command, arguments: str) -> str:
    """The message ``/NAME arguments`` sends."""
    body = command.body
    if "$ARGUMENTS" not in body and not re.search(r"\$[1-9]", body):
        return body.rstrip() + (f"\n\n{arguments}" if arguments.strip() else "")
    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    body = re.sub(r"\$([1-9])", lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "", body)
    return body.replace("$ARGUMENTS", arguments)


@dataclass(frozen=True)
class Invocation:
    """``/NAME args`` recognised: ``name`` and ``arguments`` (may be empty)."""

    name: str
    arguments: str


def parse_invocation(text: str, names: Iterable[str]) -> Invocation | None:
    """``text`` as ``/NAME args`` when ``NAME`` is one of ``names``, else ``None``
    (an ordinary message, or a slash command someone else answers)."""
    m = _INVOCATION.fullmatch(text.strip())
    if m is None or m.group(1) not in set(names):
        return None
    return Invocation(m.group(1), (m.group(2) or "").strip())


def mentions(text: str, names: Iterable[str]) -> list[str]:
    """The skills ``text`` invokes as ``$NAME``, in order of first mention, each once."""
    known = set(names)
    out: list[str] = []
    for m in _MENTION.finditer(text):
        if m.group(1) in known and m.group(1) not in out:
            out.append(m.group(1))
    return out
