"""``spawn_workers``: the tool through which the main agent fans a task out (DESIGN §7, §9).

The tool checks its input and hands the tasks to a runner that the daemon provides (it
owns the session, the worktrees and the worker agents); the runner's report is the
tool's result.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..core.conversation import ToolSpec
from ..tools.base import ToolContext, ToolOutput

MAX_WORKERS = 8
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

Runner = Callable[[list[dict[str, str]]], Awaitable[ToolOutput]]


def check_tasks(input: dict[str, Any]) -> list[dict[str, str]]:
    """The tasks of a ``spawn_workers`` call, checked.

    Raises:
        ValueError: with a one-line message saying what to change.
    """
    tasks = input.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise ValueError("`tasks` must be a non-empty list of {name, instruction}")
    if len(tasks) > MAX_WORKERS:
        raise ValueError(f"at most {MAX_WORKERS} workers at once; got {len(tasks)}")
    out, seen = [], set()
    for n, task in enumerate(tasks):
        if not isinstance(task, dict) or not isinstance(task.get("name"), str) or not isinstance(task.get("instruction"), str):
            raise ValueError(f"tasks[{n}] must be an object with string `name` and `instruction`")
        name, instruction = task["name"], task["instruction"].strip()
        if not _NAME.match(name) or name == "integration":
            raise ValueError(f"worker name {name!r} must be 1-64 of A-Z a-z 0-9 . _ - and not 'integration'")
        if name in seen:
            raise ValueError(f"worker name {name!r} is used twice")
        if not instruction:
            raise ValueError(f"worker {name!r} has an empty instruction")
        seen.add(name)
        out.append({"name": name, "instruction": instruction})
    return out


class SpawnWorkersTool:
    """Start workers, each an agent in its own worktree; integrate and test their branches."""

    name = "spawn_workers"
    access = "execute"
    spec = ToolSpec(
        name="spawn_workers",
        description=(
            "Split the task: start workers that run in parallel, each an agent with the same tools in its own "
            "Git worktree on its own branch, from the current commit (uncommitted changes are snapshotted). "
            "Each worker's changes are committed on its branch; then the branches are merged in a separate "
            "integration worktree and the project's tests run on the merged result. The result lists each "
            "worker's outcome, merge conflicts by file and failing tests. The person's working copy is not "
            "touched; they bring the result home with `musec apply`. Give each worker a self-contained "
            "instruction; workers cannot see each other."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_WORKERS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "description": "short worker name: letters, digits, . _ -"},
                            "instruction": {"type": "string", "description": "what this worker must do"},
                        },
                        "required": ["name", "instruction"],
                    },
                }
            },
            "required": ["tasks"],
        },
    )

    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            tasks = check_tasks(input)
        except ValueError as exc:
            return ToolOutput(content=f"spawn_workers: {exc}", is_error=True)
        return await self._runner(tasks)
