"""edit_file stays linear in the file's size (issue 13, case 11).

Timing is not asserted closely (the machine is shared): each call must finish within a
bound tens of times above what the linear code needs, where the quadratic code it
replaces took minutes. ``bench/edit_replace_all.py`` measures the ratios.
"""

from __future__ import annotations

import anyio
import pytest
from musec.agents.tools import EditFileTool, ToolContext

pytestmark = pytest.mark.anyio

edit_file = EditFileTool()
GENEROUS_S = 60


def _lines(count: int, width: int = 80) -> bytes:
    """``count`` lines of ``width`` bytes (newline included), each ending in `target`."""
    return b"".join(b"%06d " % i + b"a" * (width - 15) + b" target\n" for i in range(count))


async def test_replace_all_on_1mb_with_13107_matches(ctx: ToolContext) -> None:
    path = ctx.workspace / "big.txt"
    data = _lines(13_107)
    assert len(data) == 1_048_560
    path.write_bytes(data)
    with anyio.fail_after(GENEROUS_S):
        result = await edit_file.run(
            {"path": "big.txt", "old_string": "target", "new_string": "T", "replace_all": True},
            ctx,
        )
    assert not result.is_error, result.content
    assert "replaced 13107 occurrences (lines 1, 2, 3," in result.content
    assert path.read_bytes() == data.replace(b"target", b"T")


async def test_replace_all_on_7mb_finishes(ctx: ToolContext) -> None:
    path = ctx.workspace / "huge.txt"
    data = _lines(91_750)
    path.write_bytes(data)
    with anyio.fail_after(GENEROUS_S):
        result = await edit_file.run(
            {"path": "huge.txt", "old_string": "target", "new_string": "TT", "replace_all": True},
            ctx,
        )
    assert not result.is_error, result.content
    assert "replaced 91750 occurrences" in result.content
    assert path.read_bytes() == data.replace(b"target", b"TT")


async def test_not_unique_on_a_big_file_lists_the_first_lines(ctx: ToolContext) -> None:
    path = ctx.workspace / "huge.txt"
    path.write_bytes(_lines(91_750))
    with anyio.fail_after(GENEROUS_S):
        result = await edit_file.run(
            {"path": "huge.txt", "old_string": "target", "new_string": "T"}, ctx
        )
    assert result.is_error
    assert "occurs 91750 times in huge.txt (lines 1, 2, 3," in result.content
    assert ", 20, ..." in result.content


async def test_no_match_in_a_long_file_still_points_at_the_closest_lines(ctx: ToolContext) -> None:
    """Scoring every window of 49,999 lines against a 60-line old_string was quadratic."""
    lines = [f"value_{i} = compute({i}, {i * 7 % 13})" for i in range(49_999)]
    path = ctx.workspace / "long.py"
    path.write_text("\n".join(lines) + "\n")
    wanted = lines[30_000:30_060]
    wanted[5] = wanted[5].replace("compute", "compte")  # a typo: not found as is
    with anyio.fail_after(GENEROUS_S):
        result = await edit_file.run(
            {"path": "long.py", "old_string": "\n".join(wanted), "new_string": "x"}, ctx
        )
    assert result.is_error
    assert "the closest text is at lines 30001-30060" in result.content


async def test_no_match_with_no_common_line_still_finds_a_similar_one(ctx: ToolContext) -> None:
    path = ctx.workspace / "long.py"
    lines = [f"item{i:05d} = {i}" for i in range(40_000)]
    lines[12_345] = "def compute_total(items, tax_rate):"
    path.write_text("\n".join(lines) + "\n")
    with anyio.fail_after(GENEROUS_S):
        result = await edit_file.run(
            {
                "path": "long.py",
                "old_string": "def compute_totals(items, taxrate):",
                "new_string": "x",
            },
            ctx,
        )
    assert result.is_error
    assert "the closest text is at line 12346" in result.content
