"""The scripted model: turns from the request, expect_result, per-agent scripts."""

from __future__ import annotations

import json

import pytest
from musec.agents.core.conversation import (
    Message,
    ModelRequest,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from musec.agents.core.errors import ScriptError
from musec.agents.providers import make_provider
from musec.agents.providers.scripted import FINISHED_TEXT

pytestmark = pytest.mark.anyio

SCRIPT = {
    "turns": [
        [{"text": "Listing."}, {"tool": "bash", "input": {"command": "ls"}}, {"tool": "glob"}],
        [{"expect_result": "README"}, {"text": "Found it."}],
    ],
    "agents": {
        "worker:docs": {"turns": [[{"tool": "read_file", "input": {"path": "README.md"}}]]},
    },
}


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def request(*messages: Message) -> ModelRequest:
    return ModelRequest("", "", [Message("user", [TextBlock("go")]), *messages], [])


def after_first_turn(result: str) -> ModelRequest:
    return request(
        Message(
            "assistant",
            [
                TextBlock("Listing."),
                ToolCallBlock("toolu_scripted_0_0", "bash", {"command": "ls"}),
                ToolCallBlock("toolu_scripted_0_1", "glob", {}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultBlock("toolu_scripted_0_0", "x"),
                ToolResultBlock("toolu_scripted_0_1", result),
            ],
        ),
    )


async def test_turns_follow_the_request_and_finish(script, deltas):
    provider = make_provider(f"scripted:{script}", {})
    first = await provider.complete(request(), deltas)
    assert first.content == [
        TextBlock("Listing."),
        ToolCallBlock("toolu_scripted_0_0", "bash", {"command": "ls"}),
        ToolCallBlock("toolu_scripted_0_1", "glob", {}),
    ]
    assert first.stop_reason == "tool_use"
    second = await provider.complete(after_first_turn("README.md\nsetup.py"), deltas)
    assert second.content == [TextBlock("Found it.")] and second.stop_reason == "end_turn"
    # Stateless: asking for turn 0 again gives turn 0 again (replay, resume).
    assert (await provider.complete(request(), deltas)) == first
    history = after_first_turn("README.md").messages + [Message("assistant", second.content)]
    history.append(Message("user", [TextBlock("more?")]))
    done = await provider.complete(ModelRequest("", "", history, []), deltas)
    assert done.content == [TextBlock(FINISHED_TEXT)] and not done.tool_calls
    assert deltas.text() == "Listing.Found it.Listing." + FINISHED_TEXT


async def test_expect_result_mismatch_shows_expected_and_actual(script, deltas):
    provider = make_provider(f"scripted:{script}", {})
    actual = "no such file\n" + "x" * 5000
    with pytest.raises(ScriptError) as caught:
        await provider.complete(after_first_turn(actual), deltas)
    message = str(caught.value)
    assert "'README'" in message and "no such file" in message and "turn 1" in message
    assert len(message) < 1000  # the actual result is truncated


async def test_expect_result_without_any_tool_result(tmp_path, deltas):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": [[{"expect_result": "ok"}]]}))
    with pytest.raises(ScriptError, match="there is none"):
        await make_provider(f"scripted:{path}", {}).complete(request(), deltas)


async def test_per_agent_scripts_and_scoped_ids(script, deltas):
    worker = make_provider(f"scripted:{script}", {}, agent_id="worker:docs")
    answer = await worker.complete(request(), deltas)
    assert answer.tool_calls == [
        ToolCallBlock("toolu_scripted_worker-docs_0_0", "read_file", {"path": "README.md"})
    ]
    unnamed = make_provider(f"scripted:{script}", {}, agent_id="scout")
    assert (await unnamed.complete(request(), deltas)).text == FINISHED_TEXT


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read"),
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"turns": {}}', "turns must be a list"),
        ('{"turns": [{"text": "x"}]}', r"turns\[0\] must be a list"),
        ('{"turns": [[{"say": "x"}]]}', r"turns\[0\]\[0\] must have"),
        ('{"turns": [[{"tool": "bash", "input": [1]}]]}', "'input' must be an object"),
        ('{"agents": {"scout": []}}', "agents"),
    ],
)
def test_invalid_scripts_fail_with_one_line(tmp_path, content, problem):
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ScriptError, match=problem) as caught:
        make_provider(f"scripted:{path}", {})
    assert "\n" not in str(caught.value)
