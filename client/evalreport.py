"""The table (and plot) of a finished Harbor job: what ``musec eval`` prints.

Reads the job directory Harbor writes (harbor 0.26.0): ``JOB/result.json`` (the job's
start and end) and one ``JOB/TRIAL/result.json`` per trial, with ``task_name``,
``agent_info``, ``agent_result`` (``n_input_tokens`` including cached input,
``n_cache_tokens``, ``n_output_tokens``, ``cost_usd``), ``verifier_result.rewards.reward``,
``exception_info.exception_type`` and the phase timings. Standard library only: the
client's import path stays light (matplotlib is imported by ``plot`` alone).

Statistics: the pass rate's 95% interval is Wilson's score interval (Wilson 1927), which
stays inside [0, 1] and behaves at 0 and n passes; pass@k is the unbiased estimator of
Chen et al. 2021 ("Evaluating Large Language Models Trained on Code"),
``1 - C(n - c, k) / C(n, k)`` per task, averaged over tasks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

PASS_THRESHOLD = 1.0 - 1e-9
FAILURE_CLASSES = ("wrong result", "agent error", "timeout", "verifier failure", "provider error")
_PROVIDER_ERRORS = {"ApiError", "ApiRateLimitError", "ApiUsageLimitError", "ApiInternalServerError",
                    "ApiOverloadedError", "ApiConnectionClosedError", "ApiResponseStalledError",
                    "UnknownApiError", "AgentAuthenticationError", "ModelNotFoundError",
                    "NetworkConnectionError", "ContextWindowExceededError", "OutputTokenExceededError"}
_VERIFIER_ERRORS = {"RewardFileNotFoundError", "RewardFileEmptyError", "VerifierOutputParseError",
                    "AddTestsDirError", "DownloadVerifierDirError", "VerifierTimeoutError"}


class JobNotFound(ValueError):
    """The path is not a Harbor job directory (the message says what is missing)."""


@dataclass
class Trial:
    """One attempt at one task, as Harbor recorded it."""

    name: str
    task: str
    reward: float | None
    exception: str
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float
    wall_s: float

    @property
    def passed(self) -> bool:
        return self.reward is not None and self.reward >= PASS_THRESHOLD

    @property
    def failure(self) -> str:
        """Why it did not pass: one of ``FAILURE_CLASSES``, or ``""`` when it passed."""
        if self.passed:
            return ""
        e = self.exception
        if e in ("AgentTimeoutError", "VerifierTimeoutError", "EnvironmentStartTimeoutError") or "Timeout" in e:
            return "timeout"
        if e in _PROVIDER_ERRORS:
            return "provider error"
        if e in _VERIFIER_ERRORS or (not e and self.reward is None):
            return "verifier failure"
        return "agent error" if e else "wrong result"


@dataclass
class Report:
    """A job's numbers; ``str(report)`` is the table."""

    job: Path
    agent: str
    model: str
    trials: list[Trial]
    wall_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def tasks(self) -> dict[str, list[Trial]]:
        out: dict[str, list[Trial]] = {}
        for t in self.trials:
            out.setdefault(t.task, []).append(t)
        return out

    def pass_at(self, k: int) -> float:
        """Mean over tasks of the unbiased pass@k (tasks with fewer than k attempts skipped)."""
        values = [pass_at_k(len(ts), sum(t.passed for t in ts), k) for ts in self.tasks.values() if len(ts) >= k]
        return sum(values) / len(values) if values else float("nan")

    def as_dict(self) -> dict[str, Any]:
        n, passed = len(self.trials), sum(t.passed for t in self.trials)
        low, high = wilson_interval(passed, n)
        cost = sum(t.cost_usd for t in self.trials)
        solved = sum(any(t.passed for t in ts) for ts in self.tasks.values())
        k = max((len(ts) for ts in self.tasks.values()), default=0)
        return {
            "job": str(self.job), "agent": self.agent, "model": self.model, "tasks": len(self.tasks), "trials": n,
            "passed": passed, "pass_rate": passed / n if n else float("nan"), "pass_rate_ci95": [low, high],
            "pass_at_k": {str(i): self.pass_at(i) for i in sorted({1, k}) if i >= 1},
            "tasks_solved": solved, "cost_usd": cost,
            "cost_per_task_usd": cost / len(self.tasks) if self.tasks else float("nan"),
            "cost_per_solved_task_usd": cost / solved if solved else float("nan"),
            "input_tokens": sum(t.input_tokens for t in self.trials),
            "cached_tokens": sum(t.cached_tokens for t in self.trials),
            "output_tokens": sum(t.output_tokens for t in self.trials),
            "wall_s": self.wall_s, "trial_wall_s_median": _median([t.wall_s for t in self.trials]),
            "failures": {c: sum(t.failure == c for t in self.trials) for c in FAILURE_CLASSES},
            "per_task": {name: {"attempts": len(ts), "passed": sum(t.passed for t in ts),
                                "cost_usd": sum(t.cost_usd for t in ts),
                                "failures": sorted({t.failure for t in ts} - {""})}
                         for name, ts in sorted(self.tasks.items())},
        }

    def __str__(self) -> str:
        d = self.as_dict()
        low, high = d["pass_rate_ci95"]
        lines = [f"job {self.job}", f"agent {self.agent}  model {self.model}", ""]
        width = max([len(name) for name in d["per_task"]] + [4])
        lines.append(f"{'task':<{width}}  passed  {'cost':>9}  failures")
        for name, row in d["per_task"].items():
            lines.append(f"{name:<{width}}  {row['passed']:>2}/{row['attempts']:<3}  {_usd(row['cost_usd']):>9}  "
                         f"{', '.join(row['failures'])}")
        pass_k = "  ".join(f"pass@{k} {_pct(v)}" for k, v in d["pass_at_k"].items())
        lines += [
            "",
            f"tasks {d['tasks']}, trials {d['trials']}, passed {d['passed']}",
            f"pass rate {_pct(d['pass_rate'])} (95% CI {_pct(low)} to {_pct(high)}, Wilson)  {pass_k}",
            f"cost {_usd(d['cost_usd'])}: {_usd(d['cost_per_task_usd'])} per task, "
            f"{_usd(d['cost_per_solved_task_usd'])} per solved task (failed attempts included)",
            f"tokens: {d['input_tokens']} input ({d['cached_tokens']} cached), {d['output_tokens']} output",
            f"wall time {d['wall_s']:.0f} s (median trial {d['trial_wall_s_median']:.0f} s)",
            "failures: " + (", ".join(f"{c} {n}" for c, n in d["failures"].items() if n) or "none"),
        ]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion (95% by default); (nan, nan) at n=0."""
    if n == 0:
        return float("nan"), float("nan")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n attempts of which c passed (Chen et al. 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, not {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def load(job: Path) -> Report:
    """Read a Harbor job directory.

    Raises:
        JobNotFound: no ``result.json`` in ``job``, or no trial under it.
    """
    job = Path(job)
    if not (job / "result.json").is_file():
        raise JobNotFound(f"{job} is not a Harbor job directory (no result.json); give the folder `musec eval` printed")
    top = _read(job / "result.json")
    config = _read(job / "config.json")
    trials = [_trial(p) for p in sorted(job.glob("*/result.json"))]
    if not trials:
        raise JobNotFound(f"{job} holds no trial results yet")
    agents = config.get("agents") or [{}]
    wall = _seconds(top.get("started_at"), top.get("finished_at") or top.get("updated_at"))
    return Report(job=job, agent=str(agents[0].get("name") or agents[0].get("import_path") or "?"),
                  model=str(agents[0].get("model_name") or "?"), trials=trials, wall_s=wall)


def _trial(path: Path) -> Trial:
    r = _read(path)
    ar = r.get("agent_result") or {}
    rewards = (r.get("verifier_result") or {}).get("rewards") or {}
    reward = rewards.get("reward", next(iter(rewards.values()), None) if rewards else None)
    return Trial(
        name=str(r.get("trial_name") or path.parent.name), task=str(r.get("task_name") or path.parent.name.split("__")[0]),
        reward=float(reward) if isinstance(reward, (int, float)) else None,
        exception=str((r.get("exception_info") or {}).get("exception_type") or ""),
        input_tokens=int(ar.get("n_input_tokens") or 0), cached_tokens=int(ar.get("n_cache_tokens") or 0),
        output_tokens=int(ar.get("n_output_tokens") or 0), cost_usd=float(ar.get("cost_usd") or 0.0),
        wall_s=_seconds(r.get("started_at"), r.get("finished_at")),
    )


def plot(report: Report, out: Path) -> Path:
    """A two-panel PNG: pass rate per task, and cumulative cost against solved trials.

    Raises:
        ImportError: matplotlib is not installed (``pip install 'musec[eval]'``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = report.as_dict()
    names = list(d["per_task"])
    rates = [row["passed"] / row["attempts"] for row in d["per_task"].values()]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, max(3.0, 0.35 * len(names) + 1.5)))
    ax1.barh(names, rates, color=["tab:green" if r >= 1 else "tab:orange" if r > 0 else "tab:red" for r in rates])
    ax1.set_xlim(0, 1)
    ax1.set_xlabel("pass rate")
    ax1.invert_yaxis()
    ax1.set_title(f"{report.model}: {_pct(d['pass_rate'])} of {d['trials']} trials")
    order = sorted(report.trials, key=lambda t: t.cost_usd)
    cum_cost, solved = [], []
    for t in order:
        cum_cost.append((cum_cost[-1] if cum_cost else 0.0) + t.cost_usd)
        solved.append((solved[-1] if solved else 0) + int(t.passed))
    ax2.step(cum_cost, solved, where="post")
    ax2.set_xlabel("cumulative cost (USD), cheapest trials first")
    ax2.set_ylabel("trials passed")
    ax2.set_title("cost of completion")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _seconds(start: Any, end: Any) -> float:
    try:
        a = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (b - a).total_seconds())


def _median(values: list[float]) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def _usd(x: float) -> str:
    return "n/a" if math.isnan(x) else f"${x:.4f}"
