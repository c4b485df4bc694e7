"""The kernel-optimisation role: what a session needs to run a campaign (DESIGN section 10).

The daemon calls ``start_campaign`` when a session is started with a campaign spec
(``musec optimize SPEC``) or resumed: it gets the campaign's tools, the text added to the
system prompt, and the ``Campaign`` whose leaderboard it replayed from the session's own
``kernel_evaluated`` events. It injects two things and imports nothing of the daemon:
``record(event)``, which appends one ``KernelEvaluated`` event, and ``tool_calls()``, the
session's tool-call count so far.

``evaluated_event`` and ``entry_of`` convert between a leaderboard entry and that event, so
the event log holds everything the board is rebuilt from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from ..core.events import KernelEvaluated
from .campaign import Campaign
from .errors import SpecError
from .evaluate import Evaluation
from .leaderboard import Entry
from .spec import CampaignSpec, load_spec
from .tools import campaign_prompt, campaign_tools


def evaluated_event(entry: Entry, campaign: Campaign) -> KernelEvaluated:
    """The ``kernel_evaluated`` event of ``entry``: a flat summary for readers of the log
    and of ``stream-json``, and the whole evaluation for the leaderboard."""
    ev = entry.evaluation
    return KernelEvaluated(
        campaign=campaign.spec.name, n=entry.n, candidate=ev.candidate,
        candidate_sha256=ev.candidate_sha256, status=ev.status, correct=ev.correct,
        reason=ev.reason, timing=ev.timing, candidate_us=ev.candidate_us,
        baseline_us=ev.baseline_us, speedup=ev.speedup, tool_calls=ev.tool_calls,
        commit=entry.commit, branch=campaign.branch,
        csv_path=str(campaign.out_dir / "leaderboard.csv"),
        plot_path=str(campaign.out_dir / "speedup.png"),
        evaluation=msgspec.to_builtins(ev),
    )  # fmt: skip


def entry_of(event: KernelEvaluated) -> Entry:
    """The leaderboard entry a ``kernel_evaluated`` event records (its ``evaluation`` field)."""
    return Entry(event.n, msgspec.convert(event.evaluation, Evaluation), event.commit)


KERNEL_MODULES = ("torch", "triton", "numpy", "matplotlib")
"""What the evaluation child and the plot import (the ``kernels`` extra)."""


def missing_dependencies() -> list[str]:
    """The modules of ``KERNEL_MODULES`` this Python cannot import (found, not imported)."""
    import importlib.util

    return [name for name in KERNEL_MODULES if importlib.util.find_spec(name) is None]


def start_campaign(
    spec: str | CampaignSpec,
    workspace: Path,
    out_dir: Path,
    record: Callable[[KernelEvaluated], object],
    tool_calls: Callable[[], int],
    past: Iterable[KernelEvaluated] = (),
    started_at: float | None = None,
    max_wall_s: float | None = None,
) -> tuple[Campaign, list[Any], str]:
    """Set up a session's campaign.

    Args:
        spec: a spec name or path (``spec.load_spec``), or a loaded spec.
        workspace: the session's workspace (the candidate file lives there).
        out_dir: where the CSV and the plot go.
        record: appends one ``kernel_evaluated`` event.
        tool_calls: the session's tool-call count so far.
        past: the session's earlier ``kernel_evaluated`` events, in order
            (resume), from which the board is rebuilt.
        started_at: when the session started (Unix seconds; the wall budget counts from it).
        max_wall_s: the wall-time budget, overriding the spec's ``budget.max_wall``.

    Returns:
        ``(campaign, tools, prompt_suffix)``.

    Raises:
        SpecError: the spec cannot be used (one line saying what to fix).
    """
    missing = missing_dependencies()
    if missing:
        raise SpecError(f"a kernel campaign needs {', '.join(missing)}, not installed beside musec: "
                        "pip install 'musec[kernels]' (on a machine without a GPU, install a CPU torch first)")
    spec = spec if isinstance(spec, CampaignSpec) else load_spec(spec)
    campaign = Campaign(spec, workspace, out_dir)
    if started_at is not None:
        campaign.started_at = started_at
    if max_wall_s is not None:
        campaign.max_wall_s = max_wall_s
    campaign.replay(entry_of(e) for e in past)
    campaign.sink = lambda entry: record(evaluated_event(entry, campaign))
    campaign.prepare()
    if campaign.board.entries:
        campaign.write_outputs()
    return campaign, campaign_tools(campaign, tool_calls), campaign_prompt(campaign)


def campaign_task(spec: CampaignSpec) -> str:
    """The first message of a ``musec optimize`` session."""
    return (
        f"Optimise the kernel of campaign {spec.name!r}: {spec.description}. Edit {spec.candidate} and call "
        "evaluate_kernel after each change; keep going until the budget is spent or you cannot improve further, "
        "then show the leaderboard."
    )
