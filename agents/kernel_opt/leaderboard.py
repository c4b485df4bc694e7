"""The leaderboard of a campaign: a fold over its evaluations, printed, as CSV and as a PNG plot.

The fold is pure (``Leaderboard.add`` in log order), so a resumed or replayed campaign rebuilds
exactly the same board from its ``kernel_evaluated`` events. The plot follows the published
case study: speedup over the baseline (y) against cumulative tool calls (x), every correct
evaluation as a dot and the best-so-far as a step line; incorrect or refused candidates are
marked at the bottom with no speedup.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import IO, Any

import msgspec

from .evaluate import Evaluation

CSV_FIELDS = ("n", "tool_calls", "candidate_sha256", "status", "speedup", "best_speedup",
              "candidate_us", "baseline_us", "timing", "reason", "commit")  # fmt: skip


class Entry(msgspec.Struct, frozen=True):
    """One evaluation on the board: its order ``n`` (1-based), the evaluation, its kept commit."""

    n: int
    evaluation: Evaluation
    commit: str | None = None


#: The least relative gain over the best so far that counts as an improvement.
MIN_GAIN = 0.01


class Leaderboard:
    """Evaluations in order, the best correct one, and whether each improved on the best."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.best: Entry | None = None

    def improves(self, ev: Evaluation) -> bool:
        """Would ``ev`` become the new best? Correct, timed, and faster than the best so far
        (the baseline, 1.0x, before any) by more than the measurement's noise and at least
        ``MIN_GAIN``: an untouched candidate timed at 1.046x is noise, not a speedup."""
        if not ev.correct or ev.speedup is None:
            return False
        floor = max(1.0, self.best.evaluation.speedup or 0.0) if self.best is not None else 1.0
        return ev.speedup > floor * (1 + max(MIN_GAIN, ev.noise or 0.0))

    def add(self, ev: Evaluation, commit: str | None = None) -> Entry:
        """Append an evaluation (with the commit that kept it, if any); return its entry."""
        entry = Entry(len(self.entries) + 1, ev, commit)
        if self.improves(ev):
            self.best = entry
        self.entries.append(entry)
        return entry

    def ranked(self) -> list[Entry]:
        """Correct, timed entries by speedup (best first), then the rest in order."""
        timed = [e for e in self.entries if e.evaluation.correct and e.evaluation.speedup]
        timed.sort(key=lambda e: -(e.evaluation.speedup or 0.0))
        return timed + [e for e in self.entries if e not in timed]

    def rows(self) -> list[dict[str, object]]:
        """One dict per evaluation in order (the CSV's rows), with the best speedup so far."""
        best = 0.0
        out = []
        for e in self.entries:
            ev = e.evaluation
            if ev.correct and ev.speedup:
                best = max(best, ev.speedup)
            out.append({"n": e.n, "tool_calls": ev.tool_calls, "candidate_sha256": ev.candidate_sha256[:12],
                        "status": ev.status, "speedup": _num(ev.speedup), "best_speedup": _num(best or None),
                        "candidate_us": _num(ev.candidate_us), "baseline_us": _num(ev.baseline_us),
                        "timing": ev.timing, "reason": ev.reason or "", "commit": (e.commit or "")[:12]})  # fmt: skip
        return out

    def render(self, limit: int = 20) -> str:
        """The board as text: best first, one line per evaluation."""
        if not self.entries:
            return "no evaluations yet"
        lines = [f"{'#':>4} {'calls':>6} {'status':<9} {'speedup':>8} {'cand us':>10} {'base us':>10}  candidate / reason"]
        for e in self.ranked()[:limit]:
            ev = e.evaluation
            sp = f"{ev.speedup:.3f}x" if ev.speedup else "-"
            what = ev.candidate_sha256[:12] + (f" commit {e.commit[:12]}" if e.commit else "")
            if not ev.correct:
                what = ev.reason or ev.status
            elif ev.speedup is None:
                what += f" (timing {ev.timing})"
            lines.append(f"{e.n:>4} {ev.tool_calls:>6} {ev.status:<9} {sp:>8} {_us(ev.candidate_us):>10} {_us(ev.baseline_us):>10}  {what}")
        return "\n".join(lines)

    def write_csv(self, path: Path) -> Path:
        """Write ``rows()`` as CSV (header ``CSV_FIELDS``), 0600 in a new folder made 0700
        (session data); return the path."""
        with _private_file(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
            writer.writeheader()
            writer.writerows(self.rows())
        return path

    def plot(self, path: Path, title: str = "") -> Path:
        """Write the speedup-vs-tool-calls PNG (matplotlib, Agg backend); return the path."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = self.rows()
        good = [(r["tool_calls"], r["speedup"]) for r in rows if r["speedup"] != ""]
        bad = [r["tool_calls"] for r in rows if r["status"] != "correct"]
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        if good:
            ax.scatter([x for x, _ in good], [y for _, y in good], s=18, label="correct candidate")
            steps = [(r["tool_calls"], r["best_speedup"]) for r in rows if r["best_speedup"] != ""]
            ax.step([x for x, _ in steps], [y for _, y in steps], where="post", label="best so far")
        if bad:
            ax.scatter(bad, [0] * len(bad), marker="x", color="red", label="failed / refused (no speedup)")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="baseline")
        ax.set_xlabel("cumulative tool calls")
        ax.set_ylabel("speedup over baseline (x)")
        ax.set_title(title or "kernel campaign")
        ax.legend(loc="best", fontsize=8)
        try:
            with _private_file(path, "wb") as fh:
                fig.savefig(fh, format="png")
        finally:
            plt.close(fig)
        return path


def _private_file(path: Path, mode: str, **kw: Any) -> IO[Any]:
    """``path`` opened for writing (truncated), 0600 whether new or not; its folder made
    0700 when missing (an existing one is left as it is)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        return open(fd, mode, **kw)  # noqa: SIM115 - the caller's with closes it
    except BaseException:
        os.close(fd)
        raise


def _num(x: float | None) -> object:
    return "" if x is None else round(float(x), 4)


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"
