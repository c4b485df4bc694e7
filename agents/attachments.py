"""``@path`` mentions in a person's message attach the file's content (issue 18 item 4).

Three steps, each pure but the reading:

1. **Finding the mentions** (``find_mentions``). A mention is ``@`` at the start of the text
   or after a space or an opening bracket, followed by a path: ``@src/x.py``, ``@~/notes.md``,
   ``@/abs/path``, or quoted for names with spaces, ``@"a b.txt"``. ``a@b.com`` (an ``@``
   inside a word) is no mention, nor is anything inside a code span or a fenced code block
   (a pasted ``@decorator``). Trailing punctuation (``see @a.py.``) is not part of the
   path; an unbalanced closing bracket neither (``(see @a.py)``).
2. **Reading them** (``read_attachments``), under the rules a ``read_file`` call of the
   agent is under: the path is resolved against the workspace with every symlink followed
   and must stay inside the allowed roots (``tools.paths.resolve_tool_path``), and no
   ``read`` deny rule may cover it (``permissions.Policy``; the person's own mention is
   their yes to an ``ask`` rule). A refused or missing path attaches nothing: the
   ``Attachment`` says why in one line, for the person. A text file over the tool-output
   budget is attached as its head and tail around a note on how to read the rest
   (``budget.fit_attachment``); a binary file (NUL bytes in its first 8 KiB) is not inlined,
   and its note says so; a directory attaches its listing (one level, deny rules applied).
3. **The user turn** (``user_turn``): the message's text as one block, then one block per
   attached file, each an ``untrusted-data`` element naming the path (the file's text is
   data, not the person's instructions). The ``user_message`` event carries the
   attachments as read, so the history fold, a resume and a replay rebuild the same request
   without reading the files again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .budget import fit_attachment
from .core.events import Attachment
from .tools.base import ToolContext, ToolInputError, printable
from .tools.paths import display_path, resolve_tool_path
from .tools.textfile import looks_binary
from .tools.untrusted import mark_untrusted

__all__ = [
    "MAX_ATTACHMENTS",
    "attach",
    "find_mentions",
    "quote_mention",
    "read_attachments",
    "user_turn",
]

MAX_ATTACHMENTS = 20
"""At most this many mentions of one message are attached; the others are refused."""

MAX_LISTING_ENTRIES = 500
"""A directory's listing shows at most this many entries, then says how many more."""

WHOLE_READ_BYTES = 2 * 1024 * 1024
"""A file up to this size is read whole (as ``read_file`` reads it); of a larger one only
its ends are read."""

NO_BUDGET_TOKENS = 66_000
"""The cut of an attachment when the tool-output budget is off (about ``read_file``'s
200,000-character output cap)."""

_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
_MENTION = re.compile(r'(?<![^\s(\[{<,;])@(?:"([^"\n]+)"|([^\s"`@][^\s"`]*))')
_TRAILING = ".,;:!?'"
_PAIRS = {")": "(", "]": "[", "}": "{", ">": "<"}


def find_mentions(text: str) -> list[str]:
    """The paths ``text`` mentions as ``@path`` or ``@"path with spaces"``, in order of first
    mention, each once (see the module doc for what counts).

    Returns:
        The paths as written (no ``@``, no quotes), never empty strings.
    """
    masked = _CODE.sub(lambda m: " " * len(m.group()), text)
    found: dict[str, None] = {}
    for m in _MENTION.finditer(masked):
        path = m.group(1) if m.group(1) is not None else _trim(m.group(2))
        if path:
            found.setdefault(path)
    return list(found)


def _trim(word: str) -> str:
    """A bare mention without the punctuation that ends the sentence around it."""
    while word:
        last = word[-1]
        if last in _TRAILING:
            word = word[:-1]
        elif last in _PAIRS and word.count(last) > word.count(_PAIRS[last]):
            word = word[:-1]
        else:
            break
    return word


def quote_mention(path: str) -> str:
    """The mention of ``path`` that ``find_mentions`` reads back as ``path``: bare when it
    can be, else quoted (``@"a b.txt"``). A path holding ``"`` or a line break cannot be
    mentioned; it is returned bare, as the nearest there is."""
    bare = "@" + path
    if find_mentions(bare) == [path] or '"' in path or "\n" in path:
        return bare
    return f'@"{path}"'


def read_attachments(text: str, ctx: ToolContext, policy: Any, mode: str, budget_tokens: int) -> list[Attachment]:
    """Read what ``text``'s mentions name, under the agent's read rules (blocking: call it
    from a worker thread).

    Args:
        text: the person's message.
        ctx: the agent's tool context (workspace, allowed roots).
        policy: the agent's ``permissions.Policy`` (its read deny rules).
        mode: the agent's approval mode.
        budget_tokens: the tool-output budget of one result, in tokens (0: none).

    Returns:
        One ``Attachment`` per mention, in order (refused ones say why); ``[]`` without any.
    """
    out = []
    for n, raw in enumerate(find_mentions(text)):
        if n >= MAX_ATTACHMENTS:
            out.append(Attachment(path=printable(raw), kind="refused",
                                  refused=f"more than {MAX_ATTACHMENTS} mentions in one message; attach fewer"))
            continue
        out.append(_attach(raw, ctx, policy, mode, budget_tokens or NO_BUDGET_TOKENS))
    return out


async def attach(text: str, agent: Any) -> list[Attachment]:
    """What ``text``'s mentions attach, read in a worker thread under ``agent``'s read rules
    (its workspace or worktree and allowed roots, its read deny rules and approval mode,
    its tool-output budget): a person's message (the main agent's), a fan-out worker's
    task (the worker's: the files of its own worktree), a goal's condition for its judge
    (the main agent's workspace). ``[]`` without a mention, and nothing is read.

    Args:
        text: the message, task or condition.
        agent: an ``agents.loop.Agent`` (its ``ctx``, ``policy``, ``approval_mode`` and
            ``context_config``).
    """
    if "@" not in text or not find_mentions(text):
        return []
    import anyio

    return await anyio.to_thread.run_sync(read_attachments, text, agent.ctx, agent.policy, agent.approval_mode,
                                          agent.context_config.tool_output_tokens)


def _attach(raw: str, ctx: ToolContext, policy: Any, mode: str, budget_tokens: int) -> Attachment:
    def refused(why: str) -> Attachment:
        return Attachment(path=printable(raw), kind="refused", refused=why)

    try:
        path = resolve_tool_path(raw, ctx, read=True)
    except ToolInputError as exc:
        return refused(str(exc))
    verdict = policy.decide(mode, policy.call("read_file", "read", {"path": raw}, [raw]))
    if verdict.decision == "deny":
        if verdict.rule:
            return refused(f"the {verdict.source} rule deny {verdict.rule} forbids reading it")
        return refused(f"reading it is not allowed ({verdict.refusal(mode, 'read')})")
    shown = display_path(path, ctx)
    try:
        if path.is_dir():
            return Attachment(path=shown.rstrip("/") + "/", kind="directory", content=_listing(path, ctx, policy))
        if not path.exists():
            return refused("no such file or directory")
        if not path.is_file():
            return refused("not a regular file")
        size = path.stat().st_size
        kind, content, partial = _file_text(path, size, shown, budget_tokens)
    except OSError as exc:
        return refused(f"could not be read: {exc.strerror or exc}")
    return Attachment(path=shown, kind=kind, size_bytes=size, content=printable(content), partial=partial)


def _file_text(path: Path, size: int, shown: str, budget_tokens: int) -> tuple[str, str, bool]:
    """``(kind, content, partial)`` of a regular file: its text (cut to the budget: then
    ``partial``), or a binary note."""
    with open(path, "rb") as f:
        if size <= WHOLE_READ_BYTES:
            data = f.read(WHOLE_READ_BYTES + 1)
            if looks_binary(data):
                return "binary", _binary_note(shown, size), False
            text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
            fitted = fit_attachment(text, budget_tokens, path=shown)
            return "file", fitted, fitted is not text
        half = int(budget_tokens * 3) // 2  # characters, as budget.fit_attachment counts them
        head = f.read(half)
        if looks_binary(head):
            return "binary", _binary_note(shown, size), False
        f.seek(max(size - half, 0))
        tail = f.read(half)
    head_text = head.decode("utf-8", errors="replace").removeprefix("\ufeff")
    head_text = head_text[: head_text.rfind("\n") + 1] or head_text
    tail_text = tail.decode("utf-8", errors="replace")
    tail_text = tail_text[tail_text.find("\n") + 1:] or tail_text
    head_lines = head_text.count("\n")
    note = (f"\n[... the middle of {shown} left out: it is {size:,} bytes, over the {budget_tokens:,}-token budget "
            f"of one attachment. Shown: its first {head_lines:,} lines and its last {tail_text.count(chr(10)):,}. "
            f"Read the rest with read_file(path={shown!r}, offset={head_lines + 1}, limit=...), or search it with "
            f"grep(pattern=..., path={shown!r}).]\n")
    return "file", head_text + note + tail_text, True


def _binary_note(shown: str, size: int) -> str:
    return f"({shown} is a binary file of {size:,} bytes: not inlined; tell the person if you need it in another form)"


def _listing(path: Path, ctx: ToolContext, policy: Any) -> str:
    """A directory's entries (one level, sorted, folders with a trailing ``/``), as paths
    relative to the workspace; those a read deny rule covers are left out, with a note."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        return f"(the directory could not be listed: {exc.strerror or exc})"
    names = []
    for entry in entries:
        if entry.name == ".git":
            continue
        is_dir = entry.is_dir()
        names.append(display_path(Path(entry.path), ctx) + ("/" if is_dir else ""))
    more = len(names) - MAX_LISTING_ENTRIES
    listing = policy.filter_listing("glob", "\n".join(names[:MAX_LISTING_ENTRIES]))
    if more > 0:
        listing += f"\n[... and {more:,} more entries]"
    return listing or "(empty directory)"


def _attribute(path: str) -> str:
    return path.replace("&", "&amp;").replace('"', "&quot;").replace("\n", " ")


def user_turn(text: str, attachments: Iterable[Attachment], stored: Callable[[str], str] | None = None) -> list[str]:
    """The text blocks of a person's message with its attachments: the message, then one
    ``untrusted-data`` element per attached file or directory (refused ones add nothing).

    Args:
        text: the message.
        attachments: as recorded in its ``user_message`` event.
        stored: the log's redaction of a text (the element's id is the digest of what the
            log stores of the content, so a live run and a replay of the log agree).
    """
    blocks = [text]
    for a in attachments:
        if a.kind == "refused":
            continue
        what = "directory" if a.kind == "directory" else "file"
        size = f" ({a.size_bytes:,} bytes)" if a.kind != "directory" else ""
        source = f"attached {what} {_attribute(a.path)}{size}"
        blocks.append(mark_untrusted(source, a.content, stored(a.content) if stored is not None else None))
    return blocks

