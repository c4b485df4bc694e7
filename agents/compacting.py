"""An agent compacting its history: the summarising call and its events (issue 12 parts 3-5).

``compact(agent, reason=..., focus=...)`` is called by the agent loop before a model call
(a request over ``compact_at`` of the window, a ``/compact`` asked for, a compaction a
crash cut off) and after an overflow error. It records ``compaction_started``, makes the
summarising call (``compaction.summary_request``; the agent's own model, or the catalog's
``compact_model``), and records ``compaction_finished``, which the history fold applies.

Never a loop: at most two summarising calls per compaction (the second with half the
room, when the first is itself over the window; one estimated over it is not sent at
all); when both fail that way, the compaction
goes on without a summary and the oldest turns are cut (``context_cut``). A provider that
is down ends the compaction with the error (the loop reports it); the compaction is done
again on resume, since its ``compaction_started`` has no result. A summary that would not
make the request smaller (a short conversation, a long summary) is logged but not applied.

Hooks (agents.hooks, DESIGN §12): ``PreCompact`` runs before ``compaction_started`` with
``{"trigger": "manual"|"auto", "reason", "custom_instructions"}``; what it answers (plain
stdout or ``additional_context``) is added to the summary's instructions for this call only
(``hook_ran`` logs it; the person's focus stays the recorded ``focus``). It cannot stop a
compaction: an overflow has no other way out. ``PostCompact`` runs after
``compaction_finished`` with the token counts and the summary; its added context reaches
the model as ``hook_context`` after the new head.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from .compaction import cut_point, render_head, summary_request, summary_text
from .core import events as ev
from .core.conversation import Message, ModelRequest, TextBlock, ToolCallBlock, Usage
from .core.errors import ContextOverflow

# ``agent`` below is an ``agents.loop.Agent`` (typed ``Any``: the loop imports this module).
Agent = Any


async def _no_delta(delta: Any) -> None:
    """The summary is not streamed to the person (it is logged when done)."""


def window_for(agent: Agent, request: ModelRequest, overflow: ContextOverflow | None) -> int:
    """The window a compaction must fit: the catalog's, else what an overflow error said,
    else (unknown) nine tenths of the request that overflowed."""
    known = [w for w in (agent.window_tokens, overflow.limit if overflow else None) if w]
    if known:
        return min(known)
    return max(int(agent.gauge.tokens(request) * 0.9), 1024)


async def compact(agent: Agent, *, reason: str, focus: str = "", overflow: ContextOverflow | None = None) -> bool:
    """Compact ``agent``'s history; ``False`` when it did not change: nothing to summarise,
    or the new start would not have been smaller (logged with ``applied`` False, not applied).

    Raises:
        ProviderError: the summarising call failed other than by overflow.
    """
    request = agent.build_request()
    window = window_for(agent, request, overflow)
    tokens_before = agent.gauge.tokens(request)
    keep = agent.compaction.keep_recent_tokens(window)
    if reason == "manual":  # asked for now, whatever the fill: keep a quarter at most
        keep = min(keep, tokens_before // 4)
    keep_from = cut_point(request.messages, keep, agent.gauge)
    if keep_from is None:
        agent.history.pending = None
        return False
    summarizer = agent.summarizer or agent.provider
    instructions = await _pre_compact(agent, reason, focus)
    agent.record(ev.CompactionStarted(reason=reason, focus=focus, keep_from=keep_from, tokens_before=tokens_before,
                                      window_tokens=window, model=summarizer.model))
    await agent.durable()  # write-ahead: on disk before the summarising call
    agent.faults.crash_at("mid_compaction")
    from_seq = agent.history.message_seqs[0] if agent.history.message_seqs else 0
    to_seq = agent.history.message_seqs[keep_from - 1] if keep_from else from_seq
    started = time.monotonic()
    summary, usage, cut = await _summarise(agent, summarizer, request, instructions, window, agent.history.pinned)
    head = render_head(summary, agent.history.pinned_before(keep_from), cut_messages=cut,
                       person_chars=agent.compaction.person_chars(window, agent.gauge))
    after = msgspec.structs.replace(request, messages=[Message("user", [TextBlock(head)]), *request.messages[keep_from:]])
    tokens_after = agent.gauge.tokens(after)
    applied = tokens_after < tokens_before  # a "compaction" that grows the context is not one
    agent.record(ev.CompactionFinished(
        keep_from=keep_from, head=head, summary=summary, from_seq=from_seq, to_seq=to_seq,
        tokens_before=tokens_before, tokens_after=tokens_after, cut_messages=cut,
        model=summarizer.model, provider=summarizer.name, usage=msgspec.to_builtins(usage),
        cost_usd=round(agent.summary_cost(usage), 8), latency_s=round(time.monotonic() - started, 3),
        applied=ev.UNSET if applied else False,
    ))
    if applied:
        await _post_compact(agent, reason, summary, tokens_before, agent.history.last_compaction)
    return applied


def _trigger(reason: str) -> str:
    return "manual" if reason == "manual" else "auto"


async def _pre_compact(agent: Agent, reason: str, focus: str) -> str:
    """The summary's instructions: the person's focus, then what PreCompact hooks added."""
    if agent.hooks is None:
        return focus
    outcome = await agent.hooks.run("PreCompact", {"trigger": _trigger(reason), "reason": reason,
                                                   "custom_instructions": focus}, agent=agent.agent_id)
    return "\n\n".join(part for part in (focus, *outcome.context) if part)


async def _post_compact(agent: Agent, reason: str, summary: str, tokens_before: int, last: Any) -> None:
    """PostCompact hooks; their added context is recorded as ``hook_context``."""
    if agent.hooks is None:
        return
    outcome = await agent.hooks.run("PostCompact", {
        "trigger": _trigger(reason), "reason": reason, "tokens_before": tokens_before,
        "tokens_after": last.tokens_after if last is not None else 0, "summary": summary}, agent=agent.agent_id)
    for text in outcome.context:
        agent.record(ev.HookContext(hook_event="PostCompact", text=f"[PostCompact hook: {text}]"))


async def _summarise(agent: Agent, summarizer: Any, request: ModelRequest, focus: str,
                     window: int, pinned: list[Any]) -> tuple[str, Usage, int]:
    """The summary text, the usage of the call that wrote it, and the messages cut from
    its input. Two tries at most; ``("", Usage(), cut)`` when neither fit."""
    room = window
    usage = Usage()
    for attempt in (1, 2):
        asked, cut = summary_request(request, focus, agent.compaction, room, agent.gauge, pinned)
        if cut:
            agent.record(ev.ContextCut(
                messages=cut, reason=f"the summarising request was over the window of {room} tokens; its oldest messages were cut"))
        try:
            estimated = agent.gauge.tokens(asked)
            if estimated > room:  # counted before sending: a request sure to be refused is not made
                raise ContextOverflow(f"the summarising request is about {estimated} tokens, over the window of "
                                      f"{room}; it was not sent", tokens=estimated, limit=room)
            response = await summarizer.complete(asked, _no_delta)
        except ContextOverflow as exc:
            if attempt == 2:
                agent.record(ev.ContextCut(messages=len(request.messages),
                                           reason=f"no summary could be made ({exc}); the summarised part is dropped"))
                return "", usage, cut
            room = max(room // 2, 1024)
            continue
        if _acted(response):  # a tool call is no summary: ask once more, with no tools to call
            response = await summarizer.complete(msgspec.structs.replace(asked, tools=[]), _no_delta)
            if _acted(response) or not summary_text(response.content).strip():
                agent.record(ev.ContextCut(messages=len(request.messages),
                                           reason="the summarising call answered with a tool call, not a summary; "
                                                  "the summarised part is dropped"))
                return "", response.usage, cut
        return summary_text(response.content), response.usage, cut
    return "", usage, 0  # pragma: no cover - the loop returns in its second pass


def _acted(response: Any) -> bool:
    """Whether a summarising call's answer holds a tool call (the summary is its text only)."""
    return any(isinstance(block, ToolCallBlock) for block in response.content)
