"""Every file is reached by the name the tools show, and a long line is read in parts
(fresh-user s8 J6): a name holding the byte 0xFF was shown ``bad\\xffname.py``, the same as
a file literally named so; glob listed the two alike and read_file and edit_file always hit
the literal one. And read_file showed a one-line 5 MB file's first 2,000 characters with no
way to read on (offset and limit count lines)."""

from __future__ import annotations

import os

import pytest
from musec.agents.tools import EditFileTool, GlobTool, ReadFileTool, ToolContext
from musec.agents.tools.files import LINE_PART_CHARS, MAX_LINE_CHARS, MAX_READ_FILE_BYTES

pytestmark = pytest.mark.anyio

glob, read_file, edit_file = GlobTool(), ReadFileTool(), EditFileTool()


async def test_a_name_that_is_not_utf8_and_its_escaped_spelling_are_both_reached(ctx: ToolContext) -> None:
    ws = os.fsencode(ctx.workspace)
    with open(ws + b"/bad\xffname.py", "wb") as f:
        f.write(b'print("latin1 name")\n')
    (ctx.workspace / "bad\\xffname.py").write_text('print("literal backslash name")\n')
    listed = (await glob.run({"pattern": "bad*"}, ctx)).content.splitlines()
    assert sorted(listed) == ["bad\\\\xffname.py", "bad\\xffname.py"], listed  # two names, told apart
    seen = {}
    for name in listed:
        result = await read_file.run({"path": name}, ctx)
        assert not result.is_error, result.content
        seen[name] = result.content
    assert "latin1 name" in seen["bad\\xffname.py"] and "literal backslash" in seen["bad\\\\xffname.py"], seen
    edited = await edit_file.run({"path": "bad\\xffname.py", "old_string": "print", "new_string": "PRINT"}, ctx)
    assert not edited.is_error, edited.content
    with open(ws + b"/bad\xffname.py", "rb") as f:
        assert f.read() == b'PRINT("latin1 name")\n'
    assert (ctx.workspace / "bad\\xffname.py").read_text() == 'print("literal backslash name")\n'
    # A name with backslashes and nothing that reads as an escape is shown as it is.
    (ctx.workspace / "a\\b.txt").write_text("ab\n")
    assert (await glob.run({"pattern": "a*"}, ctx)).content.splitlines() == ["a\\b.txt"]
    assert "ab" in (await read_file.run({"path": "a\\b.txt"}, ctx)).content


async def _read_whole_line(ctx: ToolContext, name: str) -> str:
    """Line 1 of ``name``, read in parts as the notes say."""
    first = (await read_file.run({"path": name}, ctx)).content
    assert f"read on with offset=1 column={MAX_LINE_CHARS + 1}" in first, first[-300:]
    parts, column, calls = [], 1, 0
    while True:
        result = await read_file.run({"path": name, "offset": 1, "column": column}, ctx)
        assert not result.is_error, result.content[-300:]
        body, _, note = result.content.partition("\n")
        parts.append(body.split("\t", 1)[1])
        calls += 1
        if not note:
            break
        assert note.startswith("[line 1: showed characters") and "pass offset=1 column=" in note, note
        column = int(note.rsplit("column=", 1)[1].split()[0])
    assert calls <= len("".join(parts)) // LINE_PART_CHARS + 1
    return "".join(parts)


async def test_a_long_line_is_read_in_parts(ctx: ToolContext) -> None:
    line = "".join(f"{i:08d}é" for i in range(MAX_READ_FILE_BYTES // 20))  # é: characters are not bytes
    (ctx.workspace / "one.txt").write_text(line + "\n")
    assert await _read_whole_line(ctx, "one.txt") == line
    past = await read_file.run({"path": "one.txt", "offset": 2, "column": 1}, ctx)
    assert past.is_error and "past the end" in past.content


async def test_a_long_line_of_a_big_file_is_read_in_parts(ctx: ToolContext) -> None:
    line = "".join(f"{i:08d}é" for i in range(5 * 1024 * 1024 // 10))  # 5 MB: read in chunks, not whole
    (ctx.workspace / "big.txt").write_text("first\n" + line)
    column = len(line) - LINE_PART_CHARS - 7
    near_end = await read_file.run({"path": "big.txt", "offset": 2, "column": column}, ctx)
    body, _, note = near_end.content.partition("\n")
    assert body == f"     2\t{line[column - 1 : column - 1 + LINE_PART_CHARS]}"
    assert note.startswith(f"[line 2: showed characters {column}-{column - 1 + LINE_PART_CHARS}")
    assert f"pass offset=2 column={column + LINE_PART_CHARS} to read on" in note
    end = await read_file.run({"path": "big.txt", "offset": 2, "column": column + LINE_PART_CHARS}, ctx)
    assert end.content == f"     2\t{line[column - 1 + LINE_PART_CHARS:]}\n"
