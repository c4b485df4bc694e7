"""Working toward a goal: judge each turn, send the agent back, end or pause the goal.

``GoalDriver.drive`` wraps a turn of the session (the working agent's run, with its
review rounds): when the agent stops while a goal is active, the turn is judged. The
check command runs first (in the sandbox; exit 0 passes); when it passes, or there is
none, the evaluator (a separate agent with its own prompt and no tools, never the working
agent) is sent the goal and the evidence and answers with a verdict. Not met: the reason
goes back to the working agent (``goal_checked`` with ``instruct``) and it goes on. Met or
impossible: the goal ends with the evaluator's summary. A spent budget ends it
``budget_limited``; the same blocker three times, or no change to the workspace for
``stuck_turns`` judgments, pauses it and tells the person.

Every step is an event first (``goal_set``, ``goal_checked``, ``goal_updated``, the
evaluator's own conversation), and ``GoalState`` is their fold, so a restart at any point
goes on from the log: an unjudged stop is judged, a check is run again only when its
result was not logged, and the evaluator is never asked twice for one judgment.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from ..attachments import attach
from ..core.events import UNSET, AnyEvent, GoalChecked, GoalSet, GoalUpdated, UserMessage
from ..core.words import counted
from ..loop import Outcome
from .judge import blocker_of_check, parse_verdict, run_check, workspace_state
from .spec import GoalSpec, GoalUsageError, parse_goal_command
from .state import EVALUATOR, GoalState
from .texts import evidence

__all__ = ["BLOCKER_REPEATS", "GoalDriver"]

#: The same blocker this many judgments in a row pauses the goal.
BLOCKER_REPEATS = 3
#: No change to the workspace for this many judgments in a row pauses the goal (default).
STUCK_TURNS = 3

Record = Callable[[AnyEvent], AnyEvent]


class GoalDriver:
    """The goal of one session.

    Args:
        state: the session's ``GoalState`` (the session folds every event into it).
        record: records an event (the session's ``record``).
        agent: the working (main) agent: its tool context runs the check, its loop asks
            ``limit`` before each model call.
        evaluator: returns the evaluator agent (built on first use, its conversation
            folded from the log).
        kick: starts a turn of the session when it is idle (a goal set or resumed then).
    """

    def __init__(self, state: GoalState, record: Record, agent: Any, evaluator: Callable[[], Any],
                 kick: Callable[[], None]) -> None:
        self.state = state
        self._record = record
        self.agent = agent
        self._evaluator = evaluator
        self._kick = kick
        agent.extra_limit = self.limit
        agent.extra_wall_left = self.wall_left

    # -- the person's commands ----------------------------------------------------------

    async def command(self, text: str, *, idle: bool) -> list[str]:
        """Do ``/goal TEXT``; return the lines to show.

        Raises:
            GoalUsageError: bad arguments, or an action the goal's status does not allow.
        """
        cmd = parse_goal_command(text)
        st = self.state
        if cmd.action == "status":
            return st.describe()
        if cmd.action == "set":
            assert cmd.spec is not None
            if st.status in ("active", "paused"):
                self._update("cleared", "person", f"replaced by a new goal: {cmd.spec.condition[:200]}")
            await self.set(cmd.spec, by="person")
            if idle:
                self._kick()
            return [f"goal {st.goal_id} set: {st.condition}" + (f" (check: {st.check})" if st.check else "")]
        if st.status not in ("active", "paused"):
            raise GoalUsageError(f"no goal to {cmd.action} in this session" + (f" (goal {st.goal_id} is {st.status})" if st.goal_id else ""))
        if cmd.action == "pause":
            if st.status == "paused":
                return [f"goal {st.goal_id} is already paused"]
            self._update("paused", "person", "paused by the person")
            return [f"goal {st.goal_id} paused; /goal resume goes on"]
        if cmd.action == "resume":
            if st.status == "active":
                return [f"goal {st.goal_id} is active"]
            self._update("active", "person", "resumed by the person")
            if idle:
                self._kick()
            return [f"goal {st.goal_id} resumed"]
        self._update("cleared", "person", "cleared by the person")
        return [f"goal {st.goal_id} cleared"]

    async def set(self, spec: GoalSpec, *, by: str) -> None:
        """Record ``goal_set`` (with the workspace's state, the first "no change" baseline)."""
        ws = await anyio.to_thread.run_sync(workspace_state, Path(self.agent.ctx.workspace))
        self._record(GoalSet(goal_id=f"g{self.state.goals + 1}", condition=spec.condition, check=spec.check,
                             budget_usd=spec.budget_usd, max_turns=spec.max_turns, max_wall_s=spec.max_wall_s,
                             stuck_turns=STUCK_TURNS, by=by, diff_hash=ws.digest))

    def resumable(self) -> bool:
        """Whether a resumed session has goal work to go on with (an active goal)."""
        return self.state.active

    # -- the loop ---------------------------------------------------------------------

    def limit(self) -> Outcome | None:
        """The goal's budget, asked by the working agent's loop before each model call."""
        if not self.state.active:
            return None
        kind, why = self.state.exhausted()
        return Outcome(kind, message=why) if kind else None

    def wall_left(self) -> float:
        """Seconds left of the goal's wall time (``inf``: no active goal, or no cap): the
        working agent's running tool is interrupted when they pass."""
        st = self.state
        return st.max_wall_s - st.wall_s() if st.active and st.max_wall_s else math.inf

    async def drive(self, work: Callable[[], Awaitable[Outcome]]) -> Outcome:
        """Run ``work`` (a turn of the working agent) and judge it while a goal is active."""
        st = self.state
        if st.active and (st.awaiting or st.asked or st.evaluator_due):
            outcome = Outcome("finished", result=st.last_text)  # a restart cut the judgment off: do it
        else:
            outcome = await work()
        while st.active:
            if outcome.exit_reason not in ("finished", "max_turns", "budget", "max_wall"):
                return outcome  # an error, an approval, an interrupt: the goal waits, still active
            ended = await self._judge(outcome.result or st.last_text)
            if ended is not None:
                return ended
            kind, why = st.exhausted()
            if kind or outcome.exit_reason in ("budget", "max_wall"):
                return self._end("budget_limited", kind or outcome.exit_reason, why or outcome.message)
            outcome = await work()
        return outcome

    async def _judge(self, last_text: str) -> Outcome | None:
        """One judgment; an ``Outcome`` when the goal ended or paused, else ``None``."""
        st = self.state
        n = st.evaluator_due or st.checks + 1
        ws = await anyio.to_thread.run_sync(workspace_state, Path(self.agent.ctx.workspace))
        if st.check and not st.evaluator_due and not st.asked:
            status, output = await run_check(st.check, self.agent.ctx)
            self.agent.faults.crash_at("goal_check")
            if status == 0:
                self._record(GoalChecked(goal_id=st.goal_id, n=n, by="check", verdict="met", reason=f"the check `{st.check}` passed",
                                         diff_hash=ws.digest, exit_status=status, output=output))
            else:
                how = "could not run" if status is None else f"exited {status}"
                self._record(GoalChecked(
                    goal_id=st.goal_id, n=n, by="check", verdict="not_met",
                    reason=f"The check `{st.check}` {how}; it must exit 0. The end of its output:\n{output}",
                    blocker=blocker_of_check(st.check, status, output), diff_hash=ws.digest, instruct=True,
                    exit_status=status, output=output))
                return self._stuck()
        answer = st.answer
        if answer is None:
            if not st.asked:  # the condition's @path mentions give the judge those files as they are now
                attached = await attach(st.condition, self.agent)
                self._record(UserMessage(agent=EVALUATOR, text=evidence(
                    st.condition, n, st.check, 0 if st.check else None, st.check_output, last_text, ws.text),
                    attachments=attached or UNSET))
            judged = await self._evaluator().run()
            if judged.exit_reason not in ("finished", "max_turns"):
                return Outcome(judged.exit_reason, message=f"the goal's evaluator could not answer: {judged.message}")
            answer = judged.result
        self.agent.faults.crash_at("goal_verdict")
        v = parse_verdict(answer)
        self._record(GoalChecked(goal_id=st.goal_id, n=n, by="evaluator", verdict=v.verdict, reason=v.reason,
                                 blocker=v.blocker, diff_hash=ws.digest, instruct=v.verdict == "not_met", summary=v.summary))
        if v.verdict == "met":
            return self._end("met", "finished", v.reason, v.summary)
        if v.verdict == "impossible":
            return self._end("impossible", "goal_unmet", v.reason, v.summary)
        return self._stuck()

    def _stuck(self) -> Outcome | None:
        """Pause the goal when it is stuck (``None`` when it is not)."""
        st = self.state
        if st.same_blocker >= BLOCKER_REPEATS:
            what = (f"the check `{st.check}` failed the same way" if st.last_blocker.startswith("check ")
                    else f"the evaluator named the same blocker ({st.last_blocker})")
            why = f"stuck: {what} {st.same_blocker} judgments in a row"
        elif st.stuck_turns and st.same_diff >= st.stuck_turns:
            why = f"stuck: no change to the workspace in {st.same_diff} judgments in a row"
        else:
            return None
        summary = self._summary(why)
        self._update("paused", "stuck", why, summary)
        return Outcome("goal_unmet", result=summary,
                       message=f"goal {st.goal_id} paused, {why}; /goal resume goes on (a message alone leaves it paused)")

    def _end(self, status: str, exit_reason: str, why: str, summary: str = "") -> Outcome:
        summary = summary or self._summary(why)
        self._update(status, "check" if status == "met" else "goal", why, summary)
        message = "" if status == "met" else f"goal {self.state.goal_id} {status}: {why}"
        return Outcome(exit_reason, result=summary, message=message)

    def _update(self, status: str, by: str, reason: str, summary: str = "") -> None:
        self._record(GoalUpdated(goal_id=self.state.goal_id, status=status, by=by, reason=reason, **({"summary": summary} if summary else {})))

    def _summary(self, why: str) -> str:
        """What the person is told when a goal stops without a verdict of the evaluator."""
        st = self.state
        lines = [f"Goal {st.goal_id} stopped: {why}.", f"Condition: {st.condition}",
                 f"Judged {counted(st.checks, 'time')}; spent {st.spent()}."]
        reason = [ln for ln in st.last_reason.strip().splitlines() if ln.strip() and not ln.startswith("exit status:")]
        if reason:  # its first line and, for a check's output, its last (pytest's tally)
            lines.append(f"Last judgment: {reason[0]}" + (f" … {reason[-1].strip()}" if len(reason) > 1 else ""))
        if st.last_text:
            lines.append(f"The agent's last message: {st.last_text[:2000]}")
        return "\n".join(lines)

