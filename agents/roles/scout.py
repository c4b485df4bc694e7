"""``scout``: knows the repository (files, Python symbols, where the tests are).

It builds a repository map once, keeps it current as files change, and answers
``ask_agent`` questions: from its own model when the session gave background agents one
(a read-only agent that keeps what it has read for the whole session), else from the map
by the question's words, without re-reading the repository.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio

from ..core.events import AgentSpawned, AnyEvent, RepoMap, UserMessage
from ..core.words import counted
from ..recorder import Recorder
from ..tools.paths import path_text, unescape_bytes
from .base import BackgroundAgent

_SYMBOL = re.compile(r"^\s*(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)", re.M)


class Scout(BackgroundAgent):
    """Knows the repository: files, Python symbols, where the tests are.

    Args:
        recorder, blackboard, workspace: see ``BackgroundAgent``.
        agent: an ``agents.loop.Agent`` with read-only tools that answers questions, or
            None to answer from the map.
    """

    role = "scout"
    MAX_FILES = 20_000
    #: How long a question waits for the map being built (the asking agent waits, by asking).
    answer_wait_s = 30.0

    def __init__(self, recorder: Recorder, blackboard: Any, workspace: Path, agent: Any = None) -> None:
        super().__init__(recorder, blackboard, workspace)
        self.files: list[str] = []
        self.symbols: dict[str, list[str]] = {}
        self.agent = agent
        self._asking = anyio.Lock()
        self._spawned = False

    def restore(self, event: AnyEvent) -> None:
        """A model-driven scout keeps its conversation across a restart."""
        super().restore(event)
        if self.agent is not None:
            self.agent.history.apply(event)

    def on_own_spawn(self, event: AgentSpawned, *, live: bool) -> None:
        """Its prompt and tools are logged once per session."""
        if self.agent is not None:
            self._spawned = True

    async def run(self) -> None:
        """Map the repository (``repo_map``), then rescan each file edited in the workspace."""
        self.state = "mapping"
        await anyio.to_thread.run_sync(self._build_map, abandon_on_cancel=True)
        tests = [f for f in self.files if is_test(f)]
        self.record(RepoMap(files=len(self.files), python_symbols=sum(len(v) for v in self.symbols.values()),
                            test_files=tests[:50]))
        self.ready.set()
        self.state = "watching"
        async for event in self._inbox:  # workspace edits only
            if event.path not in self.files:
                self.files.append(event.path)
            await anyio.to_thread.run_sync(self._scan, event.path, abandon_on_cancel=True)
            self.last_activity_at = time.time()

    def _build_map(self) -> None:
        from musec.agents.tools.search import find_ripgrep

        rg = find_ripgrep()
        if rg is not None:
            proc = subprocess.run([rg, "--files", "--hidden", "--glob", "!.git", "--glob", "!__pycache__",
                                   "--glob", "!*.py[co]"], cwd=self.workspace,
                                  capture_output=True, timeout=60)
            # File names are bytes; those that are not UTF-8 are shown as \xNN (never a
            # lone surrogate, which no log or wire can carry).
            names = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
            self.files = sorted(path_text(n) for n in names)[: self.MAX_FILES]
        else:  # pragma: no cover - ripgrep is a dependency
            self.files = sorted(str(p.relative_to(self.workspace)) for p in self.workspace.rglob("*")
                                if p.is_file() and ".git" not in p.parts and "__pycache__" not in p.parts
                                and p.suffix not in (".pyc", ".pyo"))[: self.MAX_FILES]
            self.files = [path_text(f) for f in self.files]
        for path in self.files:
            self._scan(path)

    def _scan(self, path: str) -> None:
        if not path.endswith(".py"):
            return
        try:
            full = self.workspace / unescape_bytes(path)
            board = self.blackboard
            data = board.read(full, self.agent_id, 2 * 1024 * 1024) if board is not None else full.read_bytes()
            text = data.decode("utf-8", errors="replace")
        except OSError:
            self.symbols.pop(path, None)
            return
        self.symbols[path] = [f"{kind} {name}" for kind, name in _SYMBOL.findall(text)]

    @property
    def has_model(self) -> bool:
        """Whether it answers from a model (else from its map: words matched, no judgment)."""
        return self.agent is not None

    async def answer(self, question: str) -> str:
        """From its model (which keeps what it has read for the whole session) when it has
        one, else from the map by the question's words."""
        if self.agent is not None:
            return await self._ask_model(question)
        with anyio.move_on_after(self.answer_wait_s):  # asked: the answer is worth its map
            await self.ready.wait()
        if self.state == "mapping" or not self.files:
            return f"scout: the repository map is not ready yet ({self.state})"
        words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", question)}
        hits = []
        for path in self.files:
            names = self.symbols.get(path, [])
            matched = [n for n in names if any(w in n.lower() for w in words)]
            if matched or any(w in path.lower() for w in words):
                hits.append(f"{path}: {', '.join(matched) if matched else '(file)'}")
        tests = [f for f in self.files if is_test(f)]
        symbols = sum(len(v) for v in self.symbols.values())
        head = (f"scout: {counted(len(self.files), 'file')}, {counted(symbols, 'Python symbol')}; "
                f"tests in: {', '.join(tests[:10]) or 'none found'}")
        if not hits:
            return head + "\nnothing in the map matches the question's words"
        return head + "\n" + "\n".join(hits[:40])

    async def _ask_model(self, question: str) -> str:
        async with self._asking:
            self.state = "answering"
            if not self._spawned:  # its prompt and tools, for replay
                self.record(AgentSpawned(role="scout", model=self.agent.provider.model,
                                         system_prompt=self.agent.system_prompt, tools=list(self.agent.tools)))
                self._spawned = True
            self.record(UserMessage(text=question))
            outcome = await self.agent.run()
            self.state = "watching"
            if outcome.exit_reason != "finished":
                return f"scout: could not answer ({outcome.exit_reason}: {outcome.message})"
            return f"scout: {outcome.result}"


def is_test(path: str) -> bool:
    """Whether a repository path looks like a test file (a source file: never bytecode)."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith((".pyc", ".pyo")) or "/__pycache__/" in f"/{path}":
        return False
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in f"/{path}"
