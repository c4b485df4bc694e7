"""Property tests: edit_file on real files keeps line endings, BOM, final newline, text."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from musec.agents.tools import EditFileTool, SandboxPolicy, ToolContext, ToolOutput

LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\0\ufeff"),
    max_size=10,
)


def run_edit(content: bytes, input: dict) -> tuple[ToolOutput, bytes]:
    """Write ``content`` to a fresh workspace, run edit_file on it, return the result and bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp).resolve()
        path = ws / "f.txt"
        path.write_bytes(content)
        ctx = ToolContext(workspace=ws, env={}, sandbox=SandboxPolicy(mode="off"))
        result = anyio.run(EditFileTool().run, {"path": "f.txt", **input}, ctx)
        return result, path.read_bytes()


def render(lines: list[str], ending: str, bom: bool, final_newline: bool) -> str:
    text = ending.join(lines) + (ending if final_newline else "")
    return ("\ufeff" if bom else "") + text


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(LINE, min_size=1, max_size=8),
    ending=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
    final_newline=st.booleans(),
    span=st.tuples(st.integers(0, 7), st.integers(1, 3)),
    replacement=st.lists(LINE, max_size=3),
)
def test_edit_keeps_line_endings_bom_and_final_newline(
    lines: list[str],
    ending: str,
    bom: bool,
    final_newline: bool,
    span: tuple[int, int],
    replacement: list[str],
) -> None:
    start = span[0] % len(lines)
    old = "\n".join(lines[start : start + span[1]])  # models write LF
    new = "\n".join(replacement)
    doc_lf = "\n".join(lines) + ("\n" if final_newline else "")
    assume(old and old != new and doc_lf.count(old) == 1 and len(_overlapping(doc_lf, old)) == 1)
    assume(ending == "\n" or "\n" in doc_lf)  # a one-line file without newline has no style
    result, after = run_edit(
        render(lines, ending, bom, final_newline).encode(), {"old_string": old, "new_string": new}
    )
    assert not result.is_error, result.content
    expected_lf = doc_lf.replace(old, new)
    expected = ("\ufeff" if bom else "") + expected_lf.replace("\n", ending)
    assert after.decode("utf-8") == expected


def _overlapping(text: str, needle: str) -> list[int]:
    return [i for i in range(len(text)) if text.startswith(needle, i)]


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(LINE, min_size=1, max_size=6),
    ending=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
    missing=st.text(alphabet="#@!", min_size=3, max_size=6),
)
def test_a_failed_edit_never_changes_the_file(
    lines: list[str], ending: str, bom: bool, missing: str
) -> None:
    content = render(lines, ending, bom, final_newline=True).encode()
    assume(missing not in content.decode())
    result, after = run_edit(content, {"old_string": missing, "new_string": "x"})
    assert result.is_error
    assert after == content
