"""An answer that breaks off while it streams (the connection drops, the server stops
answering, sends an error or a frame musec cannot read) and whose retries run out, and an
OpenAI answer the person interrupts, in process: the real ``Agent`` and adapters against
the local servers. The part streamed is kept (an ``interrupted="error"`` model_response),
its tokens counted (the input estimated where the stream reported none: ``input_estimated``),
and the turn ends with one line saying what failed and what to do; never a traceback."""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from musec.agents.core import events as ev
from musec.agents.core.conversation import TextBlock, Usage
from musec.agents.cutoff import CUT_OFF_NOTES
from musec.agents.history import History
from musec.agents.loop import Agent
from musec.agents.providers import RetryPolicy, make_provider
from musec.agents.providers.base import TextDelta
from musec.agents.tools import default_tools
from musec.agents.tools.base import ToolContext

from tests.support.anthropic_server import Answer, AnthropicServer, message, paused
from tests.support.openai_server import OpenAIServer, chat_stream, responses_stream

pytestmark = pytest.mark.anyio
FIRST = "The first half of the answer. "
SECOND = "Its second half does not come."
THIRD = " Chat streams it in 3 pieces.."  # as long as FIRST: a Chat stream's text comes in three pieces
FAST = RetryPolicy(max_attempts=2, base_delay_s=0.001, max_delay_s=0.005)
MODELS = {"anthropic": "anthropic/claude-sonnet-4-6", "responses": "openai/gpt-test", "chat": "openai-compat/local"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _cost(u: Any) -> float:
    return (u.input_tokens * 3 + u.output_tokens * 15) / 1e6


class Session:
    """One agent on ``api`` (``anthropic``, ``responses``, ``chat``) and its log."""

    def __init__(self, api: str, server: AnthropicServer, http: httpx.AsyncClient, ws: Path,
                 timeout: httpx.Timeout | None = None) -> None:
        self.events: list[ev.AnyEvent] = []
        self.streamed: list[TextDelta] = []
        self.first_half = anyio.Event()
        key = "ANTHROPIC" if api == "anthropic" else "OPENAI"
        extra = {"timeout": timeout} if timeout is not None else {}
        provider = make_provider(MODELS[api], {f"{key}_API_KEY": "k", f"{key}_BASE_URL": server.base_url},
                                 http_client=http, retry_policy=FAST, **extra)
        self.agent = Agent(agent_id="main", provider=provider, tools=default_tools(), ctx=ToolContext(workspace=ws, env={}),
                           record=self.record, ask=self.no_ask, on_delta=self.on_delta, approval_mode="auto",
                           max_turns=10, system_prompt="be brief", store_blob=lambda data: "0" * 64, session_id="s",
                           cost_of=_cost)

    def record(self, event: ev.AnyEvent) -> ev.AnyEvent:
        event = msgspec.structs.replace(event, seq=len(self.events), ts=time.time())
        self.events.append(event)
        self.agent.history.apply(event)
        return event

    async def no_ask(self, *args: Any) -> tuple[str, str]:
        raise AssertionError("auto approval asks nothing")

    async def on_delta(self, agent_id: str, delta: TextDelta) -> None:
        self.streamed.append(delta)
        if FIRST.strip() in "".join(d.text for d in self.streamed):
            self.first_half.set()

    async def turn(self, text: str) -> Any:
        self.record(ev.UserMessage(text=text))
        return await self.agent.run()

    def responses(self) -> list[ev.ModelResponse]:
        return [e for e in self.events if isinstance(e, ev.ModelResponse)]


def _answer(api: str, **options: Any) -> Answer:
    if api == "anthropic":
        return message([{"type": "text", "text": FIRST + SECOND}], input_tokens=1200, output_tokens=40, **options)
    if api == "responses":
        return responses_stream([{"type": "message", "text": FIRST + SECOND}], **options)
    return chat_stream(_whole(api), **options)


def _whole(api: str) -> str:
    return FIRST + SECOND + (THIRD if api == "chat" else "")


def _cut(answer: Answer, end: str = "close", then: tuple[bytes, ...] = ()) -> Answer:
    """``answer`` up to the chunk that streams ``FIRST``, then ``then``, then ``end``."""
    needle = json.dumps(FIRST.strip())[1:-1].encode()
    index = next(i for i, c in enumerate(answer.chunks) if needle in c)
    return replace(answer, chunks=(*answer.chunks[: index + 1], *then), end=end)  # type: ignore[arg-type]


def _check_kept(s: Session, outcome: Any, *, exit_reason: str, said: str) -> ev.ModelResponse:
    """The broken answer is kept, counted and given back with a note; one line says why and what to do."""
    assert outcome.exit_reason == exit_reason
    assert "\n" not in outcome.message and said in outcome.message
    assert "kept" in outcome.message and "send a message" in outcome.message
    (cut,) = s.responses()
    assert cut.interrupted == "error" and cut.stop_reason == "interrupted" and cut.content == [TextBlock(FIRST)]
    assert cut.usage["output_tokens"] >= math.ceil(len(FIRST) / 4) and cut.usage_estimated is True
    assert cut.usage["input_tokens"] > 0 and cut.cost_usd > 0
    assert s.agent.history.cost_usd == pytest.approx(cut.cost_usd)
    assert s.agent.history.messages[-2].content == [TextBlock(FIRST)]
    assert s.agent.history.messages[-1].content[-1] == TextBlock(CUT_OFF_NOTES["error"])
    refolded = History("main")
    for event in s.events:
        refolded.apply(event)
    assert refolded.messages == s.agent.history.messages
    assert ev.decode_event(msgspec.json.encode(ev.line_fields(cut))) == cut
    return cut


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
async def test_a_dropped_connection_keeps_what_streamed(tmp_path: Path, api: str) -> None:
    server_type = AnthropicServer if api == "anthropic" else OpenAIServer
    with server_type() as server:
        server.enqueue(_cut(_answer(api)), _cut(_answer(api)), _answer(api))
        async with httpx.AsyncClient() as http:
            s = Session(api, server, http, tmp_path)
            outcome = await s.turn("explain")
            cut = _check_kept(s, outcome, exit_reason="provider_unreachable", said="connection")
            # Anthropic said its input at message_start; OpenAI streams say it only at their end.
            assert cut.input_estimated is (ev.UNSET if api == "anthropic" else True)
            if api == "anthropic":
                assert cut.usage["input_tokens"] == 1200
            await s.turn("go on")
        sent = server.requests[-1].body
        texts = json.dumps(sent)
        assert FIRST.strip() in texts and CUT_OFF_NOTES["error"] in texts  # the model gets it back


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
async def test_a_server_error_mid_stream_keeps_what_streamed(tmp_path: Path, api: str) -> None:
    server_type = AnthropicServer if api == "anthropic" else OpenAIServer
    error = "overloaded_error" if api == "anthropic" else "server_error"
    with server_type() as server:
        broken = _answer(api, error=error)
        server.enqueue(broken, broken)
        async with httpx.AsyncClient() as http:
            s = Session(api, server, http, tmp_path)
            outcome = await s.turn("explain")
    (cut,) = s.responses()
    assert cut.content == [TextBlock(_whole(api))] and cut.interrupted == "error"
    assert outcome.exit_reason == "provider_unreachable" and "\n" not in outcome.message
    assert error in outcome.message and "kept" in outcome.message


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
async def test_a_malformed_frame_mid_stream_keeps_what_streamed(tmp_path: Path, api: str) -> None:
    server_type = AnthropicServer if api == "anthropic" else OpenAIServer
    with server_type() as server:
        server.enqueue(_cut(_answer(api), end="finish", then=(b"data: {\"type\": \"content_blo\n\n",)))
        async with httpx.AsyncClient() as http:
            s = Session(api, server, http, tmp_path)
            outcome = await s.turn("explain")
            _check_kept(s, outcome, exit_reason="error", said="malformed")


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
async def test_a_frame_of_the_wrong_shape_is_an_error_line_never_a_traceback(tmp_path: Path, api: str) -> None:
    odd = {"anthropic": {"type": "content_block_delta", "index": 0, "delta": "oops"},
           "responses": {"type": "response.completed", "response": ["oops"]},
           "chat": {"id": "c", "choices": [{"index": 0, "delta": "oops"}]}}[api]
    server_type = AnthropicServer if api == "anthropic" else OpenAIServer
    with server_type() as server:
        server.enqueue(_cut(_answer(api), end="finish", then=(b"data: " + json.dumps(odd).encode() + b"\n\n",)))
        async with httpx.AsyncClient() as http:
            s = Session(api, server, http, tmp_path)
            outcome = await s.turn("explain")
    assert outcome.exit_reason == "error" and "\n" not in outcome.message
    (cut,) = s.responses()
    assert cut.content == [TextBlock(FIRST)]


async def test_an_idle_stream_timeout_keeps_what_streamed(tmp_path: Path) -> None:
    with AnthropicServer() as server:
        server.enqueue(_cut(_answer("anthropic"), end="hang"), _cut(_answer("anthropic"), end="hang"))
        async with httpx.AsyncClient() as http:
            s = Session("anthropic", server, http, tmp_path, timeout=httpx.Timeout(5.0, read=0.3))
            outcome = await s.turn("explain")
            _check_kept(s, outcome, exit_reason="provider_unreachable", said="idle-stream timeout")


@pytest.mark.parametrize("end", ["close", "hang"])
async def test_a_local_server_that_sends_no_done_after_its_answer_is_not_a_failure(tmp_path: Path, end: str) -> None:
    with OpenAIServer() as server:
        server.enqueue(chat_stream(FIRST + SECOND, done=False, end=end))  # type: ignore[arg-type]
        async with httpx.AsyncClient() as http:
            s = Session("chat", server, http, tmp_path)
            began = time.monotonic()
            outcome = await s.turn("explain")
    assert outcome.exit_reason == "finished" and outcome.result == FIRST + SECOND
    assert len(server.requests) == 1 and time.monotonic() - began < 10  # not retried, not held to the idle timeout
    (whole,) = s.responses()
    assert whole.usage["output_tokens"] == 9  # the usage chunk before the silence is read


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_an_interrupted_openai_answer_counts_estimated_input(tmp_path: Path, api: str) -> None:
    gate = threading.Event()  # never set: the stream stays paused after its first half
    with OpenAIServer() as server:
        server.enqueue(paused(_answer(api), FIRST.strip(), gate))
        async with httpx.AsyncClient() as http:
            s = Session(api, server, http, tmp_path)
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.turn, "explain")
                await s.first_half.wait()
                tg.cancel_scope.cancel()
            use = s.agent.context_use()
    (cut,) = s.responses()
    assert cut.interrupted == "person" and cut.content == [TextBlock(FIRST)]
    assert cut.input_estimated is True and cut.usage["input_tokens"] > 0
    # the estimate is the context meter's own measure of the request sent (agents/context.py)
    assert cut.usage["input_tokens"] == s.events[1].context_tokens
    assert cut.cost_usd == pytest.approx(_cost(msgspec.convert(cut.usage, Usage)))
    assert use.tokens > cut.usage["input_tokens"]  # the context gauge did not drop to zero
