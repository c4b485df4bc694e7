"""The tool-output budget and the clearing stubs (agents/budget.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from musec.agents.budget import (
    ContextConfig,
    Whole,
    clear_stub,
    clearable_calls,
    fit_to_budget,
    kept_note,
)
from musec.agents.core.conversation import Message, TextBlock, ToolCallBlock, ToolResultBlock


def _numbered(n: int) -> str:
    return "".join(f"{i:6}\tline {i} of the file\n" for i in range(1, n + 1))


def test_within_the_budget_the_result_is_untouched():
    text = _numbered(100)
    assert fit_to_budget(text, 10_000, tool="bash", input={}, blob_path="/b/aa/bb") is text
    assert fit_to_budget(text, 0, tool="bash", input={}, blob_path="/b/aa/bb") is text


def test_over_the_budget_head_and_tail_whole_lines_and_a_note_how_to_read_the_rest():
    text = _numbered(20_000)
    out = fit_to_budget(text, 1000, tool="bash", input={"command": "cat big"}, blob_path="/state/blobs/ab/cd")
    assert len(out) < 3000 + 600
    head, note, tail = out.partition("\n[... ")[0], out.partition("\n[... ")[2].partition("]\n")[0], out.partition("]\n")[2]
    assert text.startswith(head) and text.endswith(tail)
    assert head.endswith("\n") and ("\n" + tail) in text  # cut at line ends
    assert "1,000-token budget" in note and "/state/blobs/ab/cd" in note
    assert "read_file(path='/state/blobs/ab/cd', offset=" in note and "grep(" in note
    assert f"of {20_000:,}" in note


def test_the_note_counts_what_the_tool_produced_not_what_it_showed():
    """A command's output capped by the tool (its own marker in the middle) and then cut to
    the budget: the note gives the whole output's bytes and lines and a read offset in the
    blob (the fresh user's 50 MB case was told "10 lines left out ... of 15,003")."""
    blob = "".join(f"y{i}\n" for i in range(1, 300_001)).encode()
    shown = blob[:15_000].decode() + "\n[... 2,000,000 bytes omitted ...]\n" + blob[-15_000:].decode() + "exit status: 0"
    out = fit_to_budget(shown, 1000, tool="bash", input={}, blob_path="/b/cd", whole=Whole.of_blob(len(blob), blob))
    note = out.partition("\n[... ")[2].partition("]\n")[0]
    head_lines = out.partition("\n[... ")[0].count("\n")
    assert f"of {300_000:,}" in note and f"({300_000:,} lines, {len(blob):,} bytes) is kept" in note
    assert f"offset={head_lines + 1}," in note and blob.decode().startswith(out.partition("\n[... ")[0])
    lost = Whole(produced_bytes=50_000_000, kept_bytes=32 * 1024 * 1024, kept_lines=5_000_000)
    note = fit_to_budget(shown, 1000, tool="bash", input={}, blob_path="/b/cd", whole=lost)
    assert "was 50,000,000 bytes" in note and "first and last 16,777,216 bytes" in note and "of 5,000,000" in note
    within = kept_note("bash", Whole.of_blob(len(blob), blob), "/b/cd")
    assert f"was {len(blob):,} bytes" in within and "all 300,000 lines" in within and "read_file(path='/b/cd'" in within


def test_a_read_file_result_points_at_the_file_itself():
    out = fit_to_budget(_numbered(20_000), 500, tool="read_file", input={"path": "src/big.py"}, blob_path="/b/ab/cd")
    assert "read_file(path='src/big.py', offset=N, limit=M)" in out and "grep(pattern=..., path='src/big.py')" in out


@given(st.text(min_size=0, max_size=3000), st.integers(1, 300))
def test_the_cut_keeps_a_prefix_and_a_suffix_of_the_text(text, budget):
    out = fit_to_budget(text, budget, tool="grep", input={}, blob_path="/b/x")
    if out is text:
        assert len(text) <= budget * 3
        return
    head, _, rest = out.partition("\n[... ")
    tail = rest.partition("]\n")[2]
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) <= budget * 3


def test_clearable_calls_keep_the_most_recent_and_skip_the_cleared():
    messages = [Message("user", [TextBlock("task")])]
    for i in range(6):
        messages.append(Message("assistant", [ToolCallBlock(f"c{i}", "bash", {"command": "ls"})]))
        messages.append(Message("user", [ToolResultBlock(f"c{i}", "out")]))
    assert clearable_calls(messages, keep=2, cleared=set()) == ["c0", "c1", "c2", "c3"]
    assert clearable_calls(messages, keep=2, cleared={"c0", "c1"}) == ["c2", "c3"]
    assert clearable_calls(messages, keep=10, cleared=set()) == []


def test_the_stub_names_the_call_and_where_the_result_is():
    stub = clear_stub(ToolCallBlock("c9", "read_file", {"path": "a.py"}), ToolResultBlock("c9", "x" * 400), "/b/ab/cd")
    assert stub.startswith('[result of read_file {"path":"a.py"} (call c9, ~100 tokens) cleared')
    assert "read_file(path='/b/ab/cd')" in stub and "\n" not in stub


def test_the_config_table_is_checked():
    assert ContextConfig.from_table(None, "c.toml") == ContextConfig()
    got = ContextConfig.from_table({"tool_output_tokens": 2000, "clear_at": 0.5}, "c.toml")
    assert got.tool_output_tokens == 2000 and got.clear_at == 0.5
    with pytest.raises(ValueError, match=r"\[context\].clear_at must be between 0.0 and 1.0"):
        ContextConfig.from_table({"clear_at": 2}, "c.toml")
    with pytest.raises(ValueError, match=r"tool_output_tokens must be an integer"):
        ContextConfig.from_table({"tool_output_tokens": "big"}, "c.toml")
    with pytest.raises(ValueError, match="must be a table"):
        ContextConfig.from_table(3, "c.toml")


def test_clear_results_replaces_only_the_named_results_and_keeps_the_rest_as_they_are():
    from musec.agents.budget import clear_results

    messages = [Message("user", [TextBlock("task")])]
    for i in range(3):
        messages.append(Message("assistant", [ToolCallBlock(f"c{i}", "grep", {"pattern": f"p{i}"})]))
        messages.append(Message("user", [ToolResultBlock(f"c{i}", f"result {i} " * 50, is_error=i == 1)]))
    out = clear_results(messages, {"c0": "/b/aa/00", "c1": "/b/aa/11"})
    assert out is not messages and len(out) == len(messages)
    assert [n for n, (a, b) in enumerate(zip(out, messages, strict=True)) if a is not b] == [2, 4]
    assert out[2].content[0].content.startswith('[result of grep {"pattern":"p0"} (call c0')
    assert "/b/aa/00" in out[2].content[0].content and out[4].content[0].is_error
