"""One campaign: its spec, workspace, leaderboard, kept commits and output files.

``Campaign`` is the piece the tools drive. ``evaluate(path, tool_calls)`` runs
``evaluate_kernel``, commits the source on the campaign branch when it beats the best so far,
adds the result to the leaderboard, hands the entry to ``sink`` (the session records it as a
``kernel_evaluated`` event; ``JsonlSink`` appends it to a file for standalone use), and
rewrites ``leaderboard.csv`` and ``speedup.png`` in the output folder. ``replay(entries)``
rebuilds the board from recorded entries, so a resumed campaign keeps its leaderboard.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from ..core.words import counted
from .evaluate import Evaluation, evaluate_kernel
from .keep import branch_name, commit_candidate
from .leaderboard import Entry, Leaderboard
from .spec import CampaignSpec


class JsonlSink:
    """Appends each entry as one JSON line; ``load()`` reads them back (a torn last line is skipped)."""

    def __init__(self, path: Path):
        self.path = path

    def __call__(self, entry: Entry) -> None:
        """Append ``entry``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as fh:
            fh.write(msgspec.json.encode(entry) + b"\n")

    def load(self) -> list[Entry]:
        """Every complete entry in order."""
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_bytes().splitlines():
            try:
                out.append(msgspec.json.decode(line, type=Entry))
            except msgspec.DecodeError:
                break  # a torn tail: the process died mid-write
        return out


class Campaign:
    """A running campaign (see the module docstring).

    Args:
        spec: the campaign spec.
        workspace: the folder holding the candidate file (inside a git repository for commits).
        out_dir: where ``leaderboard.csv`` and ``speedup.png`` are written.
        sink: called with every new entry (persistence), or None.
        evaluator: the function that evaluates (default ``evaluate_kernel``; the Ray runner
            has the same signature).
    """

    def __init__(self, spec: CampaignSpec, workspace: Path, out_dir: Path,
                 sink: Callable[[Entry], None] | None = None,
                 evaluator: Callable[..., Evaluation] = evaluate_kernel):  # fmt: skip
        self.spec, self.workspace, self.out_dir = spec, Path(workspace), Path(out_dir)
        self.sink, self.evaluator = sink, evaluator
        self.board = Leaderboard()
        self.branch = branch_name(spec.name)
        self.started_at = time.time()  # the session's start, set by the role on resume
        self.max_wall_s = spec.max_wall_s

    def in_worktree(self, workspace: Path) -> Campaign:
        """The same campaign seen from a fan-out worker's worktree (issue 16 part 6: variant
        ideas tried in parallel): candidates are read from ``workspace``; the leaderboard,
        the sink, the branch, the budgets and the output files are shared, so every
        worker's evaluation is ranked on one board and a new best from any of them is
        committed on the one campaign branch. Evaluations still never overlap on a device
        (the tools' per-device queue)."""
        view = copy.copy(self)
        view.workspace = Path(workspace)
        return view

    def budget_spent(self, tool_calls: int) -> str | None:
        """Why the campaign may not evaluate any more (wall time or tool calls), or None."""
        limit = self.spec.budget.max_tool_calls
        if limit is not None and tool_calls >= limit:
            return f"the campaign's budget of {counted(limit, 'tool call')} is spent"
        if time.time() - self.started_at >= self.max_wall_s:
            return f"the campaign's wall-time budget of {self.max_wall_s:g} s is spent"
        return None

    def prepare(self) -> Path:
        """Put the spec's starting candidate in the workspace unless a candidate is already there."""
        target = self.workspace / self.spec.candidate
        if not target.exists() and self.spec.start:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(self.spec.spec_dir) / self.spec.start, target)
        return target

    def replay(self, entries: Iterable[Entry]) -> None:
        """Rebuild the board from recorded entries (resume, replay); writes nothing."""
        for e in entries:
            self.board.add(e.evaluation, e.commit)

    def evaluate(self, path: str | None = None, tool_calls: int = 0) -> Entry:
        """Evaluate a candidate, keep it if it is the best, record it; return its entry.

        The same as ``run``, ``keep``, ``publish`` and ``write_outputs`` in turn; a caller
        on an event loop runs ``run`` and ``write_outputs`` in a worker thread and the rest
        on the loop (the sink, e.g. a session's recorder, may not be thread-safe).
        """
        entry = self.keep(self.run(path, tool_calls))
        self.publish(entry)
        self.write_outputs()
        return entry

    def run(self, path: str | None = None, tool_calls: int = 0, **where: Any) -> Evaluation:
        """Evaluate ``path`` (default: the spec's candidate) with the campaign's evaluator
        (blocking); ``where`` (``sandbox``, ``env``: the session's) goes to the evaluator."""
        return self.evaluator(self.spec, self.workspace, path or self.spec.candidate, tool_calls=tool_calls, **where)

    def keep(self, ev: Evaluation) -> Entry:
        """Commit the candidate when ``ev`` beats the best so far, and add ``ev`` to the board."""
        commit = None
        if self.board.improves(ev):
            source = (self.workspace / ev.candidate).read_text()
            previous = self.board.best.evaluation.speedup if self.board.best else None
            msg = _commit_message(self.spec.name, ev, previous)
            try:
                commit = commit_candidate(self.workspace, self.branch, self.spec.candidate, source, msg)
            except Exception as exc:  # no repository: the board still records the result
                ev = msgspec.structs.replace(ev, notes=[*ev.notes, f"not committed: {exc}"])
        return self.board.add(ev, commit)

    def publish(self, entry: Entry) -> None:
        """Hand a new entry to the sink (persistence), if there is one."""
        if self.sink is not None:
            self.sink(entry)

    def write_outputs(self) -> tuple[Path, Path]:
        """Rewrite the CSV and the PNG; return their paths."""
        csv_path = self.board.write_csv(self.out_dir / "leaderboard.csv")
        png_path = self.board.plot(self.out_dir / "speedup.png", title=f"{self.spec.name}: speedup vs tool calls")
        return csv_path, png_path


def _commit_message(name: str, ev: Evaluation, previous: float | None) -> str:
    was = f" (was {previous:.3f}x)" if previous else ""
    body = json.dumps({"candidate_sha256": ev.candidate_sha256, "timing": ev.timing,
                       "candidate_us": ev.candidate_us, "baseline_us": ev.baseline_us,
                       "tool_calls": ev.tool_calls}, indent=1)  # fmt: skip
    return f"{name}: {ev.speedup:.3f}x over the baseline{was}\n\n{body}\n"


def summary(entry: Entry, board: Leaderboard) -> str:
    """What the model sees after an evaluation: verdict, errors, times, the best so far."""
    ev = entry.evaluation
    lines = [f"evaluation #{entry.n} of {ev.candidate} ({ev.candidate_sha256[:12]}): {ev.status}"]
    if ev.reason:
        lines.append(f"reason: {ev.reason}")
    for s in ev.shapes:
        label = ",".join(f"{k}={v}" for k, v in s.shape.items())
        part = f"  {label} {s.dtype}: {'ok' if s.ok else 'FAILED'}"
        if s.max_abs is not None:
            part += f" max_abs={s.max_abs:.2e} max_rel={s.max_rel:.2e} rel_rms={s.rel_rms:.2e}"
        if s.nonfinite:
            part += f" nan/inf={s.nonfinite}"
        if s.candidate_us is not None:
            part += f" candidate={s.candidate_us:.1f}us baseline={s.baseline_us:.1f}us speedup={s.speedup:.3f}x"
        if s.GBps is not None:
            part += f" {s.GBps:.2f}GB/s {s.TFLOPs:.4f}TFLOP/s"
        lines.append(part)
    if ev.correct:
        noise = f", noise +-{ev.noise:.1%}" if ev.noise else ""
        lines.append(f"timing: {ev.timing}" + (f"; speedup {ev.speedup:.3f}x (geometric mean over shapes{noise})" if ev.speedup else ""))
    if entry.commit:
        lines.append(f"new best: kept as commit {entry.commit[:12]}")
    elif ev.correct and ev.speedup and entry is not board.best:
        lines.append("not a new best: not faster than the best so far (or the baseline) by more than the noise")
    best = board.best
    lines.append(f"best so far: {best.evaluation.speedup:.3f}x (#{best.n})" if best else "best so far: none")
    return "\n".join(lines)
