"""Context accounting (agents/context.py): reported usage plus a calibrated estimate."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from musec.agents.context import (
    ContextMeter,
    ContextUse,
    block_chars,
    over,
    prompt_tokens,
    request_chars,
)
from musec.agents.core.conversation import (
    Message,
    ModelRequest,
    ReasoningBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
    Usage,
)

TOOLS = [ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})]


def _history(n: int, result_chars: int = 4000) -> list[Message]:
    out = [Message("user", [TextBlock("fix the failing test")])]
    for i in range(n):
        out.append(Message("assistant", [TextBlock("reading"), ToolCallBlock(f"toolu_{i}", "read_file", {"path": f"f{i}.py"})]))
        out.append(Message("user", [ToolResultBlock(f"toolu_{i}", "x" * result_chars)]))
    return out


def test_block_chars_counts_what_a_provider_reads():
    assert block_chars(TextBlock("hello")) == 5
    assert block_chars(ToolResultBlock("c1", "a" * 40)) == 40
    call = ToolCallBlock("c1", "bash", {"command": "ls"})
    assert block_chars(call) == len("bash") + len('{"command":"ls"}')
    raw = ToolCallBlock("c1", "bash", {"command": "ls"}, raw_input='{"command": "ls"}')
    assert block_chars(raw) == len("bash") + len('{"command": "ls"}')
    assert block_chars(ThinkingBlock("think", "sig" * 100)) == 5
    assert block_chars(ReasoningBlock({"encrypted_content": "e" * 400}, summary="s")) == 101


def test_before_any_report_the_whole_request_is_estimated_at_the_provider_default():
    meter = ContextMeter(window_tokens=200_000)
    meter.on_request("anthropic", 0)  # names the provider
    messages = _history(3)
    use, chars = meter.measure("system prompt", TOOLS, messages)
    assert chars == request_chars(ModelRequest("m", "system prompt", messages, TOOLS))
    assert not use.calibrated and use.chars_per_token == 3.5
    assert use.reported_tokens == 0 and use.tokens == use.estimated_tokens == -(-chars // 3.5)


def test_after_a_report_the_estimate_covers_only_what_was_added_and_is_calibrated():
    meter = ContextMeter(window_tokens=100_000)
    messages = _history(5)
    use0, chars0 = meter.measure("sys", TOOLS, messages)
    meter.on_request("anthropic", chars0)
    # the provider read 2.5 characters per token (a dense tokenization), and wrote 300 tokens
    usage = Usage(input_tokens=100, cache_read_tokens=int(chars0 / 2.5) - 150, cache_write_tokens=50, output_tokens=300)
    answer = Message("assistant", [TextBlock("a" * 900)])
    meter.on_response(usage, sum(block_chars(b) for b in answer.content))
    messages.append(answer)
    use1, chars1 = meter.measure("sys", TOOLS, messages)
    assert use1.calibrated and abs(use1.chars_per_token - 2.5) < 0.01
    assert use1.reported_tokens == prompt_tokens(usage) + 300
    assert use1.estimated_tokens == 0  # nothing beyond the answer, which the report counts
    messages.append(Message("user", [ToolResultBlock("t", "r" * 2500)]))
    use2, _ = meter.measure("sys", TOOLS, messages)
    assert use2.estimated_tokens == 1000  # 2,500 characters at 2.5 per token
    assert use2.tokens == use1.tokens + 1000
    assert use2.percent == round(100 * use2.tokens / 100_000, 1)
    assert use2.fields() == {"context_tokens": use2.tokens, "context_window_tokens": 100_000,
                             "context_percent": use2.percent}


def test_a_history_that_shrinks_estimates_less_than_the_report():
    """Clearing old results makes the next request smaller than the last one reported."""
    meter = ContextMeter(window_tokens=50_000)
    messages = _history(10)
    _, chars = meter.measure("", TOOLS, messages)
    meter.on_request("openai", chars)
    meter.on_response(Usage(input_tokens=chars // 4), 0)
    cleared = [m if i < 3 else Message(m.role, [ToolResultBlock(b.call_id, "[cleared]") if isinstance(b, ToolResultBlock) else b
                                                   for b in m.content]) for i, m in enumerate(messages)]
    use, _ = meter.measure("", TOOLS, cleared)  # a new list: counted again from the start
    assert use.estimated_tokens < 0 and use.tokens < chars // 4


def test_a_usage_without_prompt_tokens_leaves_the_meter_estimating():
    meter = ContextMeter(window_tokens=None)
    _, chars = meter.measure("", TOOLS, _history(2))
    meter.on_request("scripted", chars)
    meter.on_response(Usage(), 0)
    use, _ = meter.measure("", TOOLS, _history(2))
    assert use.reported_tokens == 0 and not use.calibrated
    assert use.percent is None and use.fields()["context_percent"] == -1.0 and not over(use, 0.1)


def test_an_implausible_ratio_is_not_taken_as_calibration():
    meter = ContextMeter(200_000)
    meter.on_request("openai-compat", 1000)
    meter.on_response(Usage(input_tokens=1), 0)  # a proxy counting something else
    assert meter.chars_per_token() == (3.7, False)


def test_calibration_is_kept_per_provider_across_a_switch():
    meter = ContextMeter(200_000)
    meter.on_request("anthropic", 3000)
    meter.on_response(Usage(input_tokens=1000), 0)
    assert meter.chars_per_token() == (3.0, True)
    meter.switch(400_000)
    meter.on_request("openai", 4000)
    assert meter.chars_per_token() == (4.0, False)
    meter.on_response(Usage(input_tokens=800), 0)
    assert meter.chars_per_token() == (5.0, True)
    meter.on_request("anthropic", 10)
    assert meter.chars_per_token() == (3.0, True)


def test_over_and_describe():
    use = ContextUse(tokens=170_000, window_tokens=200_000)
    assert over(use, 0.85) and not over(use, 0.9)
    assert use.describe() == "170k tokens, 85% of 200k"
    assert ContextUse(tokens=1234, window_tokens=None).describe() == "1.2k tokens"


@given(st.lists(st.sampled_from(["append", "replace_last", "new_list"]), max_size=40), st.integers(0, 50))
def test_the_kept_prefix_count_always_equals_a_count_from_scratch(steps, seed):
    """Appending, replacing the last message and assigning a new list, in any order."""
    meter = ContextMeter(1000)
    messages: list[Message] = [Message("user", [TextBlock("t" * seed)])]
    for n, step in enumerate(steps):
        if step == "append":
            messages.append(Message("assistant" if n % 2 else "user", [TextBlock("a" * (n + seed))]))
        elif step == "replace_last":
            messages[-1] = Message(messages[-1].role, [*messages[-1].content, ToolResultBlock("c", "r" * n)])
        else:
            messages = [Message(m.role, [TextBlock("z")]) for m in messages]
        _, chars = meter.measure("s", TOOLS, messages)
        assert chars == request_chars(ModelRequest("m", "s", messages, TOOLS))


def test_tokens_of_a_message_at_the_calibrated_ratio():
    meter = ContextMeter(1000)
    meter.on_request("anthropic", 3000)
    meter.on_response(Usage(input_tokens=1000), 0)
    assert meter.tokens_of(Message("user", [TextBlock("x" * 300)])) == 100
    assert meter.tokens_of(301) == 101
