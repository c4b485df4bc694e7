"""Persistent background agents of a session (DESIGN §6, §7).

They live as long as the session, in its task group, each with a small bounded inbox fed
with every event the session records. They decide themselves when the main agent needs
to know something and post an ``agent_message`` (delivered at its next turn boundary);
otherwise they stay quiet. A background agent that fails is restarted with backoff and
reported (``agent_failed``); it never takes the session down.

Built-in roles:

- ``verifier``: after edits in the workspace (debounced), runs the project's test
  command in the sandbox; logs each run (``test_run``) and escalates new failures, by
  test name, to the main agent.
- ``scout``: builds a repository map once (files, Python symbols, where the tests are),
  keeps it current as files change, and answers ``ask_agent`` questions from it without
  re-reading the repository.

These two roles work without a model; their events carry their agent id like any other.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

if TYPE_CHECKING:
    from .session import Session

log = structlog.get_logger("musec.background")

ROLES = ("verifier", "scout", "reviewer")
INBOX_EVENTS = 256
DEBOUNCE_S = 0.3
TEST_TIMEOUT_S = 600.0
MAX_BACKOFF_S = 30.0
#: How long the main agent's first turn waits for the background agents to be ready (the
#: verifier's baseline run, the scout's map), so the baseline predates the first edit.
READY_WAIT_S = 30.0


class BackgroundAgent:
    """The common part: inbox, supervision with backoff, state for ``musec agents``."""

    role = ""

    def __init__(self, session: Session, workspace: Path) -> None:
        self.session = session
        self.workspace = workspace
        self.agent_id = self.role
        self.state = "starting"
        self.last_activity_at = time.time()
        self.overflowed = False
        self.ready = anyio.Event()
        self._send, self._inbox = anyio.create_memory_object_stream[dict[str, Any]](INBOX_EVENTS)

    def notify(self, event: dict[str, Any]) -> None:
        """Offer an event; never blocks. A full inbox is noted and the agent rescans."""
        if event.get("agent") == self.agent_id:
            return
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.overflowed = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def record(self, type: str, **fields: Any) -> dict[str, Any]:
        self.last_activity_at = time.time()
        return self.session.record(type, agent=self.agent_id, **fields)

    async def supervise(self) -> None:
        """Run the role; on a failure, report it and start again after a growing pause."""
        backoff = 1.0
        while True:
            try:
                await self.run()
                return
            except Exception as exc:  # supervision at the edge: the session goes on
                log.exception("background_agent_failed", session_id=self.session.id, agent=self.agent_id)
                self.ready.set()  # nobody waits on a failed agent
                self.state = "restarting"
                try:
                    self.record("agent_failed", role=self.role, error=f"{type(exc).__name__}: {exc}"[:500], retry_in_s=backoff)
                except OSError:
                    return
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def run(self) -> None:  # pragma: no cover - every role overrides it
        raise NotImplementedError

    async def answer(self, question: str) -> str:
        return f"{self.agent_id} does not answer questions"

    def restore(self, event: dict[str, Any]) -> None:
        """Fold one event of a log being resumed (the role picks up where it was)."""


class Verifier(BackgroundAgent):
    """Runs the tests after edits and escalates new failures."""

    role = "verifier"

    def __init__(self, session: Session, workspace: Path, wrap: Any = None) -> None:
        super().__init__(session, workspace)
        self.wrap = wrap
        self.known_failing: set[str] | None = None
        self.last_run: dict[str, Any] | None = None
        self.pending_edit = False

    def restore(self, event: dict[str, Any]) -> None:
        """The last test run before a restart is the baseline to compare with; an edit
        after it (the daemon stopped before the run) is tested as soon as it resumes."""
        if event.get("type") == "test_run" and event.get("agent") == self.agent_id:
            self.known_failing = set(event.get("failing_tests", []))
            self.last_run = {"passed": event.get("passed"), "failing": list(event.get("failing_tests", [])), "output_tail": ""}
            self.pending_edit = False
        elif self._is_workspace_edit(event):
            self.pending_edit = True

    async def run(self) -> None:
        from musec.agents.workers import detect_test_command

        command = detect_test_command(self.workspace, None, python="python3")
        if command is None:
            self.state = "idle: no test command found"
            self.ready.set()
            async for _ in self._inbox:
                pass
            return
        if self.known_failing is None:  # a resumed session keeps the last run as its baseline
            self.state = "baseline"
            self.known_failing = await self._run_tests(command, trigger="baseline")
        self.ready.set()
        if self.pending_edit:
            await self._check(command)
        self.state = "watching"
        async for event in self._inbox:
            if not self._is_workspace_edit(event) and not self.overflowed:
                continue
            await self._settle()
            await self._check(command)

    async def _check(self, command: Any) -> None:
        """Run the tests and escalate failures that were not there before."""
        self.overflowed = False
        self.pending_edit = False
        self.state = "testing"
        failing = await self._run_tests(command, trigger="edit")
        new = sorted(failing - (self.known_failing or set()))
        if new:
            body = (f"New test failures after the latest edits ({len(new)}):\n" + "\n".join(f"  {n}" for n in new[:20])
                    + f"\nCommand: {command}. Output tail:\n{(self.last_run or {}).get('output_tail', '')[-1500:]}")
            self.record("agent_message", to="main", **{"from": self.agent_id}, priority="high", body=body, sync=True)
        self.known_failing = failing
        self.state = "watching"

    def _is_workspace_edit(self, event: dict[str, Any]) -> bool:
        return event.get("type") == "file_edited" and not str(event.get("agent", "main")).startswith("worker:")

    async def _settle(self) -> None:
        """Wait until no edit has come for ``DEBOUNCE_S``."""
        while True:
            with anyio.move_on_after(DEBOUNCE_S) as scope:
                async for event in self._inbox:
                    if self._is_workspace_edit(event):
                        break
            if scope.cancelled_caught:
                return

    async def _run_tests(self, command: Any, *, trigger: str) -> set[str]:
        from musec.agents.workers import run_tests

        result = await run_tests(command, self.workspace, timeout_s=TEST_TIMEOUT_S, wrap=self.wrap)
        failing = set(result.failing_tests)
        if not result.passed and not failing:
            failing = {f"{command} (exit status {result.exit_status}{', timed out' if result.timed_out else ''})"}
        self.last_run = {"passed": result.passed, "failing": sorted(failing), "output_tail": result.output[-2000:]}
        if self.session.blackboard is not None:
            self.session.blackboard.facts["test_status"] = {"passed": result.passed, "failing": sorted(failing)}
        self.record("test_run", trigger=trigger, command=str(command), passed=result.passed, exit_status=result.exit_status,
                    failing_tests=sorted(failing), duration_s=round(result.duration_s, 3))
        return failing

    async def answer(self, question: str) -> str:
        if self.last_run is None:
            return f"verifier: no test run yet ({self.state})"
        run = self.last_run
        if run["passed"]:
            return "verifier: the last test run passed"
        return "verifier: the last test run failed:\n" + "\n".join(f"  {n}" for n in run["failing"][:50])


_SYMBOL = re.compile(r"^\s*(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)", re.M)


class Scout(BackgroundAgent):
    """Knows the repository: files, Python symbols, where the tests are."""

    role = "scout"
    MAX_FILES = 20_000

    def __init__(self, session: Session, workspace: Path, agent: Any = None) -> None:
        super().__init__(session, workspace)
        self.files: list[str] = []
        self.symbols: dict[str, list[str]] = {}
        self.agent = agent  # an agents.loop.Agent with read-only tools, when a model is set
        self._asking = anyio.Lock()
        self._spawned = False

    def restore(self, event: dict[str, Any]) -> None:
        """A model-driven scout keeps its conversation across a restart."""
        if self.agent is not None:
            self.agent.history.apply(event)
            if event.get("type") == "agent_spawned" and event.get("agent") == self.agent_id:
                self._spawned = True

    async def run(self) -> None:
        self.state = "mapping"
        await anyio.to_thread.run_sync(self._build_map)
        tests = [f for f in self.files if _is_test(f)]
        self.record("repo_map", files=len(self.files), python_symbols=sum(len(v) for v in self.symbols.values()),
                    test_files=tests[:50])
        self.ready.set()
        self.state = "watching"
        async for event in self._inbox:
            if event.get("type") == "file_edited" and not str(event.get("agent", "main")).startswith("worker:"):
                path = str(event.get("path", ""))
                if path not in self.files:
                    self.files.append(path)
                await anyio.to_thread.run_sync(self._scan, path)
                self.last_activity_at = time.time()

    def _build_map(self) -> None:
        from musec.agents.tools.search import find_ripgrep

        rg = find_ripgrep()
        if rg is not None:
            proc = subprocess.run([rg, "--files", "--hidden", "--glob", "!.git"], cwd=self.workspace,
                                  capture_output=True, text=True, timeout=60)
            self.files = sorted(proc.stdout.splitlines())[: self.MAX_FILES]
        else:  # pragma: no cover - ripgrep is a dependency
            self.files = sorted(str(p.relative_to(self.workspace)) for p in self.workspace.rglob("*")
                                if p.is_file() and ".git" not in p.parts)[: self.MAX_FILES]
        for path in self.files:
            self._scan(path)

    def _scan(self, path: str) -> None:
        if not path.endswith(".py"):
            return
        try:
            full = self.workspace / path
            board = self.session.blackboard
            data = board.read(full, self.agent_id, 2 * 1024 * 1024) if board is not None else full.read_bytes()
            text = data.decode("utf-8", errors="replace")
        except OSError:
            self.symbols.pop(path, None)
            return
        self.symbols[path] = [f"{kind} {name}" for kind, name in _SYMBOL.findall(text)]

    async def answer(self, question: str) -> str:
        """From its model (which keeps what it has read for the whole session) when it has
        one, else from the map by the question's words."""
        if self.agent is not None:
            async with self._asking:
                self.state = "answering"
                if not self._spawned:  # its prompt and tools, for replay
                    self.record("agent_spawned", role="scout", model=self.agent.provider.model,
                                system_prompt=self.agent.system_prompt, tools=list(self.agent.tools), sync=True)
                    self._spawned = True
                self.record("user_message", text=question, sync=True)
                outcome = await self.agent.run()
                self.state = "watching"
                if outcome.exit_reason != "finished":
                    return f"scout: could not answer ({outcome.exit_reason}: {outcome.message})"
                return f"scout: {outcome.result}"
        if self.state == "mapping" or not self.files:
            return f"scout: the repository map is not ready yet ({self.state})"
        words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", question)}
        hits = []
        for path in self.files:
            names = self.symbols.get(path, [])
            matched = [n for n in names if any(w in n.lower() for w in words)]
            if matched or any(w in path.lower() for w in words):
                hits.append(f"{path}: {', '.join(matched) if matched else '(file)'}")
        tests = [f for f in self.files if _is_test(f)]
        head = f"scout: {len(self.files)} files, {sum(len(v) for v in self.symbols.values())} Python symbols; tests in: {', '.join(tests[:10]) or 'none found'}"
        if not hits:
            return head + "\nnothing in the map matches the question's words"
        return head + "\n" + "\n".join(hits[:40])


_FINDINGS = (
    (re.compile(r"^[<>=]{7}( |$)"), "a merge conflict marker"),
    (re.compile(r"\bbreakpoint\(\)|\bpdb\.set_trace\(\)|\bdebugger;"), "a debugger call left in"),
    (re.compile(r"\b(TODO|FIXME|XXX)\b"), "a new TODO/FIXME"),
)


class Reviewer(BackgroundAgent):
    """Reads the turn's diff before the main agent ends the task; can send it back."""

    role = "reviewer"

    def __init__(self, session: Session, workspace: Path) -> None:
        super().__init__(session, workspace)
        self.diffs: list[tuple[str, str]] = []
        self.reviewed = 0

    def notify(self, event: dict[str, Any]) -> None:
        """Keep the turn's diffs as they are recorded (no inbox: nothing may be missed)."""
        if event.get("type") == "user_message" and event.get("agent") == "main":
            self.diffs, self.reviewed = [], 0
        elif event.get("type") == "file_edited" and event.get("agent") == "main":
            self.diffs.append((str(event.get("path")), str(event.get("diff", ""))))

    async def run(self) -> None:
        self.state = "watching"
        self.ready.set()
        await anyio.sleep_forever()

    async def review(self) -> list[str]:
        """Findings on the edits made since the last review (empty: nothing to say)."""
        new, self.reviewed = self.diffs[self.reviewed :], len(self.diffs)
        findings = []
        for path, diff in new:
            for line in diff.splitlines():
                if not line.startswith("+") or line.startswith("+++"):
                    continue
                for pattern, what in _FINDINGS:
                    if pattern.search(line[1:]):
                        findings.append(f"{path}: {what}: `{line[1:].strip()[:100]}`")
        status = (self.session.blackboard.facts.get("test_status") if self.session.blackboard is not None else None)
        if new and status and not status.get("passed"):
            failing = ", ".join(status.get("failing", [])[:5])
            findings.append(f"the verifier's last test run fails: {failing}")
        self.state = f"reviewed {len(new)} edit(s), {len(findings)} finding(s)"
        self.last_activity_at = time.time()
        if findings:
            self.record("review", edits=len(new), findings=findings)
        return findings[:20]


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in f"/{path}"


def make_background(session: Session, workspace: Path, roles: list[str], wrap: Any,
                    scout_agent: Any = None) -> dict[str, BackgroundAgent]:
    """The session's background agents for ``roles`` (unknown names are refused earlier).
    ``scout_agent``: the scout's own model-driven agent, if the session gave it a model."""
    agents: dict[str, BackgroundAgent] = {}
    for role in roles:
        if role == "verifier":
            agents[role] = Verifier(session, workspace, wrap)
        elif role == "scout":
            agents[role] = Scout(session, workspace, scout_agent)
        else:
            agents[role] = Reviewer(session, workspace)
    return agents

