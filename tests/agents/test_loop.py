"""The agent loop and the history fold in process, driven by the scripted model, no daemon.

A ``Run`` is what the daemon's session gives an agent, and nothing else: a real event log
in ``tmp_path`` (the recorder appends to it and folds the event into the agent's history)
and an approval desk that answers from a list. Replay is a fresh ``History`` folded from
the log read back from disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from musec.agents.core import events as ev
from musec.agents.core.conversation import ToolCallBlock, request_digest
from musec.agents.history import History
from musec.agents.loop import Agent, NeedsApproval
from musec.agents.providers.scripted import ScriptedProvider
from musec.agents.tools import default_tools
from musec.agents.tools.base import SandboxPolicy, Tool, ToolContext
from musec.daemon.eventlog import EventLog, read_events

pytestmark = pytest.mark.anyio

SECRET = "sk-ant-" + "test-0000-live-secret-value"  # issue 13 case 1's example, key-shaped on purpose


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"),
                        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


class Run:
    """One agent with a real log, a scripted model and the standard tools (no sandbox)."""

    def __init__(self, tmp_path: Path, turns: list[list[dict[str, Any]]], *, approval: str = "auto",
                 answers: list[str] | None = None, max_turns: int = 10) -> None:
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir()
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"turns": turns}))
        self.path = tmp_path / "s.jsonl"
        self.log = EventLog.create(self.path, secrets=[SECRET])
        self.answers = list(answers or [])
        self.asked: list[str] = []
        ctx = ToolContext(workspace=self.workspace.resolve(), env={"PATH": os.environ["PATH"]},
                          sandbox=SandboxPolicy(mode="off"))
        self.agent = Agent(
            agent_id="main", provider=ScriptedProvider(script), tools=default_tools(), ctx=ctx, record=self.record,
            ask=self.ask, on_delta=self.on_delta, approval_mode=approval, max_turns=max_turns,
            system_prompt="You are tested.", store_blob=lambda data: "0" * 64, session_id="s")
        self.requests: list[str] = []

    def record(self, event: ev.AnyEvent) -> ev.AnyEvent:
        event, _ = self.log.append(event)
        self.agent.history.apply(event)
        if isinstance(event, ev.ModelRequest):
            self.requests.append(event.digest)
        return event

    async def ask(self, agent_id: str, call: ToolCallBlock, tool: Tool) -> tuple[str, str]:
        self.asked.append(call.name)
        if not self.answers:
            raise NeedsApproval(f"{call.name} needs approval")
        return self.answers.pop(0), "test"

    async def on_delta(self, agent_id: str, delta: Any) -> None:
        pass

    def events(self) -> list[ev.AnyEvent]:
        return read_events(self.path)

    def types(self) -> list[str]:
        return [ev.event_type(e) for e in self.events()]

    def replayed(self) -> History:
        """The history folded from the log on disk, as resume and replay build it."""
        history = History("main")
        for event in self.events():
            history.apply(event)
        return history


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[Any]:
    runs: list[Run] = []

    def make(turns: list[list[dict[str, Any]]], **kwargs: Any) -> Run:
        runs.append(Run(tmp_path, turns, **kwargs))
        return runs[-1]

    yield make
    for run in runs:
        run.log.close()


async def _start(run: Run, text: str) -> Any:
    run.record(ev.UserMessage(text=text))
    return await run.agent.run()


async def test_a_task_runs_its_tool_calls_and_finishes(make_run: Any) -> None:
    run = make_run([
        [{"text": "Writing."}, {"tool": "write_file", "input": {"path": "a.txt", "content": "one\n"}}],
        [{"tool": "bash", "input": {"command": "cat a.txt; echo two >> a.txt"}}],
        [{"expect_result": "one"}, {"text": "Done."}],
    ])
    outcome = await _start(run, "write a file")
    assert (outcome.exit_reason, outcome.result) == ("finished", "Done.")
    assert (run.workspace / "a.txt").read_text() == "one\ntwo\n"
    assert run.types() == ["user_message", "model_request", "model_response", "tool_started", "file_edit_started", "file_edited",
                           "tool_finished", "model_request", "model_response", "tool_started", "tool_finished",
                           "model_request", "model_response"]
    finished = [e for e in run.events() if isinstance(e, ev.ToolFinished)]
    assert finished[1].exit_status == 0 and finished[1].duration_s is not ev.UNSET and not finished[1].is_error
    assert run.agent.history.turns == 3 and run.agent.history.turns_since_user == 3


async def test_the_history_folded_from_the_log_is_the_live_one(make_run: Any) -> None:
    run = make_run([
        [{"tool": "bash", "input": {"command": "echo out"}}, {"tool": "glob", "input": {"pattern": "*"}}],
        [{"text": "ok"}],
    ])
    await _start(run, "go")
    run.record(ev.AgentMessage(to="main", from_="verifier", priority="high", body="tests fail"))
    replayed = run.replayed()
    assert replayed.messages == run.agent.history.messages
    assert [m.role for m in replayed.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert replayed.messages[-1].content[0].text == "[message from agent verifier, priority high]\ntests fail"
    # The next request, rebuilt from the log alone, is the one the live agent would send.
    live = request_digest(run.agent.build_request())
    run.agent.history = replayed
    assert request_digest(run.agent.build_request()) == live
    # And each logged request digest is what the history before it gives.
    history = History("main")
    for event in run.events():
        if isinstance(event, ev.ModelRequest):
            run.agent.history = history
            assert request_digest(run.agent.build_request()) == event.digest
        history.apply(event)


async def test_the_turn_limit_is_checked_before_each_model_call(make_run: Any) -> None:
    run = make_run([[{"tool": "bash", "input": {"command": "true"}}]] * 5, max_turns=2)
    outcome = await _start(run, "loop")
    assert outcome.exit_reason == "max_turns" and len(run.requests) == 2
    assert run.types()[-1] == "tool_finished"  # stopped after answering, before a third call


async def test_calls_that_cannot_run_are_answered_as_errors(make_run: Any) -> None:
    run = make_run([
        [{"tool": "no_such_tool", "input": {}}, {"tool": "read_file", "input": {"path": "x", "bogus": 1}}],
        [{"text": "ok"}],
    ])
    await _start(run, "go")
    unknown, bad = [e for e in run.events() if isinstance(e, ev.ToolFinished)]
    assert unknown.is_error and "unknown tool 'no_such_tool'" in unknown.content
    assert bad.is_error and "unknown input bogus" in bad.content
    assert "tool_started" not in run.types()  # neither ran


async def test_a_person_answers_approvals_and_a_denial_is_the_result(make_run: Any) -> None:
    run = make_run([
        [{"tool": "write_file", "input": {"path": "a.txt", "content": "a"}}],
        [{"tool": "write_file", "input": {"path": "b.txt", "content": "b"}}],
        [{"text": "ok"}],
    ], approval="ask", answers=["allow", "deny"])
    outcome = await _start(run, "go")
    assert outcome.exit_reason == "finished" and run.asked == ["write_file", "write_file"]
    assert (run.workspace / "a.txt").exists() and not (run.workspace / "b.txt").exists()
    resolved = [e for e in run.events() if isinstance(e, ev.ApprovalResolved)]
    assert [r.decision for r in resolved] == ["allow", "deny"]
    denied = [e for e in run.events() if isinstance(e, ev.ToolFinished)][-1]
    assert denied.is_error and denied.source == "person" and denied.content == "not run: the person denied it"


async def test_no_one_to_ask_stops_the_run_before_the_call(make_run: Any) -> None:
    run = make_run([[{"tool": "write_file", "input": {"path": "a.txt", "content": "a"}}]], approval="ask")
    outcome = await _start(run, "go")
    assert outcome.exit_reason == "needs_approval"
    assert run.types()[-1] == "approval_requested" and not (run.workspace / "a.txt").exists()
    assert [c.id for c in run.agent.history.unanswered_calls()] == ["toolu_scripted_0_0"]


async def test_redaction_changes_the_log_not_what_runs_or_what_the_model_sees(make_run: Any) -> None:
    # Issue 13 case 1, at its root: the live views fold the event itself, not the line.
    run = make_run([
        [{"tool": "write_file", "input": {"path": "conf.py", "content": f"TOKEN = '{SECRET}'\n"}}],
        [{"tool": "bash", "input": {"command": "cat conf.py"}}],
        [{"text": "ok"}],
    ])
    await _start(run, "go")
    assert (run.workspace / "conf.py").read_text() == f"TOKEN = '{SECRET}'\n"
    assert SECRET in run.agent.history.messages[-2].content[0].content  # the bash result, exact
    assert SECRET.encode() not in run.path.read_bytes() and b"[REDACTED]" in run.path.read_bytes()
