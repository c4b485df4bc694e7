"""Compaction in the agent loop, in process: the real ``Agent`` with the real Anthropic
adapter against the local server with a window, an in-memory log that folds every event
into every agent's history (as the session does), and a refold of that log (as resume and
replay do). Two agents share the log, as the main agent and a worker (or the scout) do:
each compacts its own history, and neither's compaction touches the other's.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from musec.agents.budget import ContextConfig
from musec.agents.compaction import HEAD_MARK, SUMMARY_MARK
from musec.agents.core import events as ev
from musec.agents.core.conversation import request_digest
from musec.agents.history import History
from musec.agents.loop import Agent
from musec.agents.providers import RetryPolicy, make_provider
from musec.agents.tools import default_tools
from musec.agents.tools.base import ToolContext

from tests.support.anthropic_server import (
    AnthropicServer,
    RecordedRequest,
    check_tool_pairing,
    message,
)

pytestmark = pytest.mark.anyio
WINDOW = 12_000
TASKS = {"main": "MAIN-TASK: read a.txt until told to stop", "worker:w1": "WORKER-TASK: read a.txt, then report"}


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


class Log:
    """The session's part that matters here: numbered events, each folded into every agent,
    and each line as the log would hold it."""

    def __init__(self) -> None:
        self.events: list[ev.AnyEvent] = []
        self.lines: list[bytes] = []
        self.agents: list[Agent] = []

    def record(self, event: ev.AnyEvent) -> ev.AnyEvent:
        event = msgspec.structs.replace(event, seq=len(self.events), ts=1.0)
        self.events.append(event)
        self.lines.append(msgspec.json.encode(ev.line_fields(event)))
        for a in self.agents:
            a.history.apply(event)
        return event

    def of(self, kind: type, agent: str | None = None) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind) and (agent is None or e.agent == agent)]


class Model:
    """Each agent (told apart by its task) reads ``calls`` times, then stops; summarises when asked."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.made: dict[str, int] = {}
        self.summaries: dict[str, int] = {}
        self.failures: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest, tokens: int, cached: int) -> Any:
        raw = request.raw_body.decode()
        agent = next(a for a, task in TASKS.items() if task in raw)
        with self.lock:
            try:
                check_tool_pairing([request])
            except AssertionError as exc:
                self.failures.append(str(exc))
            if SUMMARY_MARK in raw:
                self.summaries[agent] = self.summaries.get(agent, 0) + 1
                return message([{"type": "text", "text": f"## Now and next\n{agent} read {self.made.get(agent, 0)} times"}])
            n = self.made.get(agent, 0)
            if n >= self.calls:
                return message([{"type": "text", "text": f"{agent} done"}], input_tokens=tokens)
            self.made[agent] = n + 1
            call = {"type": "tool_use", "id": f"toolu_{agent[-2:]}_{n:03d}", "name": "read_file", "input": {"path": "a.txt"}}
            return message([call], input_tokens=tokens - cached, cache_read_tokens=cached)


def _agent(agent_id: str, log: Log, server: AnthropicServer, http: httpx.AsyncClient, ws: Path) -> Agent:
    provider = make_provider("anthropic/claude-test", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.base_url},
                             agent_id=agent_id, http_client=http, retry_policy=RetryPolicy(max_attempts=1))

    async def no_ask(*args: Any) -> tuple[str, str]:
        raise AssertionError("auto approval asks nothing")

    async def no_delta(*args: Any) -> None:
        pass

    agent = Agent(agent_id=agent_id, provider=provider, tools=default_tools(), ctx=ToolContext(workspace=ws, env={}),
                  record=log.record, ask=no_ask, on_delta=no_delta, approval_mode="auto", max_turns=500,
                  system_prompt="be brief", store_blob=lambda data: "0" * 64, session_id="s")
    agent.window_tokens = WINDOW
    agent.context_config = ContextConfig(clear_at=0)  # compaction itself, not the clearing before it
    log.agents.append(agent)
    return agent


async def test_two_agents_compact_their_own_histories(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("0123456789abcdef" * 64 + "\n")  # about 1 KiB a read
    model = Model(calls=60)
    log = Log()
    with AnthropicServer(window_tokens=WINDOW, respond=model, keep_bodies=False) as server:
        async with httpx.AsyncClient() as http:
            agents = [_agent(a, log, server, http, ws) for a in TASKS]
            for agent in agents:
                log.record(ev.UserMessage(agent=agent.agent_id, text=TASKS[agent.agent_id]))
            outcomes = {}

            async def run(agent: Agent) -> None:
                outcomes[agent.agent_id] = await agent.run()

            async with anyio.create_task_group() as tg:
                for agent in agents:
                    tg.start_soon(run, agent)
    assert {a: o.exit_reason for a, o in outcomes.items()} == {"main": "finished", "worker:w1": "finished"}
    assert model.failures == [] and server.refused == 0
    assert model.made == {"main": 60, "worker:w1": 60}
    for agent in agents:
        finished = log.of(ev.CompactionFinished, agent.agent_id)
        assert len(finished) == model.summaries[agent.agent_id] >= 2
        assert agent.history.compactions == len(finished)
        first = agent.history.messages[0].content[0].text
        assert first.startswith(HEAD_MARK) and TASKS[agent.agent_id] in first
        assert not any(t in first for a, t in TASKS.items() if a != agent.agent_id)  # its own conversation only
    # The log alone rebuilds each history, and so each next request, byte for byte.
    for agent in agents:
        again = History(agent.agent_id)
        for line in log.lines:
            again.apply(ev.decode_event(line))
        assert again.messages == agent.history.messages
        assert request_digest(msgspec.structs.replace(agent.build_request(), messages=again.messages)) == \
            request_digest(agent.build_request())


async def test_overflow_compacts_once_and_retries_once(tmp_path: Path) -> None:
    """A window the catalog does not know: the first refusal compacts and the retry fits;
    a request that still does not fit after that ends the run with a clear error, no loop."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("0123456789abcdef" * 64 + "\n")
    model = Model(calls=12)
    log = Log()
    with AnthropicServer(respond=model, keep_bodies=False) as server:
        async with httpx.AsyncClient() as http:
            agent = _agent("main", log, server, http, ws)
            agent.window_tokens = None  # the catalog does not know the window
            log.record(ev.UserMessage(text=TASKS["main"]))
            assert (await agent.run()).exit_reason == "finished"
            server.window_tokens = max(server.tokens) - 2000
            model.calls = 20
            log.record(ev.UserMessage(text="go on"))
            outcome = await agent.run()
            assert outcome.exit_reason == "finished", outcome.message
            assert server.refused == 1
            assert log.of(ev.CompactionStarted)[0].reason == "overflow"
            # A window smaller than what must stay (the system prompt and tools alone): one
            # compaction, one retry, then a clear error.
            server.window_tokens = 10
            model.calls = 30
            log.record(ev.UserMessage(text="and more"))
            refused = server.refused
            outcome = await agent.run()
            assert outcome.exit_reason == "error" and "still over the window" in outcome.message
            # only the first request is sent: the summarising calls and the retry are counted
            # over the window before sending, so none is made (fresh-user s8 K4)
            assert server.refused - refused == 1
            cuts = log.of(ev.ContextCut)
            assert cuts and "no summary could be made" in cuts[-1].reason


async def test_the_goal_and_the_approved_plan_survive_every_compaction_verbatim(tmp_path: Path) -> None:
    """A goal set and a plan approved before a long run: each compacted head (two or more,
    the second summarising a history that starts with the first head) still holds both
    verbatim, and the log alone rebuilds the same history."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("0123456789abcdef" * 64 + "\n")
    model = Model(calls=60)
    log = Log()
    condition = "GOAL-CONDITION: every read of a.txt is counted, none skipped"
    plan = "PLAN-TEXT:\n1. read a.txt sixty times\n2. report the count\nverify: `wc -c a.txt`"
    with AnthropicServer(window_tokens=WINDOW, respond=model, keep_bodies=False) as server:
        async with httpx.AsyncClient() as http:
            agent = _agent("main", log, server, http, ws)
            log.record(ev.UserMessage(agent="main", text=TASKS["main"]))
            log.record(ev.GoalSet(agent="main", goal_id="g1", condition=condition, by="person"))
            log.record(ev.PlanApproved(agent="main", sha256="ab" * 32, by="person", approval="auto", text=plan))
            outcome = await agent.run()
    assert outcome.exit_reason == "finished" and model.failures == [] and server.refused == 0
    heads = [e.head for e in log.of(ev.CompactionFinished, "main")]
    assert len(heads) >= 2
    for head in heads:
        assert head.startswith(HEAD_MARK)
        assert condition in head and plan in head and TASKS["main"] in head
    again = History("main")
    for line in log.lines:
        again.apply(ev.decode_event(line))
    assert again.messages == agent.history.messages


async def test_a_summary_answered_with_a_tool_call_is_asked_again_without_tools(tmp_path: Path) -> None:
    """The fresh user's server answered the summary request with "Running a command." and a
    bash call, and that sentence became the session's whole memory. A tool call is no
    summary: the request is made once more with no tools, and its text is the summary."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("0123456789abcdef" * 64 + "\n")
    asked_with_tools: list[bool] = []

    class Acting(Model):
        def __call__(self, request: RecordedRequest, tokens: int, cached: int) -> Any:
            if SUMMARY_MARK in request.raw_body.decode():
                tools = bool(request.body.get("tools"))
                asked_with_tools.append(tools)
                if tools:
                    return message([{"type": "text", "text": "Running a command."},
                                    {"type": "tool_use", "id": "toolu_sum", "name": "bash", "input": {"command": "ls"}}])
            return super().__call__(request, tokens, cached)

    model = Acting(calls=30)
    log = Log()
    with AnthropicServer(window_tokens=WINDOW, respond=model, keep_bodies=True) as server:
        async with httpx.AsyncClient() as http:
            agent = _agent("main", log, server, http, ws)
            log.record(ev.UserMessage(agent="main", text=TASKS["main"]))
            outcome = await agent.run()
    assert outcome.exit_reason == "finished" and model.failures == []
    finished = log.of(ev.CompactionFinished, "main")
    assert finished and asked_with_tools[:2] == [True, False]
    assert all(e.summary.startswith("## Now and next") for e in finished), [e.summary for e in finished]


async def test_huge_pastes_are_cut_to_head_and_tail_so_the_session_goes_on(tmp_path: Path) -> None:
    """Fresh-user s8 K4: compaction kept every person message verbatim, so after three
    pastes of about 40% of the window each the session was over its window for good
    (every message refused, two doomed calls each, ``/compact``: "nothing gained"). A
    compacted head cuts a very long message to its head and tail with a note; no request
    over the window is ever sent; a manual compaction of such a session gains; and the log
    alone still rebuilds the history byte for byte."""
    ws = tmp_path / "ws"
    ws.mkdir()
    log = Log()
    summaries: list[int] = []

    def respond(request: RecordedRequest, tokens: int, cached: int) -> Any:
        if SUMMARY_MARK in request.raw_body.decode():
            summaries.append(tokens)
            return message([{"type": "text", "text": "## Now and next\nthe person pasted word lists"}],
                           input_tokens=tokens)
        return message([{"type": "text", "text": "noted"}], input_tokens=tokens)

    pastes = [f"PASTE-{n} START " + " ".join(f"w{i}" for i in range(4000)) + f" PASTE-{n} END" for n in range(4)]
    assert all(len(p) > WINDOW * 4 * 0.4 for p in pastes)  # each about 40% of the window
    with AnthropicServer(window_tokens=WINDOW, respond=respond, keep_bodies=False) as server:
        async with httpx.AsyncClient() as http:
            agent = _agent("main", log, server, http, ws)
            for paste in pastes:
                log.record(ev.UserMessage(text=paste))
                outcome = await agent.run()
                assert outcome.exit_reason == "finished", outcome.message
            log.record(ev.UserMessage(text="just a tiny question"))
            assert (await agent.run()).exit_reason == "finished"
            assert server.refused == 0 and max(server.tokens) <= WINDOW
            heads = [e.head for e in log.of(ev.CompactionFinished, "main") if e.applied is not False]
            assert heads and "PASTE-0 START" in heads[-1] and "PASTE-0 END" in heads[-1]  # head and tail kept
            assert "characters of this message cut by compaction" in heads[-1]
            # the summarising calls fit too (the latest paste, never cut from their input, is cut to
            # its head and tail there): each compaction has its summary
            assert not [c for c in log.of(ev.ContextCut) if "no summary" in c.reason]
            assert all(e.summary for e in log.of(ev.CompactionFinished, "main"))
            # A session that went over its window before (pastes made while the window was
            # unknown): a manual compaction brings it well under, and the next message works.
            server.window_tokens = agent.window_tokens = None
            over = _agent("worker:w1", log, server, http, ws)
            over.window_tokens = None
            for paste in pastes[:3]:
                log.record(ev.UserMessage(agent="worker:w1", text=paste))
                assert (await over.run()).exit_reason == "finished"
            server.window_tokens = over.window_tokens = WINDOW
            assert over.context_use().tokens > WINDOW
            assert await over.compact_now("keep the gist")  # applied: it gains
            assert over.context_use().tokens < WINDOW * 0.5
            log.record(ev.UserMessage(agent="worker:w1", text="just a tiny question"))
            assert (await over.run()).exit_reason == "finished"
            assert server.refused == 0
    for agent in log.agents:
        again = History(agent.agent_id)
        for line in log.lines:
            again.apply(ev.decode_event(line))
        assert again.messages == agent.history.messages
