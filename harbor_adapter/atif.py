"""A musec session's event log as Harbor's ATIF trajectory, and its token accounting.

ATIF (Agent Trajectory Interchange Format) is Harbor's trajectory schema, defined by the
pydantic models in ``harbor.models.trajectories`` (harbor 0.26.0 writes ``ATIF-v1.8``).
The mapping, from musec's log (DESIGN §5):

- ``user_message`` -> a ``user`` step;
- each ``model_response`` of the main agent -> an ``agent`` step: its text blocks as the
  message, thinking text and reasoning summaries as ``reasoning_content``, ``tool_call``
  blocks as tool calls, the matching ``tool_finished``/``tool_interrupted`` events as the
  observation, and the call's usage and cost as the step's metrics;
- ``final_metrics`` sums every ``model_response`` of the session (background agents and
  workers included), exactly as ``musec cost`` does; each other agent's calls are an
  embedded ``subagent_trajectories`` entry (``trajectory_id`` = its musec agent id).

Token conventions: musec's ``input_tokens`` counts uncached input only (cache reads and
writes are separate); ATIF's and Harbor's prompt/input counts include the cached part, so
``prompt_tokens = input + cache_read + cache_write`` and ``cached_tokens = cache_read``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harbor.models.trajectories import (
    Agent,
    FinalMetrics,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a session log (``state/sessions/ID.jsonl``); a torn last line is skipped."""
    events = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            break
    return events


def usage_totals(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Harbor's token and cost totals of every ``model_response`` in ``events``.

    Returns:
        ``{"n_input_tokens", "n_cache_tokens", "n_output_tokens", "cost_usd", "calls",
        "by_model": {model: {...}}}``; input counts include cached input (Harbor's convention).
    """
    total = {"n_input_tokens": 0, "n_cache_tokens": 0, "n_output_tokens": 0, "cost_usd": 0.0, "calls": 0}
    by_model: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.get("type") != "model_response":
            continue
        u = ev.get("usage") or {}
        row = by_model.setdefault(str(ev.get("model", "")), {"n_input_tokens": 0, "n_cache_tokens": 0,
                                                             "n_output_tokens": 0, "cost_usd": 0.0})
        prompt = int(u.get("input_tokens", 0)) + int(u.get("cache_read_tokens", 0)) + int(u.get("cache_write_tokens", 0))
        for target in (total, row):
            target["n_input_tokens"] += prompt
            target["n_cache_tokens"] += int(u.get("cache_read_tokens", 0))
            target["n_output_tokens"] += int(u.get("output_tokens", 0))
            target["cost_usd"] += float(ev.get("cost_usd", 0.0))
        total["calls"] += 1
    total["cost_usd"] = round(total["cost_usd"], 8)
    total["by_model"] = by_model
    return total


def _iso(ts: Any) -> str | None:
    return datetime.fromtimestamp(float(ts), UTC).isoformat() if isinstance(ts, (int, float)) else None


def _results(events: list[dict[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for ev in events:
        if ev.get("type") == "tool_finished" and ev.get("call_id"):
            content = ev.get("content", "")
            if not isinstance(content, str):
                content = json.dumps(content, ensure_ascii=False)
            out[ev["call_id"]] = ("ERROR: " if ev.get("is_error") else "") + content
        elif ev.get("type") == "tool_interrupted" and ev.get("call_id"):
            out.setdefault(ev["call_id"], "interrupted (musec was stopped during the call)")
    return out


def _agent_step(step_id: int, ev: dict[str, Any], results: dict[str, str]) -> Step:
    blocks = ev.get("content") or []
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text").strip()
    # Anthropic thinking is logged as ``thinking``; OpenAI reasoning keeps only its summary
    # readable (the item itself is opaque, often encrypted, and never parsed).
    reasoning = "\n".join(str(b.get("thinking") if b.get("type") == "thinking" else b.get("summary") or "")
                          for b in blocks if b.get("type") in ("reasoning", "thinking")).strip()
    calls = [b for b in blocks if b.get("type") == "tool_call"]
    u = ev.get("usage") or {}
    cached = int(u.get("cache_read_tokens", 0))
    metrics = Metrics(
        prompt_tokens=int(u.get("input_tokens", 0)) + cached + int(u.get("cache_write_tokens", 0)),
        completion_tokens=int(u.get("output_tokens", 0)), cached_tokens=cached,
        cost_usd=float(ev.get("cost_usd", 0.0)),
        extra={"cache_write_tokens": int(u.get("cache_write_tokens", 0)), "latency_s": ev.get("latency_s"),
               "stop_reason": ev.get("stop_reason"), "seq": ev.get("seq")},
    )
    tool_calls = [ToolCall(tool_call_id=str(c.get("id")), function_name=str(c.get("name")),
                           arguments=c.get("input") if isinstance(c.get("input"), dict) else {"raw": c.get("input")})
                  for c in calls] or None
    observation = Observation(results=[
        ObservationResult(source_call_id=str(c.get("id")), content=results.get(str(c.get("id")), "(no result logged)"))
        for c in calls]) if calls else None
    return Step(step_id=step_id, timestamp=_iso(ev.get("ts")), source="agent", model_name=str(ev.get("model") or "") or None,
                message=text, reasoning_content=reasoning or None, tool_calls=tool_calls, observation=observation,
                metrics=metrics, llm_call_count=1)


def trajectory_from_events(events: list[dict[str, Any]], *, agent_version: str, model_name: str | None) -> Trajectory:
    """The ATIF trajectory of a session's log (the main agent's steps, every agent's totals).

    Raises:
        ValueError: the log holds no user message and no model response (nothing to show).
    """
    results = _results(events)
    started = next((e for e in events if e.get("type") == "session_started"), {})
    steps: list[Step] = []
    for ev in events:
        if ev.get("agent", "main") != "main":
            continue
        if ev.get("type") == "user_message":
            steps.append(Step(step_id=len(steps) + 1, timestamp=_iso(ev.get("ts")), source="user",
                              message=str(ev.get("text", ""))))
        elif ev.get("type") == "model_response":
            steps.append(_agent_step(len(steps) + 1, ev, results))
    if not steps:
        raise ValueError("the session log holds no user message and no model response")
    totals = usage_totals(events)
    ended = next((e for e in reversed(events) if e.get("type") == "session_ended"), {})
    others = sorted({str(e.get("agent")) for e in events if e.get("type") == "model_response"} - {"main"})
    subagents = [_subagent(agent, events, results, agent_version) for agent in others]
    return Trajectory(
        session_id=str(started.get("session_id") or "") or None,
        agent=Agent(name="musec", version=agent_version, model_name=model_name,
                    tool_definitions=[{"type": "function", "function": {"name": t}} for t in started.get("tools", [])] or None,
                    extra={"approval": started.get("approval"), "sandbox": started.get("sandbox"),
                           "background": started.get("background")}),
        steps=steps,
        notes=("steps are the main agent's; the other agents' are in subagent_trajectories, and "
               f"final_metrics include the model calls of {', '.join(others)} too (as `musec cost` does)")
        if others else None,
        subagent_trajectories=subagents or None,
        final_metrics=FinalMetrics(
            total_prompt_tokens=totals["n_input_tokens"], total_completion_tokens=totals["n_output_tokens"],
            total_cached_tokens=totals["n_cache_tokens"], total_cost_usd=totals["cost_usd"], total_steps=len(steps),
            extra={"model_calls": totals["calls"], "exit_reason": ended.get("exit_reason"), "turns": ended.get("turns")},
        ),
    )


def _subagent(agent: str, events: list[dict[str, Any]], results: dict[str, str], version: str) -> Trajectory:
    """A background agent's or worker's model calls as an embedded ATIF trajectory."""
    mine = [e for e in events if e.get("agent") == agent and e.get("type") == "model_response"]
    steps = [_agent_step(i + 1, ev, results) for i, ev in enumerate(mine)]
    t = usage_totals(mine)
    return Trajectory(
        trajectory_id=agent, agent=Agent(name=f"musec:{agent}", version=version), steps=steps,
        final_metrics=FinalMetrics(total_prompt_tokens=t["n_input_tokens"], total_completion_tokens=t["n_output_tokens"],
                                   total_cached_tokens=t["n_cache_tokens"], total_cost_usd=t["cost_usd"],
                                   total_steps=len(steps)),
    )
