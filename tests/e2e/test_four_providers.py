"""End to end: the same task (fix ``buggy_repo``) through all four HTTP providers.

Each run is the real ``musec`` CLI and daemon against a real local server speaking the
provider's API; each ends with the library's tests passing, the server having seen every
tool call answered by its id, and the log naming the provider, endpoint and catalog entry
of every model call. Also here, through the daemon: the shared rate limiter's waits in
the log, and the trains_on_data guard.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import BUGGY, FIXED, Musec, run_library_tests
from tests.e2e.test_fix_bug import _anthropic_turns
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing
from tests.support.openai_server import (
    OpenAIServer,
    chat_stream,
    check_chat_pairing,
    check_responses_pairing,
    responses_stream,
)

TEST = "python3 -m unittest -q 2>&1"
# The fix as (call id, tool, input) steps, then the final text.
STEPS = [
    ("call_RunTests01", "bash", {"command": TEST}),
    ("call_ReadPager02", "read_file", {"path": "pager.py"}),
    ("call_EditPager03", "edit_file", {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}),
    ("call_RunAgain04", "bash", {"command": TEST}),
]
DONE = "Pages count from 1; fixed the off-by-one and the tests pass."


def _responses_turns() -> list:
    turns = [responses_stream([{"type": "function_call", "call_id": cid, "name": name,
                                "arguments": json.dumps(args)}]) for cid, name, args in STEPS]
    return [*turns, responses_stream([{"type": "message", "text": DONE}])]


def _chat_turns() -> list:
    turns = [chat_stream(tool_calls=[{"id": cid, "name": name, "arguments": json.dumps(args)}])
             for cid, name, args in STEPS]
    return [*turns, chat_stream(DONE)]


def _key(name: str) -> str:
    return "sk-" + f"e2e-{name}-NeverReal-0123456789abcdef"  # fake; built so no key-shaped literal is committed


def _events(musec: Musec, session_id: str) -> list[dict]:
    proc = musec("log", session_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


CASES = {
    "anthropic": ("anthropic/claude-sonnet-4-6", AnthropicServer, _anthropic_turns, check_tool_pairing,
                  lambda s, k: {"ANTHROPIC_API_KEY": k, "ANTHROPIC_BASE_URL": s.base_url}),
    "openai": ("openai/gpt-5", OpenAIServer, _responses_turns, check_responses_pairing,
               lambda s, k: {"OPENAI_API_KEY": k, "OPENAI_BASE_URL": s.base_url}),
    "azure": ("azure/my-gpt5-deployment", OpenAIServer, _responses_turns, check_responses_pairing,
              lambda s, k: {"AZURE_OPENAI_API_KEY": k, "AZURE_OPENAI_ENDPOINT": s.endpoint}),
    "openai-compat": ("openai-compat/qwen3-coder", OpenAIServer, _chat_turns, check_chat_pairing,
                      lambda s, k: {"OPENAI_API_KEY": k, "OPENAI_BASE_URL": s.base_url}),
}


@pytest.mark.parametrize("provider", list(CASES))
def test_the_same_task_through_each_provider(musec: Musec, buggy_repo: Path, provider: str) -> None:
    model, server_class, turns, check_pairing, credentials = CASES[provider]
    key = _key(provider)
    with server_class() as server:
        server.enqueue(*turns())
        proc = musec("run", "--model", model, "--approval", "auto", "--output-format", "json",
                     "make the tests pass", cwd=buggy_repo, env=credentials(server, key))
        requests = list(server.requests)
        host = server.base_url.split("//")[1].split("/")[0]
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["exit_reason"] == "finished", result
    assert run_library_tests(buggy_repo).returncode == 0
    assert FIXED in (buggy_repo / "pager.py").read_text()
    assert len(requests) == 5
    check_pairing(requests)
    sent = json.dumps([r.body for r in requests[-1:]])
    assert "OK" in sent  # the last tool result (the passing tests) reached the model
    if provider == "azure":
        assert all(r.headers["api-key"] == key and "api-version=" in r.path for r in requests)
    elif provider == "anthropic":
        assert all(r.headers["x-api-key"] == key for r in requests)
    else:
        assert all(r.headers["authorization"] == f"Bearer {key}" for r in requests)
    events = _events(musec, result["session_id"])
    calls = [e for e in events if e["type"] in ("model_request", "model_response")]
    assert len(calls) == 10
    for event in calls:
        assert (event["provider"], event["endpoint"], event["catalog_id"]) == (provider, host, model), event
    assert {e["model"] for e in calls if e["type"] == "model_request"} == {model.split("/", 1)[1]}
    verify = musec("log", "verify", result["session_id"])
    assert verify.returncode == 0, verify.stdout


def test_rate_limit_waits_are_logged(musec: Musec, buggy_repo: Path) -> None:
    """The server allows one request per 0.2 s: the daemon's limiter waits, and says so."""
    with AnthropicServer() as server:
        server.headers_for = lambda number: {  # type: ignore[method-assign]
            "anthropic-ratelimit-requests-limit": "1",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": (datetime.now(UTC) + timedelta(seconds=0.2)).isoformat(),
        }
        server.enqueue(*_anthropic_turns())
        proc = musec("run", "--model", "sonnet", "--approval", "auto", "--output-format", "json", "fix it",
                     cwd=buggy_repo, env={"ANTHROPIC_API_KEY": _key("limits"), "ANTHROPIC_BASE_URL": server.base_url})
    assert proc.returncode == 0, proc.stderr
    events = _events(musec, json.loads(proc.stdout)["session_id"])
    waits = [e for e in events if e["type"] == "rate_limited"]
    assert waits and all(e["reason"] == "requests" and 0 < e["wait_s"] <= 0.21 for e in waits)
    assert all(_key("limits") not in e["credential"] and e["credential"].startswith("anthropic:127.0.0.1:")
               for e in waits)


def test_training_tier_refused_unless_config_allows(musec: Musec, buggy_repo: Path) -> None:
    config = musec.home / "config"
    config.mkdir(exist_ok=True)
    with OpenAIServer() as server:
        (config / "models.toml").write_text(
            f'[models."openai-compat/free-tier"]\nbase_url = "{server.base_url}"\ntrains_on_data = true\n'
        )
        refused = musec("run", "--model", "openai-compat/free-tier", "--approval", "auto", "fix it", cwd=buggy_repo)
        assert refused.returncode == 2, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "trains_on_data" in lines[0] and "allow_training_data = true" in lines[0], lines
        assert server.requests == []

        (config / "config.toml").write_text(f'[workspaces."{buggy_repo}"]\nallow_training_data = true\n')
        server.enqueue(*_chat_turns())
        allowed = musec("run", "--model", "openai-compat/free-tier", "--approval", "auto", "--output-format", "json",
                        "fix it", cwd=buggy_repo)
    assert allowed.returncode == 0, allowed.stderr
    assert run_library_tests(buggy_repo).returncode == 0
