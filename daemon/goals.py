"""A session's goal (``agents.goal``) wired to the daemon: the driver, the evaluator agent
built on first use, and ``/goal`` typed as a message."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from musec.agents.core.events import AgentSpawned

from . import protocol as p
from .errors import BadRequest

if TYPE_CHECKING:
    from musec.agents.loop import Agent


def goal_arguments(text: str) -> str | None:
    """What follows ``/goal`` when a message is a ``/goal`` command, else ``None``."""
    stripped = text.strip()
    if stripped == "/goal" or stripped.startswith(("/goal ", "/goal\n")):
        return stripped[len("/goal"):].strip()
    return None


async def goal_message(session: Any, arguments: str) -> tuple[str, str, str]:
    """A message that is a ``/goal`` command (``musec run --resume ID "/goal resume"``): done
    as the interactive ``/goal`` is, then a turn of ``session`` when it leaves the goal
    active; returns the turn's (or the command's) exit reason, result and message."""
    from musec.agents.goal import GoalUsageError

    try:
        lines = await session.goals.command(arguments, idle=False)
    except GoalUsageError as exc:
        session._broadcast(lambda sub: p.Idle(id=sub.request_id, session_id=session.id, exit_reason="error"))
        return "error", "", str(exc)
    if session.goal.active:
        return await session._turn()
    text = "\n".join(lines)
    session._broadcast(lambda sub: p.Idle(id=sub.request_id, session_id=session.id, exit_reason="finished", result=text))
    return "finished", text, ""


def goal_driver(session: Any, req: p.StartSession, agent: Agent, build: Callable[..., Agent]) -> None:
    """The goal driver of ``session`` (a ``daemon.session.Session``), with its evaluator
    built on first use by ``build(req, agent_id=...)`` (``agent_setup.build_agent``);
    ``musec run --goal``'s goal is set when the session starts running.

    Raises:
        BadRequest: ``req.goal`` cannot be used (the message says why).
    """
    import msgspec
    from musec.agents.goal import EVALUATOR, GoalUsageError, make_spec
    from musec.agents.goal.driver import GoalDriver
    from musec.agents.goal.texts import EVALUATOR_PROMPT

    from .eventlog import iter_events

    if req.goal is not None:
        g = req.goal
        try:
            session.initial_goal = make_spec(g.condition, check=g.check, budget_usd=g.budget_usd or None,
                                             max_turns=g.max_turns or None, max_wall=g.max_wall_s or None)
        except GoalUsageError as exc:
            raise BadRequest(str(exc)) from None
    built: list[Agent] = []

    def evaluator() -> Agent:
        """The evaluator: the session's model, its own prompt, no tools, one answer per
        judgment; its conversation so far folded from the log (it remembers its verdicts)."""
        if built:
            return built[0]
        plain = msgspec.structs.replace(req, budget_usd=0.0, max_wall_s=0.0, max_turns=1)
        ev = build(plain, agent_id=EVALUATOR)
        ev.system_prompt, ev.tools = EVALUATOR_PROMPT, {}
        spawned = False
        for event in iter_events(session.log.path):
            ev.history.apply(event)
            spawned = spawned or (isinstance(event, AgentSpawned) and event.agent == EVALUATOR)
        session.workers[EVALUATOR] = ev  # its own events fold into its history from now on
        if not spawned:  # its prompt and tools, for replay
            session.record(AgentSpawned(agent=EVALUATOR, role="evaluator", model=ev.provider.model,
                                        system_prompt=ev.system_prompt, tools=[]))
        built.append(ev)
        return ev

    session.goals = GoalDriver(session.goal, session.record, agent, evaluator, session.kick)
