"""Persistent background agents of a session (DESIGN §6, §7): one module per role.

Each role lives as long as the session, in its task group, with a small bounded inbox fed
with every event the session records. It decides itself when the main agent needs to
know something and posts an ``agent_message`` (delivered at its next turn boundary);
otherwise it stays quiet. Nothing of the main agent waits for a role: the verifier takes
its baseline on a copy of the workspace, beside the main agent. A role that fails is restarted with backoff and reported
(``agent_failed``); it never takes the session down.

Built-in roles: ``verifier`` (tests after edits), ``scout`` (the repository map, answers
questions), ``reviewer`` (reads the diff before the main agent finishes). They work
without a model; a scout given a model answers through it. A role sees only a
``Recorder`` (where its events go) and the blackboard, never the session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..recorder import Recorder
from .base import BackgroundAgent
from .reviewer import Reviewer
from .scout import Scout
from .verifier import Verifier

ROLES = ("verifier", "scout", "reviewer")
__all__ = ["ROLES", "BackgroundAgent", "Recorder", "Reviewer", "Scout", "Verifier", "make_roles"]


def make_roles(recorder: Recorder, blackboard: Any, workspace: Path, roles: list[str],
               wrap: Callable[[list[str], Path], list[str]] | None, scout_agent: Any = None) -> dict[str, BackgroundAgent]:
    """The session's background agents for ``roles`` (names from ``ROLES``; unknown names
    are refused before this is called).

    Args:
        recorder: where their events go (the session).
        blackboard: the session's blackboard, or None.
        workspace: the session's workspace.
        roles: the role names, in order.
        wrap: the verifier's sandbox wrapper (``(argv, cwd) -> argv``), or None.
        scout_agent: the scout's own model-driven agent, if the session gave it a model.
    """
    agents: dict[str, BackgroundAgent] = {}
    for role in roles:
        if role == "verifier":
            agents[role] = Verifier(recorder, blackboard, workspace, wrap)
        elif role == "scout":
            agents[role] = Scout(recorder, blackboard, workspace, scout_agent)
        else:
            agents[role] = Reviewer(recorder, blackboard, workspace)
    return agents
