"""What a resumed session goes on with (issue 13 case 5; fresh-user findings F-3, F-c).

A session resumed from its log goes on with the turn a stop left unfinished: a crash (its
log stops inside a turn), calls still unanswered (an approval stop), an active goal; and,
for a headless resume given no message, the turn a limit or an error stopped
(``UNFINISHED_STOPS``: ``--max-wall``, ``--max-turns``, ``--budget-usd``, Ctrl-C, a
provider down). Such a continuation is logged on ``session_resumed`` (``continues``); its
fold starts the turn count and the working time afresh, so the resume's limits count from
it. A headless resume with no message and nothing of that kind is refused before anything
is written (never ``finished``).

Approvals the stop left unanswered are decided under the resume's approval mode and logged
so (``approval_resolved`` by ``--approval auto``), or withdrawn when the mode asks again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from musec.agents.core.events import ApprovalResolved

from . import protocol as p
from .errors import BadRequest

if TYPE_CHECKING:
    from .session import Session

ResumeState = Any  # daemon.resume.ResumeState (not imported: resume imports this module)

# How a turn ends (``turn_ended.exit_reason``) when it stopped before the model was done;
# ``finished``, ``goal_unmet`` and a plan waiting for approval are done (for now).
UNFINISHED_STOPS = frozenset({"max_turns", "budget", "max_wall", "interrupted", "needs_approval",
                              "provider_unreachable", "error"})


def stopped_turn(session: Session, state: ResumeState, req: p.ResumeSession, sid: str, *, mid_turn: bool) -> str:
    """The stop whose turn this resume goes on with: that of a turn with calls still to
    answer (``mid_turn``: an approval stop), or, for a headless resume with no message, that
    of any turn a stop left unfinished; "" for a crash (its turn goes on as it was, its
    limits still counting), and when a message or a client gives the next turn.

    Raises:
        BadRequest: a headless resume with no message and nothing pending: the session's
            last turn finished, or its plan waits for ``--approve-plan`` (the message says
            what to give).
    """
    if state.in_turn:
        return ""
    if mid_turn:
        return state.last_stop if state.last_stop in UNFINISHED_STOPS else ""
    if req.task or req.interactive:
        return ""
    plan = session.plan
    again = f"musec run --resume {sid}" if req.session_id else "musec run --continue"
    if plan.awaiting_approval:
        if req.approve_plan:
            return ""
        raise BadRequest(f"session {sid} waits for its plan's approval ({plan.path}): `{again} --approve-plan` "
                         f'carries it out, `{again} "MESSAGE"` plans further')
    if state.last_stop in UNFINISHED_STOPS:
        return state.last_stop
    raise _nothing_pending(sid, state.last_stop, again)


def stopped_live_turn(session: Session, req: p.ResumeSession, sid: str) -> str:
    """As ``stopped_turn``, for a live session a headless resume with no message takes
    over (its client went away): the stop of its idle turn to go on with, "" when the
    resume has a message or a client, or the session is not idle.

    Raises:
        BadRequest: the session is idle with nothing pending (it is left as it is).
    """
    if req.task or req.interactive or session.status != "idle" or session.approvals:
        return ""
    again = f"musec run --resume {sid}" if req.session_id else "musec run --continue"
    if session.last_stop in UNFINISHED_STOPS and not session.plan.awaiting_approval:
        return session.last_stop
    raise _nothing_pending(sid, session.last_stop, again)


def _nothing_pending(sid: str, last_stop: str, again: str) -> BadRequest:
    ended = f"its last turn ended {last_stop}" if last_stop else "it has no turn to go on with"
    goal = f' (a paused goal: {again} "/goal resume")' if last_stop == "goal_unmet" else ""
    return BadRequest(f'session {sid} has nothing pending ({ended}); give the next message: {again} "MESSAGE"{goal}')


def settle_asked(session: Session, state: ResumeState, mode_given: bool) -> None:
    """Decide each approval the stop left unanswered under the agent's approval mode now:
    ``allow``/``deny`` by that mode when it decides the call by itself, else ``withdrawn``
    (the turn asks again). The loop decides the call again the same way when it runs it."""
    agent = session.agent
    mode = agent.approval_mode
    by_mode = f"--approval {mode}" if mode_given else f"the session's approval mode {mode}"
    for asked in state.approvals_asked.values():
        decision = _decision(agent, asked) if asked.agent == "main" and asked.source != "plan" else "ask"
        if decision in ("allow", "deny"):
            session.record(ApprovalResolved(agent=asked.agent, call_id=asked.call_id, decision=decision, by=by_mode))
        else:
            session.record(ApprovalResolved(agent=asked.agent, call_id=asked.call_id, decision="withdrawn",
                                            by="the resume (the session stopped before an answer; it asks again)"))


def _decision(agent: Any, asked: Any) -> str:
    """``allow``, ``deny`` or ``ask``: what ``agent``'s policy decides for the asked call now."""
    tool = agent.tools.get(asked.tool)
    if tool is None or asked.call_id not in {c.id for c in agent.history.unanswered_calls()}:
        return "ask"
    described = agent.policy.call(tool.name, tool.access, asked.input, tool.paths(asked.input))
    return agent.policy.decide(agent.approval_mode, described).decision
