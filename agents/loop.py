"""The agent loop: model call, tool calls, results, repeat (DESIGN §7).

One ``Agent`` per agent of a session. Its state is its ``History``, a fold over the events
it records; every step is recorded before it is acted on, so the daemon can be killed at
any point and the agent goes on from its log (DESIGN §5). Limits are checked before each
model call. Control flow leaves ``run`` as an ``Outcome``; nothing is raised for what the
model did, only for bugs.

Why over 500 lines: the loop is one state machine (query, calls, approvals, hooks, limits,
context accounting, compaction, the plan's end) and its steps read best together; what can live
elsewhere does (history.py, permissions.py, plan.py, context.py, compacting.py).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import msgspec

from .budget import ContextConfig, Whole, clearable_calls, fit_to_budget, kept_note, over_budget
from .compacting import compact
from .compaction import CompactionPolicy, ContextGauge
from .context import ContextUse, over, prompt_tokens
from .core import events as ev
from .core.conversation import (
    ModelRequest,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    request_digest,
)
from .core.errors import (
    AgentError,
    ContextOverflow,
    ProviderError,
    ProviderOverloaded,
    ProviderUnreachable,
)
from .core.faults import NO_FAULTS, Faults
from .core.words import counted
from .cutoff import Streamed, with_input
from .history import History
from .modelswitch import convert_history
from .permissions import Policy, Verdict
from .plan import PLAN_TOOL, plan_sha256, read_plan_document
from .providers.base import Provider, TextDelta
from .tools.base import Tool, ToolContext, ToolOutput, printable


class Recorder(Protocol):
    """Appends one event to the session log, folds it into the agents' histories
    (``History.apply``) and returns it with its ``seq`` and ``ts`` set; a write-ahead
    event (``persistence``) is on disk once ``Agent.durable`` returns."""

    def __call__(self, event: ev.AnyEvent) -> ev.AnyEvent: ...


async def _already_durable() -> None:
    """``Agent.durable`` of a recorder that fsyncs write-ahead events itself."""


def _unknown_inputs(tool: Tool, input: dict[str, Any]) -> list[str]:
    """Input keys the tool's schema does not name (a misspelt ``timeout`` must not be ignored)."""
    properties = tool.spec.input_schema.get("properties")
    if not isinstance(properties, dict) or not isinstance(input, dict):
        return []
    return sorted(k for k in input if k not in properties)


class NeedsApproval(AgentError):
    """A call needs a person's yes and nobody can give it (a headless run)."""


def how_to_approve(verdict: Verdict, mode: str, always: list[str] | None = None) -> str:
    """What a headless run stopped for approval can do, by what asked: the approval mode
    (another mode, or the allow rules answering "always" would save, ``always``), or a
    rule (``--approval never`` is the mode that does not ask for rules)."""
    if verdict.source == "mode":
        rules = ", ".join(f'"{r}"' for r in always or [])
        also = f", or allow just this with the rule {rules} (config.toml, [permissions] allow)" if rules else ""
        return f"approval mode {mode} asks for it: run interactively, or with --approval auto{also}"
    why = f" ({verdict.origin})" if verdict.origin else ""
    return (f"the {verdict.source} rule ask {verdict.rule}{why} asks for it: run interactively, or with "
            "--approval never (rules' asks are skipped; the sandbox is the only boundary)")


# ``ask(agent_id, call, tool) -> (decision, by)``: decision is allow/deny/always;
# raises NeedsApproval when no person can answer.
MAX_STOP_HOOK_SENDS = 3  # Stop hooks send the agent back at most this many times in a row
AskApproval = Callable[[str, ToolCallBlock, Tool], Awaitable[tuple[str, str]]]
OnDelta = Callable[[str, TextDelta], Awaitable[None]]


@dataclass
class Outcome:
    """How a run of the loop ended.

    ``exit_reason``: ``finished``, ``max_turns``, ``budget``, ``max_wall``, ``needs_approval``, ``error``,
    ``provider_unreachable``, ``interrupted`` or ``plan_proposed`` (planning ended with a
    plan, ``result``, that waits for approval). ``result`` is the model's final text.
    """

    exit_reason: str
    result: str = ""
    message: str = ""


class Agent:
    """One agent: its provider, tools, limits and history.

    Args:
        agent_id: ``main``, ``worker:NAME`` or a background role's name.
        provider: the model client.
        tools: the tools offered, in the order offered.
        ctx: where tools run.
        record: the session's event recorder.
        ask: how a needed approval is asked.
        on_delta: where streamed text goes (live only).
        approval_mode: ``auto``, ``ask``, ``read-only`` or ``never``.
        max_turns: model calls allowed after each person's message.
        system_prompt: the system prompt (stable, for prompt caching).
        store_blob: stores a large output, returns its sha256 hex.
        session_id: sent as the provider's cache key.
        cost_of: the dollar cost of a response's ``Usage`` (the catalog's list price).
        budget_usd: stop before a model call once this agent has spent this much (0: no cap).
        faults: the restart tests' crash points (``NO_FAULTS`` outside them).
        context_config: the tool-output budget and clearing settings (``[context]``).
        window_tokens: the model's context window (the catalog's), ``None`` when unknown.
        max_wall_s: stop before a model call once the agent has worked this many seconds
            since the person's latest message (``History.wall_s``; 0: no limit).

    Attributes:
        compaction: when this agent compacts (the daemon sets it from the catalog).
        summarizer: the provider that writes its summaries (``None``: its own).
        gauge: per-message token estimates for choosing what a compaction keeps
            (``compaction.ContextGauge``); ``context_use()`` decides when.
    """

    def __init__(
        self,
        *,
        agent_id: str,
        provider: Provider,
        tools: Sequence[Tool],
        ctx: ToolContext,
        record: Recorder,
        ask: AskApproval,
        on_delta: OnDelta,
        approval_mode: str,
        max_turns: int,
        system_prompt: str,
        store_blob: Callable[[bytes], str],
        session_id: str = "",
        cost_of: Callable[[Any], float] | None = None,
        budget_usd: float = 0.0,
        faults: Faults = NO_FAULTS,
        context_config: ContextConfig | None = None,
        window_tokens: int | None = None,
        max_wall_s: float = 0.0,
    ) -> None:
        self.agent_id = agent_id
        self.provider = provider
        self.tools = {t.name: t for t in tools}
        self.ctx = ctx
        self._record = record
        self._ask = ask
        self._on_delta = on_delta
        self.approval_mode = approval_mode
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self._store_blob = store_blob
        self.session_id = session_id
        self.cost_of = cost_of
        self.budget_usd = budget_usd
        self.faults = faults
        self.durable: Callable[[], Awaitable[None]] = _already_durable
        """Awaited before an effect starts (a tool runs, a file is written, the model is
        asked): returns once every write-ahead event recorded so far is on disk (the
        daemon's group commit, off the event loop; a recorder that makes write-ahead
        events durable itself needs nothing here)."""
        self.max_wall_s = max_wall_s
        # Another limit asked before each model call (a goal's budget, agents.goal): an
        # ``Outcome`` to stop with, or None to go on.
        self.extra_limit: Callable[[], Outcome | None] | None = None
        # Seconds left of that other limit's wall time (a goal's --max-wall), None: none.
        self.extra_wall_left: Callable[[], float] | None = None
        self._wall: anyio.CancelScope | None = None  # the running calls' wall-time deadline
        # Why the turn is being cancelled when not by the person (the daemon stopping, the
        # session ended): set by whoever cancels it, said to the model with each call cut off.
        self.stop_cause = ""
        # Cancel scopes that stop this agent for a reason of their own, each with that reason
        # (a fan-out worker's time limit): the first one cancelled names the cause.
        self.limits: list[tuple[anyio.CancelScope, str]] = []
        self.history = History(agent_id)
        self.context_config = context_config or ContextConfig()
        self.window_tokens = window_tokens
        self.model_id = ""  # the model as the person named it (``--model``); the daemon sets it
        # Approval rules and "always" answers; the daemon sets the session's (agent_setup).
        self.policy = Policy(workspace=ctx.workspace)
        # Set by the daemon for the main agent: the session's hooks (agents.hooks.Hooks) and the
        # AGENTS.md files of subdirectories, added when a file under them is first touched.
        self.hooks: Any = None
        self.subdirs: Any = None
        self._stop_hook_sends = 0  # consecutive Stop-hook sends back (MAX_STOP_HOOK_SENDS)
        # The log's redaction of a request (set by the daemon): a model_request's digest is
        # of the request as its redacted log rebuilds it, so replay checks it exactly.
        self.stored_request: Callable[[ModelRequest], ModelRequest] | None = None
        self._plan_proposed = False  # propose_plan succeeded in the calls being run
        self.compaction = CompactionPolicy()
        self.summarizer: Provider | None = None
        self.summary_cost_of: Callable[[Any], float] | None = None
        self.gauge = ContextGauge()
        self._compact_focus: str | None = None  # a manual compaction asked for, done before the next call
        self._streamed = Streamed()  # what the model call under way has streamed (cut off: kept)
        self._kept: ev.ModelResponse | None = None  # the part of an answer kept when its call failed

    def record(self, event: ev.AnyEvent) -> ev.AnyEvent:
        """Record an event of this agent; the session folds it into every agent's history."""
        if event.agent != self.agent_id:
            event = msgspec.structs.replace(event, agent=self.agent_id)
        return self._record(event)

    def context_use(self) -> ContextUse:
        """How full this agent's context is for the request it would send now: the last
        request as its provider counted it plus an estimate of what changed since
        (``agents/context.py``); ``over(use, fraction)`` compares it with the window."""
        use, _ = self._measure()
        return use

    def _measure(self) -> tuple[ContextUse, int]:
        meter = self.history.context
        meter.window_tokens = self.window_tokens
        meter.provider = meter.provider or self.provider.name
        return meter.measure(self.system_prompt, [t.spec for t in self.tools.values()], self.history.messages)

    def follow_mode(self, mode: str) -> None:
        """Work under the approval mode ``mode`` from the next tool call on: the mode the
        calls are decided by and the sandbox profile commands run under (a switch from
        ``read-only`` to ``auto`` makes the workspace writable to commands, and back)."""
        import msgspec

        from .approval import sandbox_profile

        self.approval_mode = mode
        self.ctx.sandbox = msgspec.structs.replace(self.ctx.sandbox, profile=sandbox_profile(mode))

    def switch_model(self, provider: Provider, *, model: str, window_tokens: int | None,
                     cost_of: Callable[[Any], float] | None, by: str) -> None:
        """Go on with ``provider`` from the next request (issue 12 part 7): the history is
        converted for it by the fold of the ``model_switched`` event recorded here
        (``agents/modelswitch.py``).

        Args:
            provider: the new model's client.
            model: the model as the person named it (catalog id or alias).
            window_tokens: its context window; cost_of: its prices.
            by: who asked: ``resume`` or ``interactive``.
        """
        old_model, old_provider = self.model_id, self.provider.name
        self.provider, self.window_tokens, self.cost_of, self.model_id = provider, window_tokens, cost_of, model
        self.record_switch(from_model=old_model, from_provider=old_provider, by=by)

    def record_switch(self, *, from_model: str, from_provider: str, by: str) -> None:
        """Record ``model_switched`` to this agent's present model (``model_id``, ``provider``)
        from ``from_model``; its fold converts the history. ``switch_model`` calls it; a
        resume that built the agent with the new model already calls it directly."""
        converted, dropped = convert_history(self.history.messages)
        meter = self.history.context
        meter.window_tokens, meter.provider = self.window_tokens, self.provider.name
        use, _ = meter.measure(self.system_prompt, [t.spec for t in self.tools.values()], converted)
        self.record(ev.ModelSwitched(model=self.model_id, provider=self.provider.name, from_model=from_model,
                                     from_provider=from_provider, by=by, dropped_blocks=dropped, **use.fields()))

    def build_request(self) -> ModelRequest:
        """The next model request, from the history alone."""
        return ModelRequest(
            model=self.provider.model,
            system=self.system_prompt,
            messages=list(self.history.messages),
            tools=[t.spec for t in self.tools.values()],
            session_id=self.session_id,
        )

    async def run(self) -> Outcome:
        """Run until the model stops, a limit is hit, or an approval cannot be had."""
        overflowed: ContextOverflow | None = None  # the last call's overflow, compacted for once
        while True:
            pending = self.history.unanswered_calls()
            if pending:
                # A wall limit passing interrupts the running tool, as Ctrl-C does.
                with anyio.move_on_after(self._wall_left()) as self._wall:
                    try:
                        await self._run_calls(pending)
                    except NeedsApproval as exc:
                        return Outcome("needs_approval", message=str(exc))
                if self._wall.cancelled_caught:
                    return self._wall_stop()
                if self._plan_proposed:
                    return self._propose_plan()
                continue
            if self.history.turns_since_user >= self.max_turns:
                return Outcome("max_turns", message=f"stopped after {counted(self.max_turns, 'model turn')} (--max-turns)")
            if self.budget_usd and self.history.cost_usd >= self.budget_usd:
                return Outcome("budget", message=f"stopped at ${self.history.cost_usd:.4f}, the --budget-usd cap is ${self.budget_usd:g}")
            if self.max_wall_s and self.history.wall_s(time.time()) >= self.max_wall_s:
                return self._wall_stop()
            stop = self.extra_limit() if self.extra_limit is not None else None
            if stop is not None:
                return stop
            self._clear_old_results()
            try:
                request = await self._compact_if_due(overflowed)
            except (ProviderUnreachable, ProviderOverloaded) as exc:
                return Outcome("provider_unreachable", message=f"compacting the history failed: {exc}")
            except (ProviderError, AgentError) as exc:
                return Outcome("error", message=f"compacting the history failed: {exc}")
            if (refused := self._over_window()) is not None:  # counted before sending: never a doomed call
                if overflowed is not None:
                    return self._still_over(refused)
                overflowed = refused
                continue
            use, chars = self._measure()
            await self.durable()  # what the model is asked to act on (a message, an approval) is on disk
            self.record(ev.ModelRequest(
                provider=self.provider.name, model=self.provider.model,
                digest=request_digest(self.stored_request(request) if self.stored_request else request),
                messages=len(request.messages),
                endpoint=getattr(self.provider, "endpoint", ""), catalog_id=getattr(self.provider, "catalog_id", ""),
                request_chars=chars, **use.fields(),
            ))
            started = time.monotonic()
            try:
                with anyio.move_on_after(self._wall_left()) as wall:  # made again when the turn goes on
                    response = await self._complete(request, wall, started)
            except ContextOverflow as exc:
                if overflowed is not None:  # one compaction and one retry: never a loop
                    return self._still_over(exc)
                overflowed = exc
                continue
            except (ProviderError, AgentError) as exc:
                return self._failed(exc)
            if wall.cancelled_caught:
                return self._wall_stop()
            overflowed = None
            self.gauge.observe(request, response.usage)
            self.record(ev.ModelResponse(
                content=list(response.content),
                stop_reason=response.stop_reason,
                usage=msgspec.to_builtins(response.usage),
                model=response.model or self.provider.model,
                provider=self.provider.name,
                endpoint=getattr(self.provider, "endpoint", ""), catalog_id=getattr(self.provider, "catalog_id", ""),
                provider_ids=dict(response.provider_ids),
                latency_s=round(time.monotonic() - started, 3),
                cost_usd=round(self.cost_of(response.usage), 8) if self.cost_of else 0.0,
                **self._reported(response.usage),
            ))
            if not response.tool_calls:
                if await self._hook_stop(response.text):
                    continue
                return Outcome("finished", result=response.text)

    def _over_window(self) -> ContextOverflow | None:
        """An overflow, not sent: the next request is estimated over the model's known window
        (``context_use``: the last reported count plus an estimate of what changed since)."""
        if not self.window_tokens:
            return None
        estimated = self.context_use().tokens
        if estimated <= self.window_tokens:
            return None
        return ContextOverflow(f"the request is about {estimated} tokens, over the model's context window of "
                               f"{self.window_tokens}; it was not sent", tokens=estimated, limit=self.window_tokens)

    @staticmethod
    def _still_over(exc: ContextOverflow) -> Outcome:
        """The outcome of a request still over the window after one compaction for it."""
        return Outcome("error", message=f"{exc}; the request is still over the window after compacting "
                       "once; start a new session or use a model with a larger window")

    def _wall_left(self) -> float:
        """Seconds of work left before a wall-time limit (``--max-wall``, a goal's); ``inf``: none."""
        left = self.max_wall_s - self.history.wall_s(time.time()) if self.max_wall_s else math.inf
        return min(left, self.extra_wall_left()) if self.extra_wall_left is not None else left

    def _wall_stop(self) -> Outcome:
        """The outcome of a wall-time limit reached: the run's own, else the other's (a goal's)."""
        worked = self.history.wall_s(time.time())
        own_left = self.max_wall_s - worked if self.max_wall_s else math.inf
        other_left = self.extra_wall_left() if self.extra_wall_left is not None else math.inf
        if own_left > other_left:
            stop = self.extra_limit() if self.extra_limit is not None else None
            return stop or Outcome("max_wall", message="stopped: the goal's wall-time limit (--max-wall) is spent")
        return Outcome("max_wall", message=f"stopped after {worked:.0f} s of work, the --max-wall limit is {self.max_wall_s:g} s")

    def _reported(self, usage: Usage) -> dict[str, Any]:
        """The context fields of a ``model_response``: the provider's count of the request
        and its answer (none when it reported no input, as the scripted model)."""
        tokens = prompt_tokens(usage)
        if tokens <= 0:
            return {}
        return ContextUse(tokens + usage.output_tokens, self.window_tokens).fields()

    def _clear_old_results(self) -> None:
        """Past ``[context].clear_at`` of the window, replace the results of all but the most
        recent calls by one-line stubs, in one logged batch (``agents/budget.py``)."""
        config = self.context_config
        if not config.clear_at or not over(self.context_use(), config.clear_at):
            return
        ids = clearable_calls(self.history.messages, config.keep_tool_results, self.history.cleared)
        if not ids:
            return
        wanted = set(ids)
        results = {b.call_id: b for m in self.history.messages if m.role == "user" for b in m.content
                   if isinstance(b, ToolResultBlock) and b.call_id in wanted}
        where = {}
        for call_id in ids:
            blob = self.history.result_blobs.get(call_id) or self._store_blob(results[call_id].content.encode("utf-8", "surrogateescape"))
            where[call_id] = self._blob_where(blob)
        self.record(ev.ToolResultsCleared(where=where, tokens_before=self.context_use().tokens))

    def request_compaction(self, focus: str = "") -> None:
        """Compact before the next model call (``/compact [focus]``, ``musec compact``)."""
        self._compact_focus = focus

    async def compact_now(self, focus: str = "") -> bool:
        """Compact at once (the agent is idle); ``False`` when there was nothing to summarise."""
        self._compact_focus = None
        return await compact(self, reason="manual", focus=focus)

    async def _compact_if_due(self, overflow: ContextOverflow | None) -> ModelRequest:
        """The next request, after compacting the history when it is due: an overflow
        error just now, a compaction asked for, one a crash cut off, or a request over
        ``compact_at`` of the window (``context_use``, after old tool results were
        cleared: the cheaper step first). A resumed session over its window, or one
        switched to a model with a smaller one, compacts here before its next request."""
        request = self.build_request()
        pending = self.history.pending
        if overflow is not None:
            reason, focus = "overflow", ""
            if overflow.limit and (self.window_tokens or overflow.limit + 1) > overflow.limit:
                # the provider said its window: hold to it from now on (the catalog's was unknown or larger)
                self.window_tokens = overflow.limit
        elif self._compact_focus is not None:
            reason, focus = "manual", self._compact_focus
        elif pending is not None:
            reason, focus = pending.reason or "threshold", pending.focus
        elif over(self.context_use(), self.compaction.compact_at):
            reason, focus = "threshold", ""
        else:
            return request
        self._compact_focus = None
        if await compact(self, reason=reason, focus=focus, overflow=overflow):
            request = self.build_request()
        return request

    def summary_cost(self, usage: Any) -> float:
        """Dollars of a summarising call's usage (its model's list price)."""
        cost_of = self.summary_cost_of if self.summarizer is not None else self.cost_of
        return cost_of(usage) if cost_of else 0.0

    async def _delta(self, delta: TextDelta) -> None:
        self.faults.crash_at("mid_model_stream")
        if self._streamed.take(delta):
            await self._on_delta(self.agent_id, delta)

    async def _complete(self, request: ModelRequest, wall: anyio.CancelScope, started: float) -> Any:
        """The model's answer to ``request``; one cut off (Ctrl-C, Esc, the wall-time limit:
        ``wall`` cancelled) is recorded as far as it had streamed, then the cancel goes on."""
        self._streamed, self._kept = Streamed(), None
        try:
            return await self.provider.complete(request, self._delta)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self._record_cut_off("max_wall" if wall.cancel_called else "person", started)
            raise
        except ContextOverflow:
            raise  # compacted and asked again: nothing of it is kept
        except ProviderError:  # its retries ran out mid-stream: what the person saw is kept
            self._kept = self._record_cut_off("error", started)
            raise

    def _failed(self, exc: AgentError) -> Outcome:
        """The outcome of a model call that failed: its error, what was kept of the answer
        it had begun, and what to do, in one line."""
        reason = "provider_unreachable" if isinstance(exc, ProviderUnreachable | ProviderOverloaded) else "error"
        message = " ".join(str(exc).split())  # one line, whatever the server wrote
        cut, self._kept = self._kept, None
        if cut is None:
            return Outcome(reason, message=message)
        chars = sum(len(b.text) for b in cut.content if isinstance(b, TextBlock))
        kept = f"the {counted(chars, 'character')} it streamed are kept, " if chars else ""
        tokens = counted(int(cut.usage.get("output_tokens", 0)), "output token")
        what = "check the network or the server, then" if reason == "provider_unreachable" else "to try again,"
        return Outcome(reason, message=f"{message}; the answer broke off: {kept}its {'about ' if cut.usage_estimated else ''}"
                                       f"{tokens} counted in /cost; {what} send a message to go on")

    def _record_cut_off(self, by: Literal["person", "max_wall", "error"], started: float) -> ev.ModelResponse | None:
        """Record the part of an answer streamed before it was cut off, and what it cost
        (``agents/cutoff.py``); nothing when the stream had not begun."""
        part = self._streamed
        if not part.started:
            return None
        usage, estimated = part.usage()
        # the stream said no input (OpenAI's say it at their end): the meter's estimate of the request
        usage, input_estimated = with_input(usage, self.context_use().tokens)
        return self.record(ev.ModelResponse(
            content=[TextBlock(part.text)] if part.text.strip() else [],
            stop_reason="interrupted",
            usage=msgspec.to_builtins(usage),
            model=self.provider.model,
            provider=self.provider.name,
            endpoint=getattr(self.provider, "endpoint", ""), catalog_id=getattr(self.provider, "catalog_id", ""),
            latency_s=round(time.monotonic() - started, 3),
            cost_usd=round(self.cost_of(usage), 8) if self.cost_of else 0.0,
            interrupted=by, usage_estimated=estimated, input_estimated=input_estimated or ev.UNSET,
            **self._reported(usage),
        ))

    async def _run_calls(self, calls: list[ToolCallBlock]) -> None:
        for n, call in enumerate(calls):
            try:
                await self._run_call(call)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    self._answer_interrupted(call, calls[n + 1 :])
                raise

    def _answer_interrupted(self, call: ToolCallBlock, rest: list[ToolCallBlock]) -> None:
        """Answer the call cut off and the calls not yet run, so the history stays valid,
        saying who cut it off: the person (Ctrl-C, Esc), a wall-time limit passing, one of
        ``limits`` (a worker's time limit), or what ``stop_cause`` names (the daemon
        stopping, the session being ended)."""
        by_wall = self._wall is not None and self._wall.cancel_called
        limit = next((why for scope, why in self.limits if scope.cancel_called), "")
        if by_wall or limit:
            why = limit or "the wall-time limit (--max-wall) passed"
            reason = f"stopped: {why}"
        elif self.stop_cause:
            why = reason = self.stop_cause
        else:
            why, reason = "the person interrupted the turn", "interrupted by the person"
        if call.id in {c.id for c in self.history.unanswered_calls()}:
            self.record(ev.ToolInterrupted(call_id=call.id, tool=call.name, reason=reason))
        for other in rest:
            self.record(ev.ToolFinished(call_id=other.id, tool=other.name, is_error=True,
                                        content=f"not run: {why}", untrusted=False))

    async def _run_call(self, call: ToolCallBlock) -> None:
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(self.tools)
            self.record(ev.ToolFinished(call_id=call.id, tool=call.name, is_error=True,
                                        content=f"unknown tool {call.name!r}; the tools are: {names}", untrusted=False))
            return
        unknown = _unknown_inputs(tool, call.input)
        if unknown and call.input_error is None:
            known = ", ".join(tool.spec.input_schema.get("properties", {}))
            self.record(ev.ToolFinished(
                call_id=call.id, tool=call.name, is_error=True,
                content=f"the tool was not run: unknown input {', '.join(unknown)}; {call.name} takes: {known}",
                untrusted=False))
            return
        if call.input_error is not None:
            self.record(ev.ToolFinished(
                call_id=call.id, tool=call.name, is_error=True,
                content=f"the tool was not run: its input is not a valid JSON object ({call.input_error}); send the call again",
                untrusted=False))
            return
        amended = await self._hook_pre_tool_use(call)
        if amended is None:
            return
        call, hook_context = amended
        described = self.policy.call(call.name, tool.access, call.input, tool.paths(call.input))
        verdict = self.policy.decide(self.approval_mode, described)
        if verdict.decision == "ask":
            hooked = await self._hook_permission_request(call)
            if hooked is not None:
                verdict = Verdict(hooked, source="hook")
        if verdict.decision == "ask":
            preview = getattr(tool, "preview", None)  # a file edit's diff, to see before answering
            always = self.policy.always_rules(described)
            self.record(ev.ApprovalRequested(call_id=call.id, tool=call.name, input=call.input,
                                             rule=verdict.rule, source=verdict.source, always=always,
                                             preview=await preview(call.input, self.ctx) or ev.UNSET if preview else ev.UNSET))
            try:
                answer, by = await self._ask(self.agent_id, call, tool)
            except NeedsApproval as exc:
                raise NeedsApproval(f"{exc}; {how_to_approve(verdict, self.approval_mode, always)}") from None
            saved = self.policy.remember(described) if answer == "always" else {}
            self.record(ev.ApprovalResolved(call_id=call.id, decision=answer, by=by, **saved))
            verdict = Verdict("deny" if answer == "deny" else "allow", verdict.rule, "person")
        if verdict.decision == "deny":
            self.record(ev.ToolFinished(call_id=call.id, tool=call.name, is_error=True,
                                        content=verdict.refusal(self.approval_mode, tool.access), untrusted=False,
                                        rule=verdict.rule, source=verdict.source))
            return
        self.record(ev.ToolStarted(call_id=call.id, tool=call.name, input=call.input, rule=verdict.rule, source=verdict.source))
        await self.durable()  # write-ahead: the start is on disk before the tool runs
        self.faults.crash_at("after_tool_started")
        t0 = time.monotonic()
        try:
            output = await tool.run(call.input, self._call_context(call))
        except Exception as exc:  # a tool's bug is the call's error, never the session's end
            output = ToolOutput(content=f"the tool failed: {type(exc).__name__}: {exc}", is_error=True)
        if not output.is_error:
            filtered = self.policy.filter_listing(call.name, output.content)
            if filtered != output.content:
                output = msgspec.structs.replace(output, content=filtered, full_output=None)
        output = await self._hook_post_tool_use(call, output, hook_context)
        self.faults.crash_at("before_tool_finished")
        self._finish(call, output, time.monotonic() - t0)
        if not output.is_error:
            self._add_subdir_instructions(tool, call)
            self._plan_proposed = self._plan_proposed or call.name == PLAN_TOOL

    def _propose_plan(self) -> Outcome:
        """Planning ends with the plan: ``plan_proposed`` is logged and the run stops, for
        the daemon to ask for approval (``daemon/plans.py``)."""
        self._plan_proposed = False
        text = read_plan_document(self.ctx.plan_document)
        self.record(ev.PlanProposed(sha256=plan_sha256(text), text=text, path=self.ctx.plan_document))
        return Outcome("plan_proposed", result=text)

    def _call_context(self, call: ToolCallBlock) -> ToolContext:
        """The tool context of one call: the agent's, with the file tools' write-ahead
        announcement of an edit (``file_edit_started``) tied to this call."""

        def announce(edit: Any, path: Path, tmp: Path) -> None:  # called from the tool's worker thread
            abs_path, tmp_path = str(path), str(tmp)
            event = ev.FileEditStarted(
                call_id=call.id, path=edit.path, before_sha256=edit.before_sha256, after_sha256=edit.after_sha256,
                diff=edit.diff, abs_path=abs_path if printable(abs_path) == abs_path else "",
                tmp_path=tmp_path if printable(tmp_path) == tmp_path else "")
            anyio.from_thread.run(self._record_durably, event)  # write-ahead: on disk before the file is written

        return msgspec.structs.replace(self.ctx, announce_edit=announce)

    async def _record_durably(self, event: ev.AnyEvent) -> None:
        self.record(event)
        await self.durable()

    def _finish(self, call: ToolCallBlock, output: ToolOutput, duration_s: float) -> None:
        for edit in output.edits:
            self.record(ev.FileEdited(call_id=call.id, path=edit.path, before_sha256=edit.before_sha256,
                                      after_sha256=edit.after_sha256, diff=edit.diff))
        full = output.full_output
        blob = self._store_blob(full) if full is not None else None
        # The size of what the tool produced in all, when the model sees only part of it.
        whole_lines, at_least, whole_bytes = output.whole_lines, output.whole_lines_at_least, None
        if full is not None:  # capped by the tool: the blob keeps the stream (its head and tail past the memory cap)
            kept = Whole.of_blob(output.produced_bytes or len(full), full)
            whole_lines, at_least, whole_bytes = kept.kept_lines, kept.kept_bytes < kept.produced_bytes, kept.produced_bytes
        if over_budget(output.content, self.context_config.tool_output_tokens):
            if full is None:  # the whole text is kept as a blob the model may read
                full = output.content.encode("utf-8", "surrogateescape")
                blob = self._store_blob(full)
                if whole_lines is None:
                    whole_lines = len(output.content.splitlines())
            output = self._fit_to_budget(call, output, str(blob), full if output.full_output is not None else None)
        elif full is not None and blob is not None:  # capped by the tool itself: say where the rest is
            output = msgspec.structs.replace(output, content=output.content + kept_note(
                call.name, Whole.of_blob(output.produced_bytes or len(full), full), self._blob_where(blob)))
        # What a tool produced may quote files, output or other agents' text: always data.
        self.record(ev.ToolFinished(
            call_id=call.id, tool=call.name, is_error=output.is_error, content=output.content, untrusted=True,
            duration_s=round(duration_s, 3),
            blob=blob if blob is not None else ev.UNSET,
            full_bytes=len(full) if full is not None else ev.UNSET,
            exit_status=output.exit_status if output.exit_status is not None else ev.UNSET,
            timed_out=True if output.timed_out else ev.UNSET,
            whole_lines=whole_lines if whole_lines is not None else ev.UNSET,
            whole_lines_at_least=True if whole_lines is not None and at_least else ev.UNSET,
            whole_bytes=whole_bytes if whole_bytes is not None else ev.UNSET,
        ))

    def _blob_where(self, blob: str) -> str:
        """A blob's path, as the model may read it."""
        return str(self.ctx.blob_dir / blob[:2] / blob[2:]) if self.ctx.blob_dir else f"blob {blob}"

    def _fit_to_budget(self, call: ToolCallBlock, output: ToolOutput, blob: str, full: bytes | None) -> ToolOutput:
        """The output cut to the tool-output budget (``agents.budget``); its whole text is
        the blob ``blob`` (``full``, when the tool had capped its output itself), which the
        note names by path and counts."""
        where = self._blob_where(blob)
        whole = Whole.of_blob(output.produced_bytes or len(full), full) if full is not None else None
        fitted = fit_to_budget(output.content, self.context_config.tool_output_tokens, tool=call.name,
                               input=call.input, blob_path=where, whole=whole)
        return msgspec.structs.replace(output, content=fitted)

    # -- lifecycle points (agents.hooks): each a named call, a no-op without hooks ----------

    def _described(self, call: ToolCallBlock) -> Any:
        """The call as the permission rules see it, for a hook matcher ``Tool(pattern)``;
        ``None`` when that cannot be said (the matcher then goes by the tool's name)."""
        tool = self.tools.get(call.name)
        if tool is None:
            return None
        try:
            return self.policy.call(call.name, tool.access, call.input, tool.paths(call.input))
        except Exception:  # noqa: BLE001 - an input the tool will refuse itself
            return None

    async def _hook_pre_tool_use(self, call: ToolCallBlock) -> tuple[ToolCallBlock, list[str]] | None:
        """PreToolUse: ``None`` when a hook blocked the call (answered here), else the call
        with the input the hooks amended, and their added context."""
        if self.hooks is None:
            return call, []
        outcome = await self.hooks.run("PreToolUse", {"tool_name": call.name, "tool_input": call.input, "tool_use_id": call.id},
                                       tool=call.name, call=self._described(call), agent=self.agent_id)
        if outcome.blocked:
            self.record(ev.ToolFinished(call_id=call.id, tool=call.name, is_error=True,
                                        content=f"the tool was not run: a hook blocked it: {outcome.reason}",
                                        untrusted=False))
            return None
        if outcome.updated_input is not None:
            call = msgspec.structs.replace(call, input=outcome.updated_input)
        return call, outcome.context

    async def _hook_permission_request(self, call: ToolCallBlock) -> Literal["allow", "deny"] | None:
        """PermissionRequest, before a person is asked: ``deny`` when a hook refused the
        call, ``allow`` when one of the person's approved it, ``None``: ask."""
        if self.hooks is None:
            return None
        outcome = await self.hooks.run("PermissionRequest", {"tool_name": call.name, "tool_input": call.input},
                                       tool=call.name, call=self._described(call), agent=self.agent_id)
        return "deny" if outcome.blocked else "allow" if outcome.approved else None

    async def _hook_post_tool_use(self, call: ToolCallBlock, output: ToolOutput, context: list[str]) -> ToolOutput:
        """PostToolUse: the hooks' context and feedback are appended to the result."""
        if self.hooks is not None:
            outcome = await self.hooks.run("PostToolUse", {
                "tool_name": call.name, "tool_input": call.input,
                "tool_response": {"content": output.content[:20_000], "is_error": output.is_error}},
                tool=call.name, call=self._described(call), agent=self.agent_id)
            context = [*context, *outcome.context, *([outcome.reason] if outcome.blocked else [])]
        if not context:
            return output
        notes = "\n".join(f"[hook: {c}]" for c in context)
        return msgspec.structs.replace(output, content=f"{output.content}\n\n{notes}")

    async def _hook_stop(self, last_text: str) -> bool:
        """Stop: whether a hook sent the agent back to work (its reason becomes user text).

        The hooks get ``stop_hook_active`` true while the agent is working on because a Stop
        hook sent it back; after ``MAX_STOP_HOOK_SENDS`` such sends in a row the agent stops
        anyway (a hook that always blocks must not run the model to ``--max-turns``), and
        says so."""
        if self.hooks is None:
            return False
        outcome = await self.hooks.run("Stop", {"stop_hook_active": self._stop_hook_sends > 0, "last_message": last_text},
                                       agent=self.agent_id)
        if not outcome.blocked:
            self._stop_hook_sends = 0
            return False
        if self._stop_hook_sends >= MAX_STOP_HOOK_SENDS:
            self._stop_hook_sends = 0
            self.record(ev.HookContext(hook_event="Stop", text=(
                f"[a Stop hook asked again to go on ({outcome.reason}), but Stop hooks already sent you back "
                f"{MAX_STOP_HOOK_SENDS} times in a row: stopped here]")))
            return False
        self._stop_hook_sends += 1
        self.record(ev.HookContext(hook_event="Stop", text=(
            f"[a Stop hook sent you back to work ({self._stop_hook_sends}/{MAX_STOP_HOOK_SENDS}): {outcome.reason}]")))
        return True

    def _add_subdir_instructions(self, tool: Tool, call: ToolCallBlock) -> None:
        """The AGENTS.md files of directories a read or edit first reached, as events."""
        if self.subdirs is None or call.name not in ("read_file", "edit_file", "write_file"):
            return
        from .instructions import render_added

        for raw in tool.paths(call.input):
            path = Path(raw) if Path(raw).is_absolute() else self.ctx.workspace / raw
            for f in self.subdirs.for_path(Path(os.path.realpath(path))):
                if f.path not in self.history.instructions_loaded:
                    self.record(ev.InstructionsAdded(path=f.path, rel=f.rel, text=render_added(f)))
