"""A session's goal and its counters: a pure fold over the session's events.

Live, the session folds each event as it is recorded; on resume the same fold runs over
the log, so the counters (judgments, turns, dollars, working time, the stuck streaks) go
on where they were and are never reset by a restart.

Events (``agents/goal``): ``goal_set`` starts a goal (and ends the one before);
``goal_checked`` is one stage of a judgment (``by`` ``check`` or ``evaluator``);
``goal_updated`` changes its status (``paused``, ``active``, ``cleared``, or an end:
``met``, ``impossible``, ``budget_limited``). The working agent's model responses while the
goal is active count as its turns; every agent's dollars count (the evaluator's too).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import assert_never

from ..clock import WorkClock
from ..core import events as evt
from ..core.conversation import TextBlock, ToolCallBlock
from ..core.words import counted

__all__ = ["ENDED", "EVALUATOR", "GoalState"]

#: The agent id of the goal's evaluator (its own conversation in the log).
EVALUATOR = "evaluator"

#: Statuses after which the goal is over.
ENDED = frozenset({"met", "impossible", "budget_limited", "cleared"})


@dataclass
class GoalState:
    """The current (or last) goal of a session.

    Attributes:
        goal_id: ``g1``, ``g2``... ("" before any goal).
        status: ``active``, ``paused``, or an end (``ENDED``); "" before any goal.
        checks: judgments made (a judgment's check and evaluator stages count once).
        turns: the working agent's model turns since the goal was set.
        cost_usd: dollars of every agent's model calls since the goal was set.
        awaiting: the working agent stopped and its turn is not judged yet.
        last_text: the working agent's last message.
        evaluator_due: the judgment whose check passed and whose evaluator verdict is not in
            yet (0: none). ``asked``: the evaluator was sent evidence that no verdict has
            answered yet; ``answer``: its reply to it, when one came (a restart between the
            reply and the verdict uses it, never asks twice).
        same_blocker / same_diff: the stuck streaks (consecutive judgments with the same
            blocker; with no change to the workspace).
    """

    agent: str = "main"
    goal_id: str = ""
    condition: str = ""
    check: str = ""
    budget_usd: float = 0.0
    max_turns: int = 0
    max_wall_s: float = 0.0
    stuck_turns: int = 3
    status: str = ""
    set_by: str = ""
    checks: int = 0
    turns: int = 0
    cost_usd: float = 0.0
    clock: WorkClock = field(default_factory=WorkClock)
    awaiting: bool = False
    last_text: str = ""
    evaluator_due: int = 0
    asked: bool = False
    answer: str | None = None
    diff_hash: str = ""
    last_blocker: str = ""
    same_blocker: int = 0
    same_diff: int = 0
    last_reason: str = ""
    check_output: str = ""  # of the check that passed, for the evaluator
    reason: str = ""
    summary: str = ""
    goals: int = 0

    @property
    def active(self) -> bool:
        return self.status == "active"

    def wall_s(self, now: float | None = None) -> float:
        """Seconds worked on the goal (its clock runs while the agents work on it)."""
        return self.clock.seconds(time.time() if now is None else now)

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event (every type is decided here, ``assert_never`` for the rest)."""
        if self.active:
            self.clock.tick(event)
        match event:
            case evt.ModelRequest() | evt.ToolStarted() | evt.ToolFinished():
                pass  # the most frequent types first: each class pattern tried is an isinstance (issue 19)
            case evt.ModelResponse():
                if self.active:
                    self._response(event)
            case evt.GoalSet():
                self._set(event)
            case evt.GoalChecked():
                self._checked(event)
            case evt.GoalUpdated():
                self.status, self.reason = event.status, event.reason
                self.summary = event.summary if isinstance(event.summary, str) else self.summary
                if self.active:
                    self.same_blocker = self.same_diff = 0
                    self.clock.start(event.ts)
                else:
                    self.clock.stop()
                    self.awaiting = False
            case evt.TurnEnded():
                if self.active:
                    self.clock.stop()
            case evt.UserMessage():
                if self.active and event.agent == self.agent:
                    self.clock.start(event.ts)
                    self.awaiting = False
                elif self.active and event.agent == EVALUATOR:
                    self.asked, self.answer = True, None
            case (evt.SessionStarted() | evt.SessionResumed() | evt.LogRepaired() | evt.SessionEnded() | evt.AgentMessage()
                  | evt.ModelRetry() | evt.RateLimited() | evt.ApprovalRequested() | evt.ApprovalResolved() | evt.FileEditStarted() | evt.FileEdited() | evt.ToolInterrupted() | evt.NetConnection() | evt.InstructionsAdded() | evt.SkillLoaded()
                  | evt.HookContext() | evt.HookRan() | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting()
                  | evt.McpServerFailed() | evt.AgentSpawned() | evt.AgentFailed() | evt.WorkerSpawned() | evt.WorkerFinished()
                  | evt.Integration() | evt.IntegrationApplied() | evt.TestRun() | evt.BaselineSnapshot() | evt.RepoMap() | evt.Review()
                  | evt.KernelEvaluated() | evt.ModelSwitched() | evt.ToolResultsCleared() | evt.ApprovalModeChanged()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound()
                  | evt.CompactionStarted() | evt.CompactionFinished() | evt.ContextCut()):
                pass  # no part of a goal (the clock above counts their time)
            case _:
                assert_never(event)

    def _set(self, event: evt.GoalSet) -> None:
        self.goals += 1
        self.goal_id = event.goal_id or f"g{self.goals}"
        self.condition, self.check, self.set_by, self.diff_hash = event.condition, event.check, event.by, event.diff_hash
        self.budget_usd, self.max_turns, self.max_wall_s = event.budget_usd, event.max_turns, event.max_wall_s
        self.stuck_turns = event.stuck_turns
        self.status = "active"
        self.checks = self.turns = self.same_blocker = self.same_diff = self.evaluator_due = 0
        self.cost_usd = 0.0
        self.clock = WorkClock()
        self.clock.start(event.ts)
        self.awaiting, self.asked, self.answer = False, False, None
        self.last_text = self.last_blocker = self.last_reason = self.reason = self.summary = self.check_output = ""

    def _checked(self, event: evt.GoalChecked) -> None:
        self.checks = max(self.checks, event.n)
        if event.by == "check" and event.verdict == "met":
            self.evaluator_due = event.n
            self.check_output = event.output if isinstance(event.output, str) else ""
            return
        self.evaluator_due, self.asked, self.answer = 0, False, None
        self.awaiting = False
        self.last_reason = event.reason
        self.same_diff = self.same_diff + 1 if event.diff_hash == self.diff_hash else 0
        self.diff_hash = event.diff_hash
        blocker = event.blocker
        self.same_blocker = self.same_blocker + 1 if blocker and blocker == self.last_blocker else (1 if blocker else 0)
        self.last_blocker = blocker
        if event.instruct:
            self.clock.start(event.ts)

    def _response(self, event: evt.ModelResponse) -> None:
        self.cost_usd += float(event.cost_usd)
        text = "".join(b.text for b in event.content if isinstance(b, TextBlock))
        if event.agent == EVALUATOR and self.asked:
            self.answer = text
        if event.agent != self.agent:
            return
        self.turns += 1
        calls = any(isinstance(b, ToolCallBlock) for b in event.content)
        self.awaiting = not calls
        if not calls:
            self.last_text = text

    # -- views ------------------------------------------------------------------------

    def spent(self, now: float | None = None) -> str:
        """What the goal has used, against its budget, in words."""
        def of(cap: float, unit: str) -> str:
            return f" of {cap:g}{unit}" if cap else ""
        return (f"{counted(self.turns, 'turn')}{of(self.max_turns, '')}, ${self.cost_usd:.4f}{of(self.budget_usd, '')}, "
                f"{self.wall_s(now):.0f} s{of(self.max_wall_s, ' s')}")

    def exhausted(self, now: float | None = None) -> tuple[str, str]:
        """Which of the goal's limits is spent: the loop's exit reason for it (``max_turns``,
        ``budget``, ``max_wall``) and what happened in words; ``("", "")`` while none is."""
        if self.max_turns and self.turns >= self.max_turns:
            return "max_turns", f"the goal's {counted(self.max_turns, 'turn')} (--max-turns) are spent"
        if self.budget_usd and self.cost_usd >= self.budget_usd:
            return "budget", f"the goal's ${self.budget_usd:g} (--budget-usd) is spent: ${self.cost_usd:.4f}"
        if self.max_wall_s and self.wall_s(now) >= self.max_wall_s:
            return "max_wall", f"the goal's {self.max_wall_s:g} s of work (--max-wall) are spent"
        return "", ""

    def describe(self) -> list[str]:
        """``/goal``'s lines: the goal, its status and counters."""
        if not self.goal_id:
            return ["no goal in this session; set one with /goal CONDITION [--check \"CMD\"]"]
        lines = [f"goal {self.goal_id}: {self.status}" + (f" ({self.reason})" if self.reason and not self.active else ""),
                 f"  condition: {self.condition}"]
        if self.check:
            lines.append(f"  check: {self.check}")
        lines.append(f"  judged {counted(self.checks, 'time')}; spent {self.spent()}")
        if self.last_reason and self.status in ("active", "paused"):
            lines.append(f"  last judgment: {self.last_reason}")
        if self.summary and self.status in ENDED:
            lines.append(f"  summary: {self.summary}")
        return lines

