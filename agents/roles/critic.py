"""``critic``: drives ``/grill`` (issue 14): questions a plan's decisions, one at a time.

The critic is a model-driven background agent with read-only tools and one more,
``grill_question``: each call is one round, a decision of the plan put as a question with
the critic's recommended answer, and ``kind`` ``fact`` (the repository can answer it: the
scout does) or ``decision`` (the person's call; headless, the recommended answer is taken
and listed as an assumption). Where a question goes is the daemon's business
(``daemon/grill.py``): the tool only hands it to the ``route`` it was given. The critic
ends the grill by answering without a tool call: no new objection.

``amend_plan`` writes the settled rounds into the plan (``## Decisions settled by /grill``
and ``## Assumptions``), which is then proposed again and needs approval again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from ..core.conversation import ToolSpec
from ..core.events import AgentSpawned, GrillRound, UserMessage
from ..recorder import Recorder
from ..tools.base import ToolContext, ToolOutput
from .base import BackgroundAgent

GRILL_TOOL = "grill_question"
KINDS = ("fact", "decision")

CRITIC_PROMPT = """

You are the critic, a background agent of this session. You stress-test the plan the person
gives you before anything is carried out. Walk its decisions one at a time: for each, call
grill_question once with `decision` (a short name), `question` (what must be settled, and why
it matters), `recommended` (the answer you recommend) and `kind`: `fact` when the repository
can answer it (the scout looks it up), else `decision` (the person decides). Use what earlier
answers settled; never ask the same thing twice. You may read the repository first. When every
decision is settled and you have no new objection, answer in one sentence without a tool call."""

# route(question) -> (answer, answered_by): see daemon/grill.py.
Route = Callable[[Mapping[str, str]], Awaitable[tuple[str, str]]]


class GrillQuestionTool:
    """``grill_question {decision, question, recommended, kind}``: one round of a grill.

    Args:
        route: where the question goes; returns the answer and who gave it (``scout``,
            ``person``, ``recommended``).
    """

    name = GRILL_TOOL
    access = "read"

    def __init__(self, route: Route) -> None:
        self.route = route
        self.spec = ToolSpec(
            name=self.name,
            description=("Put one decision of the plan as a question with your recommended answer. kind is "
                         "'fact' when the repository can answer it (the scout looks it up), else 'decision' "
                         "(the person decides). Returns the answer."),
            input_schema={
                "type": "object",
                "properties": {
                    "decision": {"type": "string", "description": "A short name for the decision."},
                    "question": {"type": "string", "description": "The question, and why it matters."},
                    "recommended": {"type": "string", "description": "The answer you recommend."},
                    "kind": {"type": "string", "enum": list(KINDS), "description": "fact or decision."},
                },
                "required": ["decision", "question", "recommended", "kind"],
            },
        )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        fields = {k: input.get(k) for k in ("decision", "question", "recommended", "kind")}
        missing = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
        if missing:
            return ToolOutput(f"grill_question needs {', '.join(missing)} (each a non-empty string; kind is "
                              f"{' or '.join(KINDS)})", is_error=True)
        if fields["kind"] not in KINDS:
            return ToolOutput(f"kind must be fact or decision, not {fields['kind']!r}", is_error=True)
        answer, by = await self.route({k: str(v).strip() for k, v in fields.items()})
        return ToolOutput(f"answer ({by}): {answer}")


class Critic(BackgroundAgent):
    """The critic of a session, made when the person first grills a plan.

    Args:
        recorder, blackboard, workspace: see ``BackgroundAgent``.
        agent: its ``agents.loop.Agent`` (read-only tools plus ``grill_question``).
    """

    role = "critic"

    def __init__(self, recorder: Recorder, blackboard: Any, workspace: Path, agent: Any) -> None:
        super().__init__(recorder, blackboard, workspace)
        self.agent = agent
        self._spawned = False

    def on_own_spawn(self, event: AgentSpawned, *, live: bool) -> None:
        """Its prompt and tools are logged once per session."""
        self._spawned = True

    async def run(self) -> None:
        """Nothing between grills: the session calls ``grill``."""
        self.state = "idle"
        self.ready.set()
        await anyio.sleep_forever()

    async def grill(self, plan: str) -> Any:
        """Question ``plan`` until the critic has no new objection; return the loop's
        ``Outcome`` (the rounds were routed and logged as they happened)."""
        self.state = "grilling"
        if not self._spawned:  # its prompt and tools, for replay
            self.record(AgentSpawned(role="critic", model=self.agent.provider.model,
                                     system_prompt=self.agent.system_prompt, tools=list(self.agent.tools)))
        self.record(UserMessage(text=f"Grill this plan, one decision at a time (grill_question), until nothing is "
                                     f"left open:\n\n{plan}"))
        try:
            return await self.agent.run()
        finally:
            self.state = "idle"


def amend_plan(plan: str, rounds: Sequence[GrillRound]) -> str:
    """``plan`` with what a grill settled appended (earlier such sections replaced).

    Args:
        plan: the plan document.
        rounds: ``grill_round`` events (``decision``, ``answer``, ``answered_by``,
            ``assumption``); rounds that settled nothing (``answered_by`` ``none``) are left out.

    Returns:
        The plan with ``## Decisions settled by /grill`` (answers of the scout and the
        person) and ``## Assumptions`` (recommended answers nobody was asked about).
    """
    kept = plan.split("\n## Decisions settled by /grill\n", 1)[0].split("\n## Assumptions\n", 1)[0].rstrip("\n")
    settled = [r for r in rounds if r.answered_by != "none" and not r.assumption]
    assumed = [r for r in rounds if r.assumption]
    out = [kept, ""]
    if settled:
        out += ["## Decisions settled by /grill", ""]
        out += [f"- {r.decision}: {_one_line(r.answer)} ({r.answered_by})" for r in settled]
        out.append("")
    if assumed:
        out += ["## Assumptions", ""]
        out += [f"- {r.decision}: {_one_line(r.answer)} (the critic's recommendation; nobody was asked)" for r in assumed]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())
