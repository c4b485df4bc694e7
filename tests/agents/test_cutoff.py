"""An answer cut off while it streams (issue 18, fresh user 14), in process: the real
``Agent`` and Anthropic adapter against the local server, whose stream pauses mid-answer
until the test releases it (or never). The part streamed is recorded as an interrupted
``model_response`` with the usage the stream reported and an estimate of the output,
counted in the cost; the history keeps it with a note, and the refold of the log (resume,
replay) is the live history."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from musec.agents.core import events as ev
from musec.agents.core.conversation import TextBlock, Usage
from musec.agents.cutoff import CUT_OFF_NOTES, Streamed
from musec.agents.history import History
from musec.agents.loop import Agent
from musec.agents.providers import RetryPolicy, make_provider
from musec.agents.providers.base import TextDelta
from musec.agents.tools import default_tools
from musec.agents.tools.base import ToolContext

from tests.support.anthropic_server import (
    Answer,
    AnthropicServer,
    check_tool_pairing,
    message,
    paused,
)

pytestmark = pytest.mark.anyio
FIRST = "The first half of the answer. "
SECOND = "Its second half does not come."  # as long as FIRST: the server streams the text in two halves


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


class Session:
    """One agent, its log (events folded into its history as they are recorded) and what
    it streamed to clients."""

    def __init__(self, server: AnthropicServer, http: httpx.AsyncClient, ws: Path) -> None:
        self.events: list[ev.AnyEvent] = []
        self.streamed: list[TextDelta] = []
        self.first_half = anyio.Event()
        provider = make_provider("anthropic/claude-sonnet-4-6", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.base_url},
                                 agent_id="main", http_client=http, retry_policy=RetryPolicy(max_attempts=1))
        self.agent = Agent(agent_id="main", provider=provider, tools=default_tools(), ctx=ToolContext(workspace=ws, env={}),
                           record=self.record, ask=self.no_ask, on_delta=self.on_delta, approval_mode="auto",
                           max_turns=10, system_prompt="be brief", store_blob=lambda data: "0" * 64, session_id="s",
                           cost_of=lambda u: (u.input_tokens * 3 + u.output_tokens * 15) / 1e6)

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


def _answer() -> Any:
    return message([{"type": "text", "text": FIRST + SECOND}], input_tokens=1200, output_tokens=40)


async def test_an_interrupted_answer_is_kept_counted_and_given_back_to_the_model(tmp_path: Path) -> None:
    gate = threading.Event()  # never set: the stream stays paused after its first half
    with AnthropicServer() as server:
        server.enqueue(paused(_answer(), "first half", gate), message([{"type": "text", "text": "Going on."}]))
        async with httpx.AsyncClient() as http:
            s = Session(server, http, tmp_path)
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.turn, "explain")
                await s.first_half.wait()
                tg.cancel_scope.cancel()  # what the daemon does on Esc / Ctrl-C
            (cut,) = s.responses()
            assert cut.interrupted == "person" and cut.stop_reason == "interrupted" and cut.usage_estimated is True
            assert cut.content == [TextBlock(FIRST)]
            # The input the stream reported at message_start; the output estimated from the text streamed.
            assert cut.usage["input_tokens"] == 1200 and cut.usage["output_tokens"] == math.ceil(len(FIRST) / 4)
            assert cut.cost_usd == pytest.approx((1200 * 3 + math.ceil(len(FIRST) / 4) * 15) / 1e6)
            assert s.agent.history.cost_usd == pytest.approx(cut.cost_usd)
            assert [d.kind for d in s.streamed] == ["text"]  # the usage is the loop's, never a client's

            outcome = await s.turn("go on")
            assert outcome.result == "Going on."
            messages = server.requests[1].body["messages"]
            check_tool_pairing(server.requests)  # roles alternate: the note and the new message are one user turn
            assert messages[1] == {"role": "assistant", "content": [{"type": "text", "text": FIRST}]}
            said = [b["text"] for b in messages[2]["content"]]
            assert said == [CUT_OFF_NOTES["person"], "go on"]

    refolded = History("main")
    for event in s.events:
        refolded.apply(event)
    assert refolded.messages == s.agent.history.messages  # resume and replay rebuild the same requests
    # The log line as written decodes back (old readers ignore the new members).
    line = msgspec.json.encode(ev.line_fields(cut))
    assert ev.decode_event(line) == cut


async def test_a_wall_time_limit_cuts_the_answer_off_and_keeps_it(tmp_path: Path) -> None:
    gate = threading.Event()
    with AnthropicServer() as server:
        server.enqueue(paused(_answer(), "first half", gate))
        async with httpx.AsyncClient() as http:
            s = Session(server, http, tmp_path)
            s.agent.max_wall_s = 1.0
            outcome = await s.turn("explain")
    assert outcome.exit_reason == "max_wall"
    (cut,) = s.responses()
    assert cut.interrupted == "max_wall" and cut.content == [TextBlock(FIRST)]
    assert s.agent.history.messages[-1].content[-1] == TextBlock(CUT_OFF_NOTES["max_wall"])


async def test_a_cut_before_the_stream_began_records_nothing(tmp_path: Path) -> None:
    gate = threading.Event()
    with AnthropicServer() as server:
        server.enqueue(Answer(chunks=_answer().chunks, gates=((0, gate),)))  # held before its first event
        async with httpx.AsyncClient() as http:
            s = Session(server, http, tmp_path)
            with anyio.move_on_after(0.5):
                await s.turn("explain")
    assert s.responses() == [] and s.agent.history.messages[-1].role == "user"


def test_a_retried_attempt_drops_what_the_failed_one_streamed() -> None:
    part = Streamed()
    assert part.take(TextDelta("", kind="usage", usage=Usage(input_tokens=9))) is False
    assert part.take(TextDelta("lost text")) is True
    assert part.take(TextDelta("", kind="restart")) is False
    assert part.take(TextDelta("kept")) is True and part.take(TextDelta("xyzw" * 3, kind="thinking")) is True
    usage, estimated = part.usage()
    assert part.text == "kept" and usage.input_tokens == 0 and usage.output_tokens == 4 and estimated
