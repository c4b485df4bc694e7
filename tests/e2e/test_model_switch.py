"""End to end: ``musec run --resume ID --model M`` (issue 12 part 7) against the local
Anthropic and OpenAI Responses servers: the same model changes nothing; another
provider's model gets the history converted (opaque reasoning dropped whole, tool call
ids kept), the switch is logged, and replay re-derives every request."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Musec
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing, message
from tests.support.openai_server import OpenAIServer, check_responses_pairing, responses_stream

ANTHROPIC_KEY = "sk-ant-" + "api03-e2eTestKeyNeverReal-0123456789abcdef"  # fake; split so no key-shaped literal is committed
OPENAI_KEY = "sk-" + "proj-e2eTestKeyNeverReal-0123456789abcdef"


def _events(musec: Musec, session_id: str) -> list[dict]:
    proc = musec("log", session_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _run(musec: Musec, repo: Path, *args: str, env: dict[str, str]) -> dict:
    proc = musec("run", "--approval", "auto", "--output-format", "json", *args, cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_resume_with_the_same_model_and_with_another_providers_model(musec: Musec, buggy_repo: Path) -> None:
    with AnthropicServer() as anthropic, OpenAIServer() as openai:
        a_env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": anthropic.base_url}
        o_env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": openai.base_url}
        anthropic.enqueue(
            message([{"type": "thinking", "thinking": "Where is the pager?", "signature": "sig-anthropic-1=="},
                     {"type": "tool_use", "id": "toolu_01ReadPager", "name": "read_file", "input": {"path": "pager.py"}}]),
            message([{"type": "text", "text": "It slices from number * size."}]),
        )
        first = _run(musec, buggy_repo, "--model", "anthropic/claude-sonnet-4-6", "what does page() do?", env=a_env)
        sid = first["session_id"]

        # The same model, named again: nothing switches; the request keeps the signed thinking.
        anthropic.enqueue(message([{"type": "text", "text": "Yes, pages count from 1."}]))
        _run(musec, buggy_repo, "--resume", sid, "--model", "anthropic/claude-sonnet-4-6", "do pages count from 1?", env=a_env)
        same = anthropic.requests[-1].body
        assert same["model"] == "claude-sonnet-4-6"
        assert same["messages"][1]["content"][0] == {"type": "thinking", "thinking": "Where is the pager?",
                                                     "signature": "sig-anthropic-1=="}
        assert not [e for e in _events(musec, sid) if e["type"] == "model_switched"]

        # Another provider's model: the history goes to OpenAI without Anthropic's thinking,
        # with the tool call and its result under the same id.
        openai.enqueue(responses_stream([
            {"type": "reasoning", "encrypted_content": "gAAAA-openai-secret", "summary": "look at edit"},
            {"type": "function_call", "call_id": "call_02Grep", "name": "grep", "arguments": '{"pattern": "start ="}'}]),
            responses_stream([{"type": "message", "text": "Line 8 computes the start."}]))
        _run(musec, buggy_repo, "--resume", sid, "--model", "openai/gpt-5", "where is the start computed?", env=o_env)
        body = openai.requests[0].body
        assert body["model"] == "gpt-5"
        items = body["input"]
        assert not any("sig-anthropic-1" in json.dumps(i) for i in items)
        calls = [i for i in items if i["type"] == "function_call"]
        outputs = [i for i in items if i["type"] == "function_call_output"]
        assert calls[0]["call_id"] == "toolu_01ReadPager" and outputs[0]["call_id"] == "toolu_01ReadPager"
        assert "def page" in outputs[0]["output"]
        check_responses_pairing(openai.requests)
        switched = [e for e in _events(musec, sid) if e["type"] == "model_switched"]
        assert len(switched) == 1
        assert switched[0]["model"] == "openai/gpt-5" and switched[0]["from_model"] == "anthropic/claude-sonnet-4-6"
        assert switched[0]["dropped_blocks"] == 1 and switched[0]["context_window_tokens"] > 0

        # And back: the session's model is now OpenAI's (a plain resume keeps it) ...
        openai.enqueue(responses_stream([{"type": "message", "text": "Still here."}]))
        _run(musec, buggy_repo, "--resume", sid, "still there?", env=o_env)
        assert openai.requests[-1].body["model"] == "gpt-5"
        assert any(i.get("encrypted_content") == "gAAAA-openai-secret" for i in openai.requests[-1].body["input"])
        # ... and back to Anthropic, the encrypted reasoning dropped, the call ids kept.
        anthropic.enqueue(message([{"type": "text", "text": "Back on Claude."}]))
        _run(musec, buggy_repo, "--resume", sid, "--model", "sonnet", "back?", env=a_env)
        back = anthropic.requests[-1].body
        assert back["model"] == "claude-sonnet-4-6"
        assert "gAAAA-openai-secret" not in json.dumps(back)
        check_tool_pairing([anthropic.requests[-1]])
        used = [b for m in back["messages"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        assert [b["id"] for b in used] == ["toolu_01ReadPager", "call_02Grep"]
    switches = [e for e in _events(musec, sid) if e["type"] == "model_switched"]
    assert [e["model"] for e in switches] == ["openai/gpt-5", "sonnet"]
    replay = musec.json("replay", sid, "--json")
    assert replay["ok"], replay
    assert musec("log", "verify", sid).returncode == 0


def test_a_switch_to_an_unknown_provider_is_a_clear_error_and_changes_nothing(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "hello"}]]}))
    first = _run(musec, buggy_repo, "--model", f"scripted:{script}", "hi", env={})
    proc = musec("run", "--resume", first["session_id"], "--model", "nosuch/model", "again", cwd=buggy_repo)
    assert proc.returncode == 2, proc.stderr
    assert "nosuch" in proc.stderr and "Traceback" not in proc.stderr
    assert not [e for e in _events(musec, first["session_id"]) if e["type"] == "model_switched"]
