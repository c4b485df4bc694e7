"""What ``read_file`` shows of a file: a numbered window of its lines, a big file's window
read in chunks without loading it, and a part of a long line (``column``).

Split out of ``files.py``, which keeps the tools themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from ..core.words import counted
from .base import ToolInputError, ToolOutput
from .errors import BinaryFile
from .textfile import looks_binary, number_lines

__all__ = ["LINE_PART_CHARS", "MAX_LINE_CHARS", "MAX_READ_OUTPUT_CHARS"]

_CHUNK = 1024 * 1024

MAX_LINE_CHARS = 2000
"""Longer lines are cut in ``read_file``'s output, with a note on the line."""

MAX_READ_OUTPUT_CHARS = 200_000
"""``read_file`` stops adding lines past this many characters of output."""

LINE_PART_CHARS = 20_000
"""``read_file`` with ``column``: the characters of the line shown at once."""


def _line_part(line: str, number: int, column: int, length: int | None, name: str) -> ToolOutput:
    """Line ``number`` from character ``column`` on, ``LINE_PART_CHARS`` of it, and how to
    read on (fresh-user s8 J6: a one-line file could not be read past its first 2,000
    characters). ``line`` holds at least the characters to show; ``length``: the line's
    length, ``None`` when not known (a big file's line is not read whole)."""
    if column > len(line):
        raise ToolInputError(f"column {column} is past the end of line {number} of {name} "
                             f"({counted(len(line), 'character')})")
    part = line[column - 1 : column - 1 + LINE_PART_CHARS]
    end = column - 1 + len(part)
    out = number_lines([part], number)
    if length is None or end < length:
        of = f" of {length}" if length is not None else ""
        out += (f"[line {number}: showed characters {column}-{end}{of}; "
                f"pass offset={number} column={end + 1} to read on]\n")
    return ToolOutput(content=out)


def _numbered_window(lines: Iterable[str], offset: int, total: int) -> ToolOutput:
    """``lines`` (from line ``offset`` of ``total``) numbered, long lines and the output cut."""
    shown: list[str] = []
    chars = 0
    for number, line in enumerate(lines, offset):
        if len(line) > MAX_LINE_CHARS:
            line = (line[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS} of {len(line)} characters; "
                    f"read on with offset={number} column={MAX_LINE_CHARS + 1}]")
        chars += len(line) + 8
        if shown and chars > MAX_READ_OUTPUT_CHARS:
            break
        shown.append(line)
    out = number_lines(shown, offset)
    last = offset - 1 + len(shown)
    if last < total:
        out += (
            f"[output truncated: showed lines {offset}-{last} of {total}; "
            f"pass offset={last + 1} to read on]\n"
        )
        return ToolOutput(content=out, whole_lines=total)
    return ToolOutput(content=out)


def _read_big(path: Path, name: str, offset: int, limit: int, *, column: int = 0, chunk: int = _CHUNK) -> ToolOutput:
    """``read_file`` of a file over ``MAX_READ_FILE_BYTES``: lines ``offset`` to
    ``offset + limit - 1`` and the file's line count, read in ``chunk``-byte chunks; with
    ``column``, part of line ``offset`` (``_line_part``; the line is read up to that part).

    Raises:
        BinaryFile: NUL bytes in the first 8 KiB.
        ToolInputError: ``offset`` is past the end.
    """
    with open(path, "rb") as f:
        if looks_binary(f.read(8192)):
            raise BinaryFile(f"{name} is a binary file (NUL bytes in its first 8 KiB); read_file reads text only")
        f.seek(0)
        skipped = _skip_lines(f, offset - 1, chunk)
        if column:
            want = (column - 1 + LINE_PART_CHARS) * 4 + 4  # bytes enough for the characters shown
            head = f.readline(want)
            if skipped < offset - 1 or not head:
                raise ToolInputError(f"offset {offset} is past the end of {name} "
                                     f"({counted(skipped + _count_lines(f, chunk), 'line')})")
            whole = len(head) < want or head.endswith(b"\n")
            text = head.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
            if offset == 1:
                text = text.removeprefix("\ufeff")
            return _line_part(text, offset, column, len(text) if whole else None, name)
        raw: list[bytes] = []
        size = 0
        while len(raw) < limit and size <= MAX_READ_OUTPUT_CHARS * 4:
            line = f.readline()
            if not line:
                break
            raw.append(line)
            size += len(line)
        rest = _count_lines(f, chunk)
    total = skipped + len(raw) + rest
    if not raw:
        raise ToolInputError(f"offset {offset} is past the end of {name} ({counted(total, 'line')})")
    text = [line.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r") for line in raw]
    if offset == 1:
        text[0] = text[0].removeprefix("\ufeff")
    return _numbered_window(text, offset, total)


def _skip_lines(f: BinaryIO, n: int, chunk_bytes: int) -> int:
    """Move ``f`` past its next ``n`` lines; the lines skipped (fewer at the end, where a
    last line without its line end counts as one)."""
    skipped, pos, last = 0, f.tell(), b"\n"
    while skipped < n:
        chunk = f.read(chunk_bytes)
        if not chunk:
            return skipped + (last != b"\n")
        ends = chunk.count(b"\n")
        if skipped + ends < n:
            skipped, pos, last = skipped + ends, pos + len(chunk), chunk[-1:]
            continue
        at = -1
        for _ in range(n - skipped):
            at = chunk.index(b"\n", at + 1)
        skipped, pos = n, pos + at + 1
    f.seek(pos)
    return skipped


def _count_lines(f: BinaryIO, chunk_bytes: int) -> int:
    """The lines from ``f``'s position to its end (a last line without its end counts)."""
    count, last = 0, b"\n"
    while chunk := f.read(chunk_bytes):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")
