"""The interactive client's parts without a terminal: what an approval shows, the status
line's fold, who answered in words, ``@path`` mentions."""

from __future__ import annotations

import io
from pathlib import Path

from musec.client.approvals import describe_call
from musec.client.interactive import mentions_note
from musec.client.render import Renderer
from musec.client.status import SessionStatus
from musec.daemon.protocol import ModelInfo


def test_a_multi_line_command_is_shown_line_by_line_not_joined() -> None:
    head, lines = describe_call({"tool": "bash", "input": {"command": "git status\nrm -rf ~/x"}})
    assert head == "bash with this command (2 lines)" and lines == ["git status", "rm -rf ~/x"]
    long = "echo " + "y" * 200
    assert describe_call({"tool": "bash", "input": {"command": long}})[1] == [long]
    assert describe_call({"tool": "bash", "input": {"command": "ls"}}) == ("bash(ls)", [])
    # Control characters are removed, never passed to the terminal.
    assert describe_call({"tool": "bash", "input": {"command": "ls\x1b]0;x\x07"}})[1] == ["ls]0;x"]


def test_the_status_line_folds_usage_cost_and_workers() -> None:
    status = SessionStatus("anthropic/claude-sonnet-4-6", "ask")
    status.learn_catalog([ModelInfo(id="anthropic/claude-sonnet-4-6", provider="anthropic", context_window_tokens=200_000)])
    assert "ctx 0% of 200k" in status.text()
    status.fold({"type": "model_response", "agent": "main", "cost_usd": 0.5,
                 "usage": {"input_tokens": 40_000, "output_tokens": 10_000}})
    status.fold({"type": "model_response", "agent": "scout", "cost_usd": 0.25, "usage": {"input_tokens": 190_000}})
    status.fold({"type": "worker_spawned", "worker": "a"})
    assert status.text() == "anthropic/claude-sonnet-4-6 · ctx 25% of 200k · $0.7500 · workers: 1 live · approval ask"
    status.fold({"type": "worker_finished", "worker": "a"})
    assert "workers" not in status.text()
    assert SessionStatus("openai-compat/x").context_text() == "ctx 0 tokens"


def test_the_status_line_takes_the_context_of_each_request_and_a_model_switch() -> None:
    status = SessionStatus("scripted:/x/s.json", "auto")
    status.fold({"type": "model_request", "agent": "main", "context_tokens": 3_000, "context_window_tokens": 100_000})
    assert "ctx 3% of 100k" in status.text()
    status.fold({"type": "model_response", "agent": "main", "usage": {"input_tokens": 0}})  # no report: kept
    status.fold({"type": "model_request", "agent": "worker:a", "context_tokens": 90_000, "context_window_tokens": 100_000})
    assert "ctx 3% of 100k" in status.text()
    status.fold({"type": "model_switched", "agent": "main", "model": "openai/gpt-5", "context_tokens": 3_500,
                 "context_window_tokens": 400_000})
    assert status.text().startswith("openai/gpt-5 · ctx 1% of 400k")


def test_who_answered_is_said_in_words() -> None:
    r = Renderer(io.StringIO(), color=False)
    r.answered.add("c1")
    r.event({"type": "approval_resolved", "call_id": "c1", "decision": "allow", "by": "client:abc123"})
    r.event({"type": "approval_resolved", "call_id": "c2", "decision": "deny", "by": "client:def456"})
    text = r.out.getvalue()
    assert "approval: allowed by you" in text and "approval: denied in another terminal" in text
    assert "client:" not in text


def test_mentions_of_existing_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    assert mentions_note("look at @a.py, not @missing.py", str(tmp_path)).endswith(
        "(attached by the person: a.py; read them before answering)")
    assert mentions_note("mail me@example.com", str(tmp_path)) == "mail me@example.com"
