"""Options of `musec run` that cannot work, or would be silently ignored, are usage errors
up front: exit 2, one line, no session started (fresh-user finding F-11: `--sandbox
seatbelt` on Linux ran, and every command then failed; `--approve-plan` without a plan was
ignored). `--budget-usd` on a resume, ignored before, now caps what the resumed run spends."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import Musec
from tests.support.anthropic_server import Answer, AnthropicServer, message

OTHER_SANDBOX = "bwrap" if sys.platform == "darwin" else "seatbelt"


@pytest.mark.parametrize(("argv", "says"), [
    (["--sandbox", OTHER_SANDBOX, "task"], f"--sandbox {OTHER_SANDBOX}: "),
    (["--approve-plan", "task"], "--approve-plan approves a plan"),
    (["--plan", "--goal", "tests pass", "task"], "--plan only plans"),
    (["--resume", "abc", "--sandbox", "off"], "--sandbox is set when a session starts"),
    (["--continue", "--agents", "none"], "--agents is set when a session starts"),
    (["--continue", "--agents-model", "scripted:x"], "--agents-model is set when a session starts"),
    (["--continue", "--agents-budget-usd", "1"], "--agents-budget-usd is set when a session starts"),
    (["--continue", "--no-blackboard"], "--no-blackboard is set when a session starts"),
    (["--continue", "--trust"], "--trust is set when a session starts"),
    (["--resume", "abc", "--grill"], "--grill is set when a session starts"),
    (["--grill", "task"], "--grill questions a plan: add --plan"),  # F19: it was taken without a word
    (["--grill", "--approve-plan", "task"], "--grill questions a plan: add --plan"),
    (["--resume", "abc", "--workspace", "."], "--resume ID names the session itself"),
    (["--agents-budget-usd", "-1", "task"], "--agents-budget-usd must be"),
    (["--continue", "--budget-usd", "0"], "--budget-usd must be"),
])
def test_an_option_that_cannot_work_is_a_usage_error(argv: list[str], says: str, musec: Musec, buggy_repo: Path) -> None:
    proc = musec("run", *argv, cwd=buggy_repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("musec: ") and says in lines[0], lines
    assert musec.daemon_pid() is None  # refused before anything started


def test_budget_usd_on_a_resume_caps_the_resumed_run(musec: Musec, buggy_repo: Path) -> None:
    """Each answer costs $0.90 (60,000 output tokens at the catalog's price): the resumed
    run may spend $0.50 more than the session had, so it stops after its first answer
    (exit 4); before, the option was dropped and the run went on to its end."""
    def costly(blocks: list[dict]) -> Answer:
        return message(blocks, output_tokens=60_000)

    env = {"ANTHROPIC_API_KEY": "test-key-not-real"}
    with AnthropicServer() as server:
        env["ANTHROPIC_BASE_URL"] = server.base_url
        server.enqueue(costly([{"type": "text", "text": "first"}]),
                       costly([{"type": "tool_use", "id": "toolu_01A", "name": "bash", "input": {"command": "echo a"}}]),
                       costly([{"type": "text", "text": "end"}]))
        first = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--agents", "none", "--output-format", "json",
                      "one", cwd=buggy_repo, env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = json.loads(first.stdout)["session_id"]
        again = musec("run", "--resume", sid, "--approval", "auto", "--budget-usd", "0.5", "--output-format", "json",
                      "two", cwd=buggy_repo, env=env)
    assert again.returncode == 4, again.stdout + again.stderr + musec("log", sid).stdout
    result = json.loads(again.stdout)
    assert result["exit_reason"] == "budget", result


def test_a_retried_calls_broken_off_text_never_reaches_a_pipe(musec: Musec, buggy_repo: Path) -> None:
    """A stream that breaks off before message_stop is retried; stdout (a pipe here) had
    every failed attempt's partial answer before the real one (fresh user s5 F9)."""
    from dataclasses import replace

    cut = message([{"type": "text", "text": "hello from a broken stream"}])
    cut = replace(cut, chunks=cut.chunks[:-1], end="close")  # no message_stop: the connection drops
    env = {"ANTHROPIC_API_KEY": "test-key-not-real"}
    with AnthropicServer() as server:
        server.enqueue(cut, cut, message([{"type": "text", "text": "the whole answer"}]))
        env["ANTHROPIC_BASE_URL"] = server.base_url
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--agents", "none", "say hi",
                     cwd=buggy_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hello from a broken stream" not in proc.stdout, proc.stdout
    assert proc.stdout.count("the whole answer") == 1, proc.stdout
    assert "retrying the model call (1/" in proc.stdout  # the transcript still says what happened
