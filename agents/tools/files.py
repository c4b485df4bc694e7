"""The file tools: ``read_file``, ``write_file`` and ``edit_file``.

Paths are resolved with ``paths.resolve_tool_path`` (workspace-relative, symlinks
followed, escapes refused). Writes are atomic (temporary file + rename) and return a
``FileEdit`` with the SHA-256 before and after and a unified diff. A read-modify-write
holds a per-file lock (every session's tools run in the daemon's process), and an edit
is refused when the file changed on disk between its read and its write (issue 13).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.conversation import ToolSpec
from ..core.words import counted
from .base import Access, FileEdit, ToolContext, ToolInputError, ToolOutput
from .common import get_bool, get_int, get_str, run_in_thread, writable_path
from .errors import BinaryFile, FileTooLarge
from .paths import display_path, resolve_tool_path
from .readwindow import LINE_PART_CHARS, MAX_LINE_CHARS, _line_part, _numbered_window, _read_big
from .textfile import (
    apply_edit,
    atomic_write,
    decode_text,
    looks_binary,
    number_lines,
    sha256_hex,
    unified_diff,
)

__all__ = ["EditFileTool", "ReadFileTool", "WriteFileTool"]

MAX_READ_FILE_BYTES = 2 * 1024 * 1024
"""``read_file`` reads files up to this size (2 MiB) whole; larger ones are streamed: the
lines asked for are found by counting line ends in 1 MiB chunks, never loading the file."""

MAX_EDIT_FILE_BYTES = 8 * 1024 * 1024
"""``edit_file`` refuses files larger than this (8 MiB)."""

DEFAULT_READ_LIMIT_LINES = 2000

EDIT_SNIPPET_CONTEXT_LINES = 3


_FILE_LOCKS = [threading.Lock() for _ in range(256)]
"""Striped locks, picked by the resolved path: every read-modify-write of one file in
this process (the daemon runs every session's tools) is one at a time."""


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with _FILE_LOCKS[zlib.crc32(str(path).encode("utf-8", "surrogateescape")) % len(_FILE_LOCKS)]:
        yield


def _unchanged_since_read(path: Path, before: bytes | None, name: str) -> None:
    """Refuse to write when the file changed since it was read (another process: a
    second daemon, an editor); within this daemon ``_file_lock`` keeps edits in turn."""
    try:
        now = path.read_bytes()
    except FileNotFoundError:
        now = None
    if now != before:
        raise ToolInputError(
            f"{name} changed on disk while this edit was being made (another session or an "
            "editor wrote it); nothing was written: read it again and redo the change"
        )


def _saw(ctx: ToolContext, path: Path, sha256: str) -> None:
    """Note what ``ctx``'s agent now knows ``path`` holds."""
    ctx.seen[str(path)] = sha256


def _unchanged_since_seen(ctx: ToolContext, path: Path, before: bytes | None, name: str) -> None:
    """Refuse to overwrite a file that changed since this agent last read or wrote it (the
    person saved it in an editor, a command or another agent rewrote it): the model's
    whole-file content was written against what it saw, so the change would be lost
    (fresh-user trial s6, G13). A file this agent has not seen, or one since deleted, is
    written as asked."""
    seen = None if before is None else ctx.seen.get(str(path))
    if seen is not None and sha256_hex(before) != seen:
        raise ToolInputError(
            f"{name} changed on disk since you last read it (the person, a command or another "
            "agent wrote it); nothing was written: read it again and write your change onto "
            "what it holds now, or use edit_file"
        )


def _write_diff(before: bytes | None, content: str, name: str) -> str:
    """The diff of a ``write_file``: from nothing, from the old text, or a binary note."""
    if before is None:
        return unified_diff(None, content, name)
    try:
        return unified_diff(decode_text(before, name).text, content, name)
    except BinaryFile:
        return f"Binary file {name} replaced by text\n"


def _announcer(ctx: ToolContext, edit: FileEdit, path: Path) -> Callable[[Path], None] | None:
    """``atomic_write``'s ``before_rename`` that announces ``edit`` (``ctx.announce_edit``)."""
    announce = ctx.announce_edit
    if announce is None:
        return None
    return lambda tmp: announce(edit, path, tmp)


def _path_list(input: dict[str, Any]) -> Sequence[str]:
    path = input.get("path") if isinstance(input, dict) else None
    return [path] if isinstance(path, str) else []


def _existing_file(path: Path, name: str, *, max_bytes: int, tool: str) -> int:
    """Check that ``path`` is a regular file no larger than ``max_bytes``; return its size."""
    if not path.exists():
        raise ToolInputError(
            f"{name} does not exist; find files with glob (or create it with write_file)"
        )
    if path.is_dir():
        raise ToolInputError(f"{name} is a directory; list its files with glob (path={name!r})")
    if not path.is_file():
        raise ToolInputError(f"{name} is not a regular file")
    size = path.stat().st_size
    if size > max_bytes:
        raise FileTooLarge(
            f"{name} is {size} bytes, over {tool}'s cap of {max_bytes // (1024 * 1024)} MiB; "
            "search it with grep or handle it with a command in bash"
        )
    return size


def _split_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only (like editors and grep), terminators removed."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


class ReadFileTool:
    """``read_file {path, offset?, limit?}``: a text file's lines, numbered like ``cat -n``."""

    name = "read_file"
    access: Access = "read"
    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a text file from the workspace. Returns its lines numbered like `cat -n` "
            "(line number, tab, line). Use offset (1-based first line) and limit (number of "
            f"lines, default {DEFAULT_READ_LIMIT_LINES}) for long files; a file of any size is read "
            f"in parts this way. A line over {MAX_LINE_CHARS} characters is cut; read it in parts "
            f"with offset (that line) and column (1-based first character; {LINE_PART_CHARS} at a time). "
            "Refuses binary files. Paths are relative to the workspace."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "First line to show (1-based).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Number of lines to show.",
                },
                "column": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Show only line `offset`, from this character on (1-based): a long line in parts.",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return _path_list(input)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_in_thread(self.name, self._read, input, ctx)

    def _read(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_tool_path(get_str(input, "path"), ctx, read=True)
        offset = get_int(input, "offset", default=1, minimum=1)
        limit = get_int(input, "limit", default=DEFAULT_READ_LIMIT_LINES, minimum=1)
        column = get_int(input, "column", default=0, minimum=1)
        name = display_path(path, ctx)
        size = _existing_file(path, name, max_bytes=1 << 62, tool=self.name)
        if size > MAX_READ_FILE_BYTES:
            return _read_big(path, name, offset, limit, column=column)
        if ctx.blackboard is not None:
            data = ctx.blackboard.read(path, ctx.agent_id, MAX_READ_FILE_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_READ_FILE_BYTES + 1)
        if looks_binary(data):
            raise BinaryFile(
                f"{name} is a binary file (NUL bytes in its first 8 KiB); read_file reads text only"
            )
        _saw(ctx, path, sha256_hex(data))
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        lines = _split_lines(text)
        if not lines:
            return ToolOutput(content=f"({name} is empty)")
        if offset > len(lines):
            raise ToolInputError(f"offset {offset} is past the end of {name} ({counted(len(lines), 'line')})")
        if column:
            line = lines[offset - 1]
            return _line_part(line, offset, column, len(line), name)
        return _numbered_window(lines[offset - 1 : offset - 1 + limit], offset, len(lines))


async def _preview(tool: str, fn: Any, input: dict[str, Any], ctx: ToolContext) -> str:
    try:
        out = await run_in_thread(tool, fn, input, ctx)
    except (BinaryFile, FileTooLarge, ValueError):
        return ""
    return "" if out.is_error else out.content


class WriteFileTool:
    """``write_file {path, content}``: create or overwrite a file, atomically."""

    name = "write_file"
    access: Access = "write"
    spec = ToolSpec(
        name="write_file",
        description=(
            "Create a file, or overwrite one completely, with the given content (UTF-8). "
            "Parent directories are created. Prefer edit_file to change part of an existing "
            "file. Paths are relative to the workspace; writing outside it is refused."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "content": {
                    "type": "string",
                    "description": "The complete new content of the file.",
                },
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return _path_list(input)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_in_thread(self.name, self._write, input, ctx)

    async def preview(self, input: dict[str, Any], ctx: ToolContext) -> str:
        """The unified diff this call would make, written nowhere (for an approval
        question); "" when the call would fail."""
        return await _preview(self.name, self._diff, input, ctx)

    def _diff(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_tool_path(get_str(input, "path"), ctx)
        content = get_str(input, "content", allow_empty=True)
        name = display_path(path, ctx)
        if path.is_dir() or (path.exists() and path.stat().st_size > MAX_EDIT_FILE_BYTES):
            return ToolOutput(content="")
        before = path.read_bytes() if path.exists() else None
        try:
            diff = unified_diff(None if before is None else decode_text(before, name).text, content, name)
        except BinaryFile:
            diff = f"Binary file {name} replaced by text\n"
        return ToolOutput(content=diff)

    def _write(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = writable_path(get_str(input, "path"), ctx, self.name)
        content = get_str(input, "content", allow_empty=True)
        name = display_path(path, ctx)
        if path.is_dir():
            raise ToolInputError(f"{name} is a directory; give a file path")
        data = content.encode("utf-8")
        with _file_lock(path):
            before = path.read_bytes() if path.exists() else None
            _unchanged_since_seen(ctx, path, before, name)
            edit = FileEdit(
                path=name,
                before_sha256=None if before is None else sha256_hex(before),
                after_sha256=sha256_hex(data),
                diff=_write_diff(before, content, name),
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, ctx.faults, _announcer(ctx, edit, path))
            _saw(ctx, path, edit.after_sha256)
        verb = "created" if before is None else "overwrote"
        lines = len(_split_lines(content))
        return ToolOutput(content=f"{verb} {name} ({counted(len(data), 'byte')}, {counted(lines, 'line')})", edits=[edit])


class EditFileTool:
    """``edit_file {path, old_string, new_string, replace_all?}``: exact string replacement."""

    name = "edit_file"
    access: Access = "write"
    spec = ToolSpec(
        name="edit_file",
        description=(
            "Replace old_string by new_string in a file. old_string must match the file "
            "exactly (whitespace and indentation included) and occur exactly once, unless "
            "replace_all is true; include enough surrounding lines to make it unique. Line "
            "endings (CRLF), a byte order mark and a missing final newline are kept. Read "
            "the file first. To create a file use write_file."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "old_string": {"type": "string", "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The text to put in its place."},
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence (default false).",
                },
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": False,
        },
    )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return _path_list(input)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_in_thread(self.name, self._edit, input, ctx)

    async def preview(self, input: dict[str, Any], ctx: ToolContext) -> str:
        """The unified diff this call would make, written nowhere (for an approval
        question); "" when the call would fail."""
        return await _preview(self.name, self._diff, input, ctx)

    def _diff(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_tool_path(get_str(input, "path"), ctx)
        name = display_path(path, ctx)
        old = get_str(input, "old_string", allow_empty=True)
        new = get_str(input, "new_string", allow_empty=True)
        _existing_file(path, name, max_bytes=MAX_EDIT_FILE_BYTES, tool=self.name)
        decoded = decode_text(path.read_bytes(), name)
        result = apply_edit(decoded.text, old, new, replace_all=get_bool(input, "replace_all", default=False), name=name)
        return ToolOutput(content=unified_diff(decoded.text, result.text, name))

    def _edit(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = writable_path(get_str(input, "path"), ctx, self.name)
        old = get_str(input, "old_string", allow_empty=True)
        new = get_str(input, "new_string", allow_empty=True)
        replace_all = get_bool(input, "replace_all", default=False)
        name = display_path(path, ctx)
        if not old:
            raise ToolInputError(
                "old_string is empty; to create or overwrite a file use write_file"
            )
        if old == new:
            raise ToolInputError(
                "old_string and new_string are the same; there is nothing to change"
            )
        with _file_lock(path):
            _existing_file(path, name, max_bytes=MAX_EDIT_FILE_BYTES, tool=self.name)
            data = path.read_bytes()
            decoded = decode_text(data, name)
            result = apply_edit(decoded.text, old, new, replace_all=replace_all, name=name)
            new_data = decoded.encode(result.text)
            if new_data == data:
                raise ToolInputError(
                    "the edit changes nothing once line endings are matched to the file"
                )
            edit = FileEdit(
                path=name,
                before_sha256=sha256_hex(data),
                after_sha256=sha256_hex(new_data),
                diff=unified_diff(decoded.text, result.text, name),
            )
            _unchanged_since_read(path, data, name)
            atomic_write(path, new_data, ctx.faults, _announcer(ctx, edit, path))
            _saw(ctx, path, edit.after_sha256)
        if result.count == 1:
            first = max(1, result.lines[0] - EDIT_SNIPPET_CONTEXT_LINES)
            last = result.lines[0] + new.count("\n") + EDIT_SNIPPET_CONTEXT_LINES
            lines = _split_lines(result.text)
            snippet = number_lines(lines[first - 1 : last], first)
            summary = f"edited {name}: replaced 1 occurrence at line {result.lines[0]}; the file now reads:\n"
            return ToolOutput(content=summary + snippet, edits=[edit])
        where = ", ".join(map(str, result.lines[:20])) + (", ..." if result.count > 20 else "")
        return ToolOutput(
            content=f"edited {name}: replaced {result.count} occurrences (lines {where})",
            edits=[edit],
        )
