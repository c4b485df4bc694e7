"""The tools of a kernel-optimisation campaign, offered to its agent next to the standard ones.

- ``evaluate_kernel {path?}``: check the candidate on every shape and time it against the
  baseline (``evaluate.evaluate_kernel`` in a separate process with a timeout); the best
  correct candidate is committed on the campaign branch; every call is recorded (the
  session's ``kernel_evaluated`` event).
- ``profile_kernel {path?, shape?}``: the profiler's key figures, or a plain "no profiler".
- ``kernel_leaderboard {}``: the board, best first, and where the CSV and plot are.

The evaluation process runs the candidate as the person's code (like ``bash``, these tools
execute and so go through approval); forbidden imports are refused before it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from ..core.conversation import ToolSpec
from ..tools.base import ToolContext, ToolOutput
from .campaign import Campaign, summary
from .profile import profile_kernel
from .spec import shape_label

#: One lock per device kind for the whole process: evaluations on one GPU (or of two sessions
#: of one daemon) never overlap, so their timings do not interfere. Made on first use, on the
#: daemon's event loop.
_DEVICE_LOCKS: dict[str, anyio.Lock] = {}


def _device_lock(device: str) -> anyio.Lock:
    if device not in _DEVICE_LOCKS:
        _DEVICE_LOCKS[device] = anyio.Lock()
    return _DEVICE_LOCKS[device]


_PATH = {"type": "string", "description": "the candidate file, relative to the workspace (default: the spec's candidate)"}


def _path(campaign: Campaign, input: dict[str, Any]) -> str | ToolOutput:
    path = input.get("path") or campaign.spec.candidate
    if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
        return ToolOutput(content="path must be a file inside the workspace, e.g. " + campaign.spec.candidate, is_error=True)
    if not (campaign.workspace / path).is_file():
        return ToolOutput(content=f"no file {path} in the workspace; write your candidate there first", is_error=True)
    return path


class EvaluateKernelTool:
    """``evaluate_kernel``: check, time, keep and record a candidate (see the module docstring)."""

    name = "evaluate_kernel"
    access = "execute"

    def __init__(self, campaign: Campaign, tool_calls: Callable[[], int]) -> None:
        self.campaign = campaign
        self.tool_calls = tool_calls
        shapes = "; ".join(shape_label(s) for s in campaign.spec.shapes)
        self.spec = ToolSpec(
            name=self.name,
            description=(
                f"Evaluate a candidate for the {campaign.spec.name} campaign: it runs in a separate process "
                f"(timeout {campaign.spec.budget.eval_timeout_s:g} s), is checked against the reference on every "
                f"shape ({shapes}) and, if correct, timed against the baseline the same way. Imports of "
                f"{', '.join(campaign.spec.forbidden_modules[:6])}, ... are refused. A new best is committed on "
                f"branch {campaign.branch}."
            ),
            input_schema={"type": "object", "properties": {"path": _PATH}},
        )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return [input.get("path") or self.campaign.spec.candidate]

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = _path(self.campaign, input)
        if isinstance(path, ToolOutput):
            return path
        c = self.campaign
        calls = self.tool_calls()
        spent = c.budget_spent(calls)
        if spent:
            return ToolOutput(content=f"{spent}: stop evaluating and show the leaderboard", is_error=True)
        async with _device_lock(c.spec.device):  # evaluations never overlap: their timings would interfere
            ev = await anyio.to_thread.run_sync(lambda: c.run(path, calls, sandbox=ctx.sandbox, env=ctx.env),
                                                abandon_on_cancel=True)
            entry = c.keep(ev)
            c.publish(entry)  # on the event loop: the session's recorder is not thread-safe
            await anyio.to_thread.run_sync(c.write_outputs, abandon_on_cancel=True)
        return ToolOutput(content=summary(entry, c.board), is_error=not entry.evaluation.correct)


class ProfileKernelTool:
    """``profile_kernel``: the profiler's table for one shape, or why there is none."""

    name = "profile_kernel"
    access = "execute"

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.spec = ToolSpec(
            name=self.name,
            description="Profile a candidate at one of the campaign's shapes (index into the spec's shapes, default 0); "
                        "says plainly when no profiler is available on this machine.",
            input_schema={"type": "object", "properties": {"path": _PATH, "shape": {"type": "integer", "minimum": 0}}},
        )  # fmt: skip

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return [input.get("path") or self.campaign.spec.candidate]

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = _path(self.campaign, input)
        if isinstance(path, ToolOutput):
            return path
        shape = input.get("shape", 0)
        if not isinstance(shape, int) or isinstance(shape, bool):
            return ToolOutput(content="shape must be an integer index into the spec's shapes", is_error=True)
        c = self.campaign
        text, is_error = await anyio.to_thread.run_sync(
            lambda: profile_kernel(c.spec, c.workspace, path, shape, sandbox=ctx.sandbox, env=ctx.env),
            abandon_on_cancel=True
        )
        return ToolOutput(content=text, is_error=is_error)


class KernelLeaderboardTool:
    """``kernel_leaderboard``: the campaign's board, best first, with the CSV and plot paths."""

    name = "kernel_leaderboard"
    access = "read"

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.spec = ToolSpec(
            name=self.name,
            description="Show the campaign's leaderboard: every evaluation so far, the best first.",
            input_schema={"type": "object", "properties": {}},
        )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        out = self.campaign.out_dir
        text = self.campaign.board.render()
        return ToolOutput(content=f"{text}\n\nCSV: {out / 'leaderboard.csv'}\nplot: {out / 'speedup.png'}")


def campaign_tools(campaign: Campaign, tool_calls: Callable[[], int]) -> list[Any]:
    """The three tools of a campaign, in the order offered to the model."""
    return [EvaluateKernelTool(campaign, tool_calls), ProfileKernelTool(campaign), KernelLeaderboardTool(campaign)]


def campaign_prompt(campaign: Campaign) -> str:
    """What the campaign's agent is told on top of the normal system prompt."""
    s = campaign.spec
    return (
        f"\n\nYou are running the kernel-optimisation campaign {s.name!r}: {s.description}.\n"
        f"Edit {s.candidate} (its callable `{s.entry}` must compute what the reference {s.reference} computes), "
        "then call evaluate_kernel. A failed check never counts; correct candidates are timed against the "
        f"baseline ({', '.join(s.baseline)}) and the best is committed on branch {campaign.branch}. "
        f"Do not import {', '.join(s.forbidden_modules)}: write the algorithm yourself."
    )
