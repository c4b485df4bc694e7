"""`musec compact ID` tells the truth about what it did (fresh-user finding F-8): a failed
summarising call exits 1 (the README's "an error reported"), and a summary that would make
the context larger is not applied and not called a compaction ("compacted: about 2418
tokens to 2533" before). Real daemon, a local Anthropic server answering in the recorded
format; its answer after the session's turns is the summary."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Musec
from tests.support.anthropic_server import Answer, AnthropicServer, error_response, message

MODEL = "anthropic/claude-sonnet-4-6"
ENV = {"ANTHROPIC_API_KEY": "test-key-not-real"}


def _turns() -> list[Answer]:
    calls = [message([{"type": "tool_use", "id": f"toolu_0{n}", "name": "bash",
                       "input": {"command": f"seq {n} {n + 300}"}}]) for n in range(4)]
    return [*calls, message([{"type": "text", "text": "counted"}])]


def _session(musec: Musec, repo: Path, server: AnthropicServer, env: dict[str, str]) -> str:
    server.enqueue(*_turns())
    proc = musec("run", "--model", MODEL, "--approval", "auto", "--agents", "none", "--output-format", "json", "count",
                 cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["session_id"]


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]


def test_a_failed_compaction_exits_1(musec: Musec, buggy_repo: Path) -> None:
    with AnthropicServer() as server:
        env = {**ENV, "ANTHROPIC_BASE_URL": server.base_url}
        sid = _session(musec, buggy_repo, server, env)
        server.enqueue(error_response(400, "invalid_request_error", "the summary request was refused"),
                       error_response(400, "invalid_request_error", "the summary request was refused"))
        proc = musec("compact", sid, cwd=buggy_repo, env=env)
        as_json = musec("compact", sid, "--json", cwd=buggy_repo, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "compacting failed" in proc.stderr and "Traceback" not in proc.stderr
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["done"] is False, as_json.stdout + as_json.stderr


def test_a_summary_that_does_not_shrink_the_context_is_not_applied(musec: Musec, buggy_repo: Path) -> None:
    long_summary = " ".join(f"detail-{i}" for i in range(30_000))  # far longer than the conversation
    with AnthropicServer() as server:
        env = {**ENV, "ANTHROPIC_BASE_URL": server.base_url}
        sid = _session(musec, buggy_repo, server, env)
        server.enqueue(message([{"type": "text", "text": long_summary}]))
        proc = musec("compact", sid, "--json", cwd=buggy_repo, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr  # nothing failed; nothing was gained
        reply = json.loads(proc.stdout)
        assert reply["done"] is False and "nothing gained" in reply["message"], reply
        assert reply["tokens_after"] >= reply["tokens_before"] > 0
        server.enqueue(message([{"type": "text", "text": "after"}]))
        again = musec("run", "--resume", sid, "--output-format", "json", "and now?", cwd=buggy_repo, env=env)
        assert again.returncode == 0 and json.loads(again.stdout)["result"] == "after", again.stdout + again.stderr
        # The next request carries the conversation as it was, not the long summary.
        sent = server.requests[-1].body["messages"]
        assert sent[0]["content"][0]["text"] == "count" and long_summary not in json.dumps(sent)
    [finished] = [e for e in _events(musec, sid) if e["type"] == "compaction_finished"]
    assert finished["applied"] is False
    assert json.loads(musec("replay", sid, "--json").stdout)["ok"]
