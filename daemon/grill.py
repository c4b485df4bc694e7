"""``/grill`` in a session (issue 14): the critic questions a plan before its approval.

The critic (``agents/roles/critic.py``) puts the plan's decisions one at a time, each with
its recommended answer; this module routes each question:

| kind       | who answers                                                                 |
|------------|-----------------------------------------------------------------------------|
| ``fact``   | the scout (``ask_agent``), when the session has one with a model; else the   |
|            | critic is told to look it up itself, with a map-only scout's matches as a    |
|            | start (nothing is settled by that round: a word match is no answer)          |
| ``decision`` | the person, through the approval machinery (any attached client, first   |
|            | answer wins): Enter takes the recommended answer, text is the person's own,  |
|            | ``deny`` ends the grill. Headless: the recommended answer, as an assumption  |

Each round is a ``grill_round`` event. When the critic has no new objection, the settled
rounds amend the plan (``critic.amend_plan``), which is proposed again (``plan_proposed``)
and asked for approval again by ``plans.settle_plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Session = Any  # daemon.session.Session (not imported: it imports plans, which imports this module)


async def grill_plan(session: Session, plan: str) -> str:
    """Grill ``plan`` with the session's critic; return the amended plan (also proposed)."""
    from musec.agents.core.events import PlanProposed
    from musec.agents.plan import plan_sha256, write_plan_document
    from musec.agents.roles.critic import amend_plan

    rounds: list[Any] = []  # GrillRound events
    critic = _critic(session, rounds)
    session.grill_ended = False  # the person may end it (``route``)
    outcome = await critic.grill(plan)
    amended = amend_plan(plan, rounds)
    write_plan_document(session.plan.path, amended)
    note = "" if outcome.exit_reason == "finished" else f" (the critic stopped early: {outcome.exit_reason})"
    session.record(PlanProposed(sha256=plan_sha256(amended), text=amended, path=session.plan.path,
                                grilled=len(rounds), note=f"amended by /grill{note}"))
    return amended


def _critic(session: Session, rounds: list[Any]) -> Any:
    """The session's critic (made at the first grill); its rounds go to ``rounds``."""
    session.grill_rounds = rounds
    if session.critic is None:
        session.critic = session.make_critic(lambda q: route(session, q))
    return session.critic


async def route(session: Session, q: Mapping[str, str]) -> tuple[str, str]:
    """Answer one question of the critic (see the module's table); log the round."""
    number = session.plan.grill_rounds + 1
    assumption = False
    if q["kind"] == "fact":
        scout = session.background.get("scout")
        if scout is not None and scout.has_model:
            answer, by = (await scout.answer(q["question"])).removeprefix("scout: "), "scout"
        elif scout is not None:  # its map matches words; what they mean is for the critic to read
            found = (await scout.answer(q["question"])).removeprefix("scout: ")
            answer, by = (f"the scout has no model to answer with; its repository map, for the question's words: "
                          f"{found}\nRead what matters yourself (read_file, grep); nothing is settled by this round"), "none"
        else:
            answer, by = "no scout in this session: look it up in the repository yourself (read_file, grep)", "none"
    elif session.grill_ended:
        answer, by = "the person ended the grill: ask nothing more and finish", "none"
    elif session.interactive:
        from musec.agents.loop import NeedsApproval

        try:
            answer, by = await _ask_person(session, number, q)
        except NeedsApproval:  # the clients went away: as headless
            answer, by, assumption = q["recommended"], "recommended", True
    else:
        answer, by, assumption = q["recommended"], "recommended", True
    from musec.agents.core.events import GrillRound

    event = session.record(GrillRound(agent="critic", round=number, decision=q["decision"], kind=q["kind"],
                                      question=q["question"], recommended=q["recommended"], answer=answer,
                                      answered_by=by, assumption=assumption))
    session.grill_rounds.append(event)
    return answer, by


async def _ask_person(session: Session, number: int, q: Mapping[str, str]) -> tuple[str, str]:
    from musec.agents.core.events import ApprovalRequested, ApprovalResolved

    call_id = f"grill-{number}"
    session.record(ApprovalRequested(agent="critic", call_id=call_id, tool="grill_question", source="grill",
                                     input={k: q[k] for k in ("decision", "question", "recommended")}))
    pending = await session.wait_answer(call_id, "grill_question")
    session.record(ApprovalResolved(agent="critic", call_id=call_id, decision=pending.decision, by=pending.by))
    if pending.decision == "deny":
        session.grill_ended = True
        return "the person ended the grill: ask nothing more and finish", "none"
    if pending.text.strip():
        return pending.text.strip(), "person"
    return q["recommended"], "recommended"
