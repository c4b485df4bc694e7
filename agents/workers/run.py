"""Running a fan-out: worktrees, worker agents, integration (DESIGN §9).

``FanOut`` is the runner behind the main agent's ``spawn_workers`` tool. Every step is an
event of the session log: ``worker_spawned`` (with the base commit, branch and worktree),
the workers' own model and tool events (agent ``worker:NAME``), ``worker_finished``
(outcome and commit) and ``integration`` (merges, conflicts, the test run). The person's
working copy is only read (to snapshot uncommitted changes); it changes only through
``musec apply``.

The runner builds no agent itself: the daemon injects a factory (``make_agent``) that
builds a worker agent confined to its worktree, so this module knows nothing of the
daemon, its providers or its sessions.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ..attachments import attach
from ..core.events import (
    UNSET,
    AgentMessage,
    AgentSpawned,
    AnyEvent,
    Conflict,
    ConflictFile,
    Integration,
    UserMessage,
    WorkerFinished,
    WorkerSpawned,
)

if TYPE_CHECKING:
    from ..recorder import Recorder
    from ..tools.base import ToolOutput

log = structlog.get_logger("musec.fanout")

WORKER_TIME_LIMIT_S = 900.0  # [workers] time_limit_s in config.toml
INTEGRATION_TEST_TIMEOUT_S = 600.0  # [workers] test_timeout_s

WORKER_PROMPT = """

You are worker {name} of a fan-out: one of several agents working in parallel, each in its
own Git worktree at {path} on branch {branch}. Do only your own task. Your changes are
committed on your branch when you stop; then every branch is merged and tested together.
Git works here (status, diff, log, add), but do not commit: musec does, and the
repository's refs are read-only to you. When you are done, say in one or two sentences what you changed."""

#: ``make_agent(agent_id, workspace, prompt_suffix)``: a worker's agent (``agents.loop.Agent``)
#: whose tools are confined to ``workspace``; may raise (the worker then ends in error).
AgentFactory = Callable[[str, Path, str], Any]


@dataclass
class WorkerSpec:
    """One worker of a fan-out: ``done`` when it finished before a restart; ``resume``
    when its agent goes on from its logged history. ``path`` is its worktree; ``subdir``
    the folder of it the worker works in (the session's workspace relative to the top of
    its repository: a session started in ``pkg/`` has its workers work in ``pkg/``)."""

    name: str
    instruction: str
    path: Path
    branch: str
    done: bool = False
    resume: bool = False
    subdir: str = ""

    @property
    def cwd(self) -> Path:
        """Where the worker works: its worktree's ``subdir``."""
        return self.path / self.subdir if self.subdir else self.path


class FanOut:
    """The ``spawn_workers`` runner of one session.

    Args:
        recorder: the session (its id names the worktrees and branches; its log gets the events).
        repo: the session's workspace (a Git repository).
        state_dir: musec's state directory (worktrees go under ``state_dir/worktrees/``).
        make_agent: builds a worker's agent (see ``AgentFactory``).
        agents: where the running workers' agents are registered by agent id, so the
            session folds their events into their histories.
        logged_events: the session's events so far, oldest first (a resumed worker's history).
        wrap: ``(argv, cwd) -> argv`` running the integration's tests in the sandbox, or None.
        time_limit_s: each worker's time limit (``[workers] time_limit_s``), seconds.
        test_timeout_s: the integration's test run's deadline (``[workers] test_timeout_s``), seconds.
        test_command: the integration's test command (``[workers] test_command``); ``""``:
            detected from the project's files.
    """

    def __init__(self, recorder: Recorder, repo: Path, state_dir: Path, make_agent: AgentFactory,
                 agents: MutableMapping[str, Any], logged_events: Callable[[], Iterable[AnyEvent]],
                 wrap: Callable[[list[str], Path], list[str]] | None = None, *,
                 time_limit_s: float = WORKER_TIME_LIMIT_S, test_timeout_s: float = INTEGRATION_TEST_TIMEOUT_S,
                 test_command: str = "") -> None:
        self.recorder = recorder
        self.repo = repo
        self.state_dir = state_dir
        self.make_agent = make_agent
        self.agents = agents
        self.logged_events = logged_events
        self.wrap = wrap
        self.time_limit_s = time_limit_s
        self.test_timeout_s = test_timeout_s
        self.test_command = test_command
        # The session's lifecycle hooks (``Session.lifecycle``), set when hooks are configured.
        self.lifecycle: Callable[..., Awaitable[Any]] | None = None
        # Why the session's turn is being cancelled, when not by the person (``Session._cut_turn``):
        # what the ``worker_finished`` of a worker it cuts off says.
        self.stop_cause = ""

    async def __call__(self, tasks: list[dict[str, str]]) -> ToolOutput:
        """Run ``tasks`` (``{name, instruction}`` each) as workers; the tool's answer."""
        from ..tools.base import ToolOutput
        from . import WorkerError, create_worktree, prepare_base

        s, state, repo = self.recorder, self.state_dir, self.repo
        used = [t["name"] for t in tasks if (state / "worktrees" / s.id / t["name"]).exists()]
        if used:
            return ToolOutput(content=f"spawn_workers: worker name{'s' if len(used) > 1 else ''} {', '.join(used)} "
                              f"{'were' if len(used) > 1 else 'was'} used earlier in this session "
                              "(their branches hold that work); choose new names", is_error=True)
        try:
            base = await anyio.to_thread.run_sync(functools.partial(prepare_base, repo, s.id, dirty="snapshot"))
            trees = []
            for task in tasks:
                tree = await anyio.to_thread.run_sync(create_worktree, repo, state, s.id, task["name"], base)
                trees.append(tree)
            _, sub = await anyio.to_thread.run_sync(repository_top, repo)
        except WorkerError as exc:
            return ToolOutput(content=f"spawn_workers: {exc}", is_error=True)
        for task, tree in zip(tasks, trees, strict=True):
            s.record(WorkerSpawned(worker=task["name"], instruction=task["instruction"],
                                   branch=tree.branch, path=str(tree.path), base_commit=base.commit, base_head=base.head,
                                   base_branch=base.branch, snapshot=base.snapshot, dirty_paths=list(base.dirty_paths)))
        specs = [WorkerSpec(t["name"], t["instruction"], tree.path, tree.branch, subdir=sub)
                 for t, tree in zip(tasks, trees, strict=True)]
        base_fields = {"base_commit": base.commit, "base_head": base.head, "base_branch": base.branch, "snapshot": base.snapshot}
        if self.lifecycle is not None:
            try:
                for spec in specs:
                    await self.lifecycle("WorktreeCreate", {"worker": spec.name, "worktree_path": str(spec.path),
                                                            "branch": spec.branch})
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._cut_off(specs, {}, set())
                raise
        return ToolOutput(content=await self.run_and_integrate(specs, base_fields, note=base.note), is_error=False)

    async def resume_from_log(self, spawned: list[WorkerSpawned], finished: set[str]) -> None:
        """Go on with a fan-out a restart cut off: the unfinished workers continue from their
        logged histories, then everything is integrated and the main agent is told."""
        _, sub = await anyio.to_thread.run_sync(repository_top, self.repo)
        specs = [WorkerSpec(ev.worker, ev.instruction, Path(ev.path), ev.branch,
                            done=ev.worker in finished, resume=True, subdir=sub) for ev in spawned]
        first = spawned[0]
        base_fields = {"base_commit": first.base_commit, "base_head": first.base_head,
                       "base_branch": first.base_branch, "snapshot": first.snapshot}
        summary = await self.run_and_integrate(specs, base_fields, note="the fan-out was resumed after a restart")
        self.recorder.record(AgentMessage(agent="fanout", to="main", from_="fanout", priority="high",
                                          body="The fan-out cut off by the restart has finished:\n" + summary))

    async def run_and_integrate(self, specs: list[WorkerSpec], base_fields: dict[str, Any], note: str) -> str:
        """Run the workers, commit each branch, integrate and test; the report's text.

        Cancelled (the person's interrupt, the session ended, the daemon stopped), every
        worker started ends in the log all the same (``_cut_off``) before the cancel goes on.
        """
        outcomes: dict[str, Any] = {}
        ended = {spec.name for spec in specs if spec.done}
        try:
            async with anyio.create_task_group() as tg:
                for spec in specs:
                    if not spec.done:
                        tg.start_soon(self._run_worker, spec, outcomes)
            lines = [note]
            for spec in specs:
                if spec.done:
                    lines.append(f"worker {spec.name}: finished before the restart, on {spec.branch}")
                    continue
                lines.append(await self._finish(spec, outcomes.get(spec.name)))
                ended.add(spec.name)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._cut_off(specs, outcomes, ended)
            raise
        lines.extend(await self._integrate([spec.branch for spec in specs], base_fields))
        return "\n".join(lines)

    async def _cut_off(self, specs: list[WorkerSpec], outcomes: dict[str, Any], ended: set[str]) -> None:
        """Record ``worker_finished`` for each worker of ``specs`` a cancelled fan-out leaves
        without one (``ended``: those that have it): a worker whose agent had stopped is
        committed as at its normal end; one cut off ends ``interrupted``, saying why, its
        worktree left as it was (what it changed stays there, uncommitted, for the person).
        Call it shielded."""
        why = self.stop_cause or "interrupted by the person"
        for spec in specs:
            if spec.name in ended:
                continue
            ended.add(spec.name)
            outcome = outcomes.get(spec.name)
            if outcome is not None:
                try:
                    await self._finish(spec, outcome)
                    continue
                except Exception:  # its commit failed: it is recorded as cut off, its worktree kept
                    log.exception("worker_commit_failed", session_id=self.recorder.id, worker=spec.name)
            self.recorder.record(WorkerFinished(
                worker=spec.name, exit_reason="interrupted", branch=spec.branch,
                message=f"{why}; nothing of it was committed: what it changed is in its worktree {spec.path}"[:500]))
            log.info("worker_interrupted", session_id=self.recorder.id, worker=spec.name, why=why)

    async def _finish(self, spec: WorkerSpec, outcome: Any) -> str:
        """Commit a worker's worktree and record ``worker_finished``; its report line (a
        commit refused, a merge left in progress in it, ends it in ``error``)."""
        from . import WorkerError, commit_all

        reason = outcome.exit_reason if outcome else "error"
        message, refused = (outcome.message if outcome else ""), ""
        with anyio.CancelScope(shield=True):  # a commit made is recorded, even when the fan-out is being cancelled
            try:
                commit = await anyio.to_thread.run_sync(functools.partial(
                    commit_all, spec.path, f"musec worker {spec.name}: {spec.instruction[:60]}"))
            except WorkerError as exc:  # it ends all the same: its work stays in its worktree
                commit, reason = None, "error"
                message = refused = f"its changes could not be committed ({exc}); they are in its worktree {spec.path}"
            self.recorder.record(WorkerFinished(worker=spec.name, exit_reason=reason, commit=commit, branch=spec.branch,
                                                result=(outcome.result if outcome else "")[:2000], message=message[:500]))
        if refused:
            return f"worker {spec.name}: error on {spec.branch} — {refused}"
        return (f"worker {spec.name}: {reason}{', committed ' + commit[:12] if commit else ', no changes'} on {spec.branch}"
                + (f" — {outcome.result.strip()[:300]}" if outcome and outcome.result.strip() else ""))

    async def _integrate(self, branches: list[str], base_fields: dict[str, Any]) -> list[str]:
        """Merge ``branches`` and run the tests on the merged tree (``integration``); the report's lines."""
        from . import detect_test_command, integrate

        s = self.recorder
        # The tests of the session's folder, run in that folder of the merged tree; else the
        # repository's own, at its top. The interpreter by name: the sandbox hides a venv
        # that lives under /tmp.
        top, sub = await anyio.to_thread.run_sync(repository_top, self.repo)
        test_command = detect_test_command(self.repo, self.test_command or None, python="python3")
        if test_command is None and sub:
            test_command = detect_test_command(top, None, python="python3")
            sub = "" if test_command is not None else sub
        result = await integrate(self.repo, self.state_dir, s.id, str(base_fields["base_commit"]), branches,
                                 test_command, timeout_s=self.test_timeout_s, wrap=self.wrap, subdir=sub)
        tests = result.tests
        s.record(Integration(
            branch=result.merge.branch, head=result.merge.head, **base_fields,
            merged=[m.branch for m in result.merge.merged],
            conflicts=[Conflict(c.branch, [ConflictFile(f.path, f.ours, f.theirs) for f in c.files])
                       for c in result.merge.conflicts],
            test_command=str(result.test_command) if result.test_command else None,
            tests_passed=tests.passed if tests else None,
            failing_tests=list(tests.failing_tests) if tests else [],
            test_output=tests.output[-4000:] if tests else "", ok=result.ok))
        lines = [result.summary()]
        if result.ok:
            untested = " (untested: no test command)" if tests is None else ""
            lines.append(f"The integrated result is on {result.merge.branch}{untested}; "
                         f"the person brings it home with `musec apply {s.id}`.")
        return lines

    async def _run_worker(self, spec: WorkerSpec, outcomes: dict[str, Any]) -> None:
        """Run one worker agent to its end (from its logged history when resumed); a
        failure is its outcome, never the session's."""
        from ..loop import Outcome

        agent_id = f"worker:{spec.name}"
        try:
            await anyio.to_thread.run_sync(functools.partial(spec.cwd.mkdir, parents=True, exist_ok=True))
            agent = self.make_agent(agent_id, spec.cwd,
                                    WORKER_PROMPT.format(name=spec.name, path=spec.cwd, branch=spec.branch))
            if spec.resume:
                for ev in self.logged_events():
                    if isinstance(ev, AgentSpawned) and ev.agent == agent_id:
                        agent.system_prompt = ev.system_prompt
                    agent.history.apply(ev)
                self.agents[agent_id] = agent
            else:
                self.agents[agent_id] = agent
                self.recorder.record(AgentSpawned(agent=agent_id, role="worker", workspace=str(spec.cwd),
                                                  system_prompt=agent.system_prompt, tools=list(agent.tools)))
                # its task's @path mentions attach the files of its own worktree, read once (the event keeps them)
                attached = await attach(spec.instruction, agent)
                self.recorder.record(UserMessage(agent=agent_id, text=spec.instruction, attachments=attached or UNSET))
            limit = self.time_limit_s
            with anyio.move_on_after(limit) as scope:
                agent.limits.append((scope, f"the worker's time limit ({limit:g} s, [workers] time_limit_s) passed"))
                outcomes[spec.name] = await agent.run()
            if scope.cancelled_caught:
                outcomes[spec.name] = Outcome("time_limit", message=f"stopped after {limit:g} s ([workers] time_limit_s)")
        except Exception as exc:  # supervision at the edge: a worker never takes the session down
            log.exception("worker_failed", session_id=self.recorder.id, worker=spec.name)
            outcomes[spec.name] = Outcome("error", message=f"{type(exc).__name__}: {exc}")


def repository_top(workspace: Path | str) -> tuple[Path, str]:
    """The top of the repository holding ``workspace``, and ``workspace`` relative to it
    (``""`` at the top, else a POSIX path like ``pkg/sub``): the folder of each worktree
    a worker works in.

    Raises:
        NotARepository: no repository holds ``workspace``.
    """
    from .repo import open_repository

    here = Path(workspace).resolve()
    top = open_repository(workspace).workdir
    if top is None:
        return here, ""
    rel = here.relative_to(Path(top).resolve())
    return Path(top).resolve(), rel.as_posix() if rel.parts else ""
