"""Plan mode in a session (issue 14): starting it, and the plan's approval between turns.

The agent ends planning with ``propose_plan`` (its loop logs ``plan_proposed`` and stops,
``agents/plan.py``). The approval is asked like a tool call's, through the same machinery
(``approval_requested``, any attached client answers with ``ApprovalAnswer``, the first
answer wins, ``approval_resolved``), with the plan's answers (``PlanAction``):

| answer          | what happens                                                         |
|-----------------|----------------------------------------------------------------------|
| ``approve``     | ``plan_approved``; the agent carries it out in the session's mode     |
| ``approve_auto``| the same, in approval mode ``auto`` (edits without asking)            |
| ``edit``        | the person's edited text is what is approved (and written back)       |
| ``fresh``       | approved; the agent starts again from the plan alone                  |
| ``feedback``    | not approved: the feedback is the person's message; planning goes on  |
| ``grill``       | not yet: the critic grills it first (``daemon/grill.py``), then ask again |

Headless: ``--approve-plan`` approves (``by`` ``--approve-plan``); ``musec run --plan``
without it ends with the plan as the result; otherwise the run ends ``needs_approval``
naming the plan document (exit 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from musec.agents.plan import write_plan_document

Session = Any  # daemon.session.Session (not imported: the session imports this module)

PLAN_ACTIONS = ("approve", "approve_auto", "edit", "fresh", "feedback", "grill")


def plan_path(session: Session) -> str:
    """The session's plan document: ``state/plans/<session>.md`` (outside the workspace)."""
    return str(Path(session.log.path).parent.parent / "plans" / f"{session.id}.md")


def start_planning(session: Session, task: str, *, only: bool = False) -> None:
    """Put the main agent in plan mode (``plan_started``, then the ``plan`` profile)."""
    from musec.agents.core.events import PlanStarted
    from musec.agents.plan import enter_plan_mode

    path = plan_path(session)
    session.record(PlanStarted(task=task, path=path, only=only))
    enter_plan_mode(session.agent, path)


def restore_mode(session: Session, approval: str, approve_plan: bool, *, approval_given: bool) -> None:
    """After a resume's fold: the main agent back in plan mode, or in the mode its plan's
    approval chose (unless the resume named an approval mode); ``approval`` is the mode a
    plain "approve" gives, ``approve_plan`` the resume's ``--approve-plan``."""
    from musec.agents.plan import enter_plan_mode, leave_plan_mode

    session.base_approval, session.approve_plan = approval, approve_plan
    if session.plan.planning:
        enter_plan_mode(session.agent, session.plan.path)
    elif session.plan.approval and not approval_given:
        leave_plan_mode(session.agent, session.plan.approval)


def builtin(session: Session, text: str) -> tuple[str, str]:
    """The built-in skills that change what a person's message does.

    ``/plan [TASK]`` enters plan mode; the task (if any) is then planned. ``/grill [FILE]``
    grills a plan before its approval: the plan in FILE (in the workspace), else the
    session's latest plan, else (no plan yet) the plan the agent will propose for the task
    that follows.

    Returns:
        ``("submit", message)``: record and run ``message``; ``("grill", plan)``: settle
        ``plan`` (grilled first) now; ``("idle", note)``: nothing to run.
    """
    what, said = _builtin(session, text)
    if what == "idle":
        from . import protocol as p

        session._broadcast(lambda sub: p.Idle(id=sub.request_id, session_id=session.id, exit_reason="ready", note=said))
    return what, said


def _builtin(session: Session, text: str) -> tuple[str, str]:
    name, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    if name == "/plan":
        if not session.plan.planning:
            start_planning(session, rest)
        return ("submit", rest) if rest else ("idle", "plan mode is on: give the task (`/approval MODE` leaves plan mode)")
    if name != "/grill":
        return "submit", text
    session.grill_next = True
    found = Path(session.agent.ctx.workspace) / rest if rest else None
    plan = found.read_text(encoding="utf-8", errors="replace") if found is not None and found.is_file() else ""
    plan = plan or session.plan.proposed or session.plan.approved
    if not plan:
        if not session.plan.planning:
            start_planning(session, rest)
        return ("submit", rest) if rest else ("idle", "no plan yet: give the task; its plan is grilled before approval")
    if not session.plan.planning:
        start_planning(session, f"grill the plan{' in ' + rest if found is not None and found.is_file() else ''}")
    write_plan_document(session.plan.path, plan)
    return "grill", plan


def init_session(session: Session) -> None:
    """The plan's part of a new ``Session``: its plan (a fold over its events), the headless
    approval (``--approve-plan``), the mode a plain "approve" gives, the grill to come, the critic."""
    from musec.agents.plan import PlanState

    session.plan = PlanState()
    session.approve_plan = False  # --approve-plan: a proposed plan is approved without asking
    session.base_approval = "ask"
    session.grill_next = False  # /grill, --grill: the next proposed plan is grilled before approval
    session.make_critic = None  # (route) -> agents.roles.critic.Critic, set by the daemon
    session.critic = None  # made at the first /grill (daemon/grill.py, with the grill's rounds and end)


async def run_agent(session: Session, pending_plan: str | None = None) -> Any:
    """Run the main agent; a plan it proposes (or ``pending_plan``, found on resume or given
    to ``/grill``) is settled (``settle_plan``) until the agent stops otherwise."""
    from musec.agents.loop import Outcome

    outcome = Outcome("plan_proposed", result=pending_plan) if pending_plan is not None else await session.agent.run()
    while outcome.exit_reason == "plan_proposed":
        outcome = await settle_plan(session, outcome)
    return outcome


async def settle_plan(session: Session, outcome: Any) -> Any:
    """Ask for the proposed plan's approval and go on; return the outcome of the turn.

    Called while ``outcome.exit_reason`` is ``plan_proposed``: after an approval the
    agent runs again (carrying the plan out), after feedback it plans again; either way
    the agent's next outcome is returned (which may be another proposal).
    """
    from musec.agents.loop import Outcome

    plan = session.plan
    text = outcome.result
    if session.grill_next:
        from .grill import grill_plan

        session.grill_next = False
        text = await grill_plan(session, text)
    if plan.only and not session.approve_plan:
        return Outcome("finished", result=text, message=f"the plan is in {plan.path}")
    if session.approve_plan:
        action, by, edited = "approve", "--approve-plan", ""
    elif not session.interactive:
        return Outcome("needs_approval", message=(
            f"the plan needs approval: {plan.path}; read it, then run `musec run --resume {session.id} "
            f"--approve-plan` (or resume it interactively: `musec resume {session.id}`)"))
    else:
        from musec.agents.loop import NeedsApproval

        try:
            action, by, edited = await _ask(session, text)
        except NeedsApproval:  # the person's clients went away
            return Outcome("needs_approval", message=f"the plan needs approval: {plan.path}; run `musec run --resume "
                                                     f"{session.id} --approve-plan` to carry it out")
    if action == "grill":
        session.grill_next = True
        return Outcome("plan_proposed", result=text)
    from musec.agents.core.events import PlanApproved, UserMessage

    if action == "feedback":
        note = edited.strip() or "(no feedback given)"
        session.record(UserMessage(text=f"[the person did not approve the plan; keep planning] {note}"))
        return await session.agent.run()
    if action == "edit" and edited.strip():
        text = edited if edited.endswith("\n") else edited + "\n"
        write_plan_document(plan.path, text)
    approval = "auto" if action == "approve_auto" else session.base_approval
    from musec.agents.plan import leave_plan_mode, plan_sha256

    session.record(PlanApproved(sha256=plan_sha256(text), by=by, action=action, approval=approval, text=text))
    leave_plan_mode(session.agent, approval)
    return await session.agent.run()


async def _ask(session: Session, text: str) -> tuple[str, str, str]:
    """Ask the attached clients; return (action, by, edited text or feedback)."""
    from musec.agents.core.events import ApprovalRequested, ApprovalResolved
    from musec.agents.plan import plan_sha256

    call_id = f"plan-{session.plan.proposals}"
    session.record(ApprovalRequested(call_id=call_id, tool="propose_plan", source="plan",
                                     input={"path": session.plan.path, "sha256": plan_sha256(text)}))
    pending = await session.wait_answer(call_id, "propose_plan")
    action = pending.plan_action or ("approve" if pending.decision in ("allow", "always") else "feedback")
    session.record(ApprovalResolved(call_id=call_id, decision="deny" if action in ("feedback", "grill") else "allow",
                                    by=pending.by, plan_action=action))
    return action, pending.by, pending.text


def plan_report(index: Any, session_id: str, request_id: int) -> Any:
    """``musec plan ID``: the session's plan and its progress, folded from its log.

    Raises:
        SessionNotFound: no such session.
    """
    from musec.agents.core.events import PlanApproved, PlanProposed, PlanStarted
    from musec.agents.plan import PlanProgress, PlanState

    from . import protocol as p
    from .eventlog import iter_events

    sid = index.resolve_id(session_id)
    state, progress, status, text, sha = PlanState(), None, "none", "", ""
    for ev in iter_events(index.log_path(sid)):
        state.apply(ev)
        if progress is not None:
            progress.apply(ev)
        if isinstance(ev, PlanStarted) and ev.agent == "main":
            status, progress = "planning", None
        elif isinstance(ev, PlanProposed) and ev.agent == "main" and state.planning:
            status, text, sha = "proposed", state.proposed, ev.sha256
        elif isinstance(ev, PlanApproved) and ev.agent == "main":
            status, text, sha = "approved", state.approved, state.approved_sha256
            progress = PlanProgress.of(text)
    return p.PlanReport(id=request_id, session_id=sid, status=status, path=state.path, text=text, sha256=sha,
                        by=state.approved_by if status == "approved" else "",
                        files=dict(progress.files) if progress else {}, checks=dict(progress.checks) if progress else {})
