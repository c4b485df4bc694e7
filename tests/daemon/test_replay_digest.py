"""Replay's incremental request digest equals the full ``request_digest`` after every event
of any history (issue 19: the digest is extended per request, not recomputed)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.core.conversation import TextBlock, ToolCallBlock, request_digest
from musec.agents.core.events import (
    AgentMessage,
    AnyEvent,
    ModelRequest,
    ModelResponse,
    SessionStarted,
    ToolFinished,
    UserMessage,
)
from musec.agents.loop import Agent
from musec.agents.tools import default_tools
from musec.agents.tools.base import ToolContext
from musec.daemon.eventlog import EventLog
from musec.daemon.index import SessionIndex
from musec.daemon.resume import (
    PrefixDigest,
    _no_ask,
    _no_blob,
    _no_delta,
    _no_record,
    _ReplayModel,
    _tools_for,
    replay,
)

TEXT = st.text(max_size=20)


def _agent(tmp: Path) -> Agent:
    return Agent(agent_id="main", provider=_ReplayModel("p", "m"), tools=default_tools(), ctx=ToolContext(workspace=tmp, env={}),
                 record=_no_record, ask=_no_ask, on_delta=_no_delta, approval_mode="auto", max_turns=1,
                 system_prompt='sys "messages":[] prompt', store_blob=_no_blob, session_id="s")


def _event(kind: str, text: str, n: int) -> AnyEvent:
    match kind:
        case "user":
            return UserMessage(text=text)
        case "reply":
            return ModelResponse(content=[TextBlock(text), ToolCallBlock(f"c{n}", "bash", {"command": text})])
        case "result":
            return ToolFinished(call_id=f"c{n - 1}", tool="bash", content=text)
        case _:
            return AgentMessage(agent="scout", to="main", from_="scout", body=text)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "reply", "result", "message"]), TEXT), max_size=30))
def test_incremental_digest_matches_the_full_one_after_every_event(tmp_path_factory, steps) -> None:
    agent = _agent(tmp_path_factory.mktemp("ws"))
    digest = PrefixDigest()
    assert digest.digest(agent) == request_digest(agent.build_request())
    for n, (kind, text) in enumerate(steps):
        agent.history.apply(_event(kind, text, n))
        assert digest.digest(agent) == request_digest(agent.build_request())
    agent.history.messages = list(agent.history.messages[:1])  # a history replaced (compaction)
    assert digest.digest(agent) == request_digest(agent.build_request())


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "reply", "result", "message"]), TEXT), min_size=1, max_size=25))
def test_replay_names_the_next_request_by_its_full_digest(tmp_path_factory, steps) -> None:
    """Replay's next-request digest (from the kept prefix state since issue 19, not one
    encoding of the whole request) is the full ``request_digest`` of an agent that folded
    the same log, and every logged request is rebuilt exactly."""
    directory = tmp_path_factory.mktemp("sessions")
    started = SessionStarted(workspace=str(directory), model="scripted", tools=["bash", "read_file"], system_prompt="p")
    agent = Agent(agent_id="main", provider=_ReplayModel("scripted", "scripted"),
                  tools=_tools_for(started.tools, started, worker=False), ctx=ToolContext(workspace=directory, env={}),
                  record=_no_record, ask=_no_ask, on_delta=_no_delta, approval_mode="auto", max_turns=1,
                  system_prompt="p", store_blob=_no_blob, session_id="s")
    log = EventLog.create(directory / "s.jsonl")
    try:
        agent.history.apply(log.append(started)[0])
        for n, (kind, text) in enumerate(steps):
            if kind == "reply":  # each model call is logged with the digest of what was sent
                request = ModelRequest(provider="scripted", model="scripted", digest=request_digest(agent.build_request()))
                agent.history.apply(log.append(request)[0])
            agent.history.apply(log.append(_event(kind, text, n))[0])
    finally:
        log.close()
    result = replay(SessionIndex(directory, {}), "s", 1)
    assert result.ok, result.problems
    made_calls = any(kind == "reply" for kind, _ in steps)
    assert result.next_request_digest == (request_digest(agent.build_request()) if made_calls else "")
