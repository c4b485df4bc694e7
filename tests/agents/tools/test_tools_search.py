"""glob and grep through the real ripgrep, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from musec.agents.tools import GlobTool, GrepTool, ToolContext
from musec.agents.tools.search import MAX_GLOB_RESULTS, find_ripgrep

pytestmark = pytest.mark.anyio

glob, grep = GlobTool(), GrepTool()


def write(root: Path, name: str, text: str = "", mtime: int | None = None) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_ripgrep_is_found() -> None:
    rg = find_ripgrep()
    assert rg is not None and os.access(rg, os.X_OK)


async def test_glob_sorts_newest_first_relative_to_the_workspace(ctx: ToolContext) -> None:
    ws = ctx.workspace
    write(ws, "old.py", mtime=1_000_000)
    write(ws, "src/new.py", mtime=3_000_000)
    write(ws, "src/mid.py", mtime=2_000_000)
    write(ws, "notes.txt")
    result = await glob.run({"pattern": "*.py"}, ctx)
    assert not result.is_error
    assert result.content == "src/new.py\nsrc/mid.py\nold.py\n"
    sub = await glob.run({"pattern": "*.py", "path": "src"}, ctx)
    assert sub.content == "src/new.py\nsrc/mid.py\n"


async def test_glob_respects_gitignore_and_skips_dot_git(ctx: ToolContext) -> None:
    ws = ctx.workspace
    write(ws, ".gitignore", "build/\n*.log\n")
    write(ws, "build/out.py")
    write(ws, "debug.log")
    write(ws, "keep.py")
    write(ws, ".github/workflows/ci.yml")
    write(ws, ".git/config")
    result = await glob.run({"pattern": "**"}, ctx)
    names = set(result.content.split())
    assert names == {".gitignore", "keep.py", ".github/workflows/ci.yml"}


async def test_glob_path_anchored_patterns(ctx: ToolContext) -> None:
    write(ctx.workspace, "pkg/a/x.ts")
    write(ctx.workspace, "pkg/b/y.ts")
    write(ctx.workspace, "other/z.ts")
    result = await glob.run({"pattern": "pkg/**/*.ts"}, ctx)
    assert set(result.content.split()) == {"pkg/a/x.ts", "pkg/b/y.ts"}


async def test_glob_caps_the_count(ctx: ToolContext) -> None:
    for i in range(MAX_GLOB_RESULTS + 5):
        write(ctx.workspace, f"f{i:03}.txt")
    result = await glob.run({"pattern": "*.txt"}, ctx)
    lines = result.content.splitlines()
    assert len(lines) == MAX_GLOB_RESULTS + 1
    assert f"of {MAX_GLOB_RESULTS + 5} files" in lines[-1]


async def test_glob_no_match_and_errors(ctx: ToolContext) -> None:
    none = await glob.run({"pattern": "*.rs"}, ctx)
    assert not none.is_error and "no files match" in none.content
    bad = await glob.run({"pattern": " "}, ctx)
    assert bad.is_error and "pattern is empty" in bad.content and "\n" not in bad.content
    write(ctx.workspace, "[odd")
    literal = await glob.run({"pattern": "[odd"}, ctx)  # an unclosed class is literal
    assert literal.content == "[odd\n"
    write(ctx.workspace, "file.txt")
    not_dir = await glob.run({"pattern": "*", "path": "file.txt"}, ctx)
    assert not_dir.is_error and "not a directory" in not_dir.content
    missing = await glob.run({}, ctx)
    assert missing.is_error and "`pattern` is required" in missing.content


async def test_grep_lines_with_paths_and_numbers(ctx: ToolContext) -> None:
    write(ctx.workspace, "src/a.py", "import os\ndef main():\n    os.exit(0)\n")
    write(ctx.workspace, "b.txt", "nothing here\n")
    result = await grep.run({"pattern": r"os\.\w+"}, ctx)
    assert not result.is_error
    assert result.content == "src/a.py:3:    os.exit(0)\n"


async def test_grep_options(ctx: ToolContext) -> None:
    write(ctx.workspace, "a.py", "Hello\n")
    write(ctx.workspace, "b.md", "hello\n")
    write(ctx.workspace, "sub/c.py", "HELLO\n")
    write(ctx.workspace, ".gitignore", "ignored.py\n")
    write(ctx.workspace, "ignored.py", "hello\n")
    assert (await grep.run({"pattern": "hello"}, ctx)).content == "b.md:1:hello\n"
    both = await grep.run({"pattern": "hello", "ignore_case": True, "glob": "*.py"}, ctx)
    assert sorted(both.content.splitlines()) == ["a.py:1:Hello", "sub/c.py:1:HELLO"]
    in_dir = await grep.run({"pattern": "hello", "ignore_case": True, "path": "sub"}, ctx)
    assert in_dir.content == "sub/c.py:1:HELLO\n"
    one_file = await grep.run({"pattern": "H", "path": "a.py"}, ctx)
    assert one_file.content == "a.py:1:Hello\n"


async def test_grep_no_matches_is_not_an_error(ctx: ToolContext) -> None:
    write(ctx.workspace, "a.txt", "abc\n")
    result = await grep.run({"pattern": "xyz"}, ctx)
    assert not result.is_error
    assert result.content == "no matches for 'xyz'"


async def test_grep_bad_regex_is_a_one_line_error(ctx: ToolContext) -> None:
    write(ctx.workspace, "a.txt", "abc\n")
    result = await grep.run({"pattern": "a(b"}, ctx)
    assert result.is_error
    assert result.content.startswith("grep failed: regex parse error")
    assert "\n" not in result.content


async def test_grep_output_is_capped(make_ctx) -> None:
    ctx = make_ctx(max_output_bytes=2000)
    write(ctx.workspace, "many.txt", "".join(f"match {i}\n" for i in range(20_000)))
    result = await grep.run({"pattern": "match"}, ctx)
    assert not result.is_error
    body, note = result.content.rsplit("[output capped", 1)
    assert len(body.encode()) <= 2000
    assert body.endswith("\n")  # cut at a line boundary
    assert "narrow the pattern" in note


async def test_grep_missing_path(ctx: ToolContext) -> None:
    result = await grep.run({"pattern": "x", "path": "nope"}, ctx)
    assert result.is_error and "does not exist" in result.content
