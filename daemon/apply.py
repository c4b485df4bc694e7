"""``musec apply``: bringing a fan-out's integrated result onto the person's branch.

Through git only (a fast-forward or a merge, DESIGN §9); the integration is found in the
session's log, and the log says the person's branch changed (``integration_applied``): a
live session's recorded by the handler, an ended one's appended here (issue 13 case 4's
kind: a change that landed is in the log).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from musec.agents.core.events import Integration, IntegrationApplied

from . import protocol as p
from .errors import BadRequest, CheckFailed, DaemonError
from .eventlog import EventLog, iter_events

if TYPE_CHECKING:
    from .index import SessionIndex

log = structlog.get_logger("musec.daemon")


def apply_integration(index: SessionIndex, session_id: str, request_id: int) -> tuple[p.Applied, str]:
    """Merge the session's latest integration into the person's branch (git only); the
    reply and the person's working tree.

    Runs in a worker thread and records nothing: for a live session the caller logs
    ``integration_applied`` from the reply, on the event loop.

    Raises:
        BadRequest: the session has no integration (a usage error: exit 2).
        CheckFailed: the integration did not pass (conflicts or failing tests), or git or
            the person's repository refused it (the message says why and what to do):
            exit 1, as the README says of ``musec apply``.
    """
    from musec.agents.workers import WorkerError, apply
    from musec.agents.workers.state import FanoutState

    sid = index.resolve_id(session_id)
    state = FanoutState()
    applied: IntegrationApplied | None = None  # the latest apply of the latest integration
    for ev in iter_events(index.log_path(sid)):
        state.apply(ev)
        if isinstance(ev, IntegrationApplied):
            applied = ev
        elif isinstance(ev, Integration):
            applied = None
    workspace, integration = state.workspace, state.integration
    if integration is None:
        raise BadRequest(f"session {sid} has no integrated fan-out result to apply")
    refused = _not_passed(integration)
    if refused:
        raise CheckFailed(f"the integration of session {sid} did not pass: {refused}; see `musec workers {sid}`")
    if applied is not None and applied.how == "uncommitted":  # HEAD did not move: the log says it
        return p.Applied(id=request_id, session_id=sid, branch=applied.branch, old_head=applied.old_head,
                         new_head=applied.new_head, how="up-to-date",
                         note=f"applied already, uncommitted; the workers' changes alone: git diff "
                              f"{integration.base_commit[:12]} {integration.branch}"), workspace
    here = _already_applied(workspace, integration.head)
    if here is not None:  # applying twice is applying once
        branch, head = here
        return p.Applied(id=request_id, session_id=sid, branch=branch, old_head=head, new_head=head,
                         how="up-to-date"), workspace
    try:
        result = apply(workspace, integration.branch, expected_head=integration.base_head or "",
                       snapshot=integration.base_commit if integration.snapshot else None)
    except WorkerError as exc:
        raise CheckFailed(str(exc)) from exc
    note = result.note
    if note and integration.test_command and "run them" in note:
        note = note.replace("run them", f"run them ({integration.test_command})")
    if integration.tests_passed is None:  # applied untested: the person is told, and how to have tests run
        from musec.agents.workers.integration import NOTHING_TESTED

        note = "; ".join(filter(None, [note, NOTHING_TESTED]))
    return p.Applied(id=request_id, session_id=sid, branch=result.branch, old_head=result.old_head,
                     new_head=result.new_head, how=result.how, note=note), workspace


def _not_passed(integration: Integration) -> str:
    """Why ``integration`` cannot be applied ("" when it can): its conflicts, its failing
    tests. One that merged every branch and found no test command to run passes untested
    (fresh-user s8 J7: such a fan-out could never be applied; older logs say ``ok`` false)."""
    why = []
    if integration.conflicts:
        why.append(f"{len(integration.conflicts)} branch{'es' if len(integration.conflicts) > 1 else ''} "
                   f"conflicted ({', '.join(c.branch for c in integration.conflicts)})")
    if integration.tests_passed is False:
        failing = f": {', '.join(integration.failing_tests[:3])}" if integration.failing_tests else ""
        why.append(f"the tests failed ({integration.test_command}){failing}")
    return "; ".join(why)


def remove_applied_worktrees(workspace: str, state_dir: Path, session_id: str) -> None:
    """After an ended session's integration is applied (and logged): its worktrees and
    branches go, their commits being on the person's branch now; a worktree holding
    uncommitted work keeps them all, as ``musec gc`` does (``remove_worktrees``). A live
    session keeps its own until it ends and gc runs: its worker names may not be reused.
    Not called after an ``uncommitted`` apply: the integration branch is then the one
    record of the workers' changes apart from the person's; gc removes it later."""
    from musec.agents.workers import WorkerError, remove_worktrees

    if not (state_dir / "worktrees" / session_id).exists():
        return
    try:
        removal = remove_worktrees(workspace, state_dir, session_id)
    except (WorkerError, OSError) as exc:
        log.warning("worktrees_not_removed", session_id=session_id, error=str(exc))
        return
    if removal.kept:
        log.info("worktrees_kept", session_id=session_id, kept=removal.message)


def _already_applied(workspace: str, head: str) -> tuple[str, str] | None:
    """The person's branch and HEAD when HEAD is the integration's head or descends from
    it (the result is already there); else ``None``."""
    import pygit2

    try:
        repo = pygit2.Repository(pygit2.discover_repository(workspace))
        current = repo.head.target
        if str(current) == head or repo.descendant_of(current, pygit2.Oid(hex=head)):
            return repo.head.shorthand, str(current)
    except (pygit2.GitError, ValueError, TypeError, KeyError):
        pass
    return None


def append_to_ended(path: Path, event: IntegrationApplied) -> None:
    """Append ``event`` to the log of a session that is not live (it runs in a worker
    thread; the log's lock keeps out a resume that opens it meanwhile, and then nothing is
    appended: the apply is said in the daemon's log instead)."""
    try:
        elog, _ = EventLog.open(path)
    except DaemonError as exc:
        log.warning("integration_applied_not_logged", path=str(path), error=str(exc))
        return
    try:
        elog.append(event)
        elog.sync()
    finally:
        elog.close()
