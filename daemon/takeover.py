"""Sessions whose client went away (issue 13 case 6): taking them over, and ending them
when no one comes back.

A live session keeps running when its client dies (kill -9, a closed terminal). Any new
client may continue it: ``musec resume``/``run --resume`` take it over (it takes their
mode; approvals that waited for a person are decided again under it), ``musec attach``
in a terminal gives the prompt when its agent is idle. A session with no client and no
work (idle, or waiting for an approval no one is there to give) ends after
``[daemon] idle_timeout_s`` (config.toml; 0: never), logged as ``session_idle_ended``.
"""

from __future__ import annotations

from typing import Any

import anyio
import structlog

log = structlog.get_logger("musec.session")
Session = Any  # daemon.session.Session (which imports this module)
IDLE_TIMEOUT_S = 1800.0  # a session with no client and no work ends after this ([daemon] idle_timeout_s)
REDECIDE = "redecide"
"""A pending approval's answer that means: decide it again under the session's new mode."""


def take_over(session: Session, *, interactive: bool, end_when_idle: bool, approval: str) -> None:
    """Continue ``session`` from a new client: it takes the client's mode, and approvals
    waiting for a person are decided again under it (a mode that allows the call runs it;
    one that still asks asks this client, or ends a headless turn with ``needs_approval``)."""
    session.interactive, session.end_when_idle = interactive, end_when_idle
    if approval:
        if session.agent is not None:
            session.agent.approval_mode = approval
        for worker in session.workers.values():
            worker.follow_mode(session.worker_approval)
    for pending in list(session.approvals.values()):
        session.answer(pending.call_id, REDECIDE, "")


def redecide(session: Session, agent_id: str, call: Any, tool: Any) -> tuple[str, str] | None:
    """A waiting call decided again under its agent's (new) approval mode and rules:
    ``(decision, by)``, or ``None`` when it still needs a person."""
    agent = session.agent if agent_id == "main" else session.workers.get(agent_id)
    if agent is None or tool is None:  # a net rule's question has no tool: a person answers it
        return None
    described = agent.policy.call(call.name, tool.access, call.input, tool.paths(call.input))
    verdict = agent.policy.decide(agent.approval_mode, described)
    if verdict.decision == "ask":
        return None
    return verdict.decision, f"approval mode {agent.approval_mode}"


async def watch_unattended(session: Session) -> None:
    """End ``session`` once it has been unattended (``Session.unattended``) for its
    ``idle_timeout_s`` without a break; the end says why in ``session_ended``'s message."""
    while True:
        stir = session.stir = anyio.Event()
        if not session.unattended:
            await stir.wait()
            continue
        with anyio.move_on_after(session.idle_timeout_s):
            await stir.wait()
        if not stir.is_set() and session.unattended:
            log.info("session_idle_ended", session_id=session.id, idle_timeout_s=session.idle_timeout_s)
            session.end_idle("finished", f"no client and no work for {session.idle_timeout_s:g} s: the daemon ended "
                             f"it ([daemon] idle_timeout_s in config.toml); go on with `musec resume {session.id}`")
            return
