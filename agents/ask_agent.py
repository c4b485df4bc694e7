"""``ask_agent``: the main agent asks one of the session's background agents (DESIGN §7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .core.conversation import ToolSpec
from .tools.base import ToolContext, ToolOutput

# ``answer(agent, question) -> text``, or raises LookupError naming the agents there are.
Answerer = Callable[[str, str], Awaitable[str]]


class AskAgentTool:
    """Ask a background agent (``scout``: the repository map; ``verifier``: test status)."""

    name = "ask_agent"
    access = "read"
    spec = ToolSpec(
        name="ask_agent",
        description=(
            "Ask one of this session's background agents. `scout` knows the repository (files, Python "
            "symbols, where the tests are) and answers from its map without re-reading files; `verifier` "
            "knows the latest test run. Background agents also message you on their own when something "
            "needs your attention (for example new test failures after your edits)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "the background agent: scout or verifier"},
                "question": {"type": "string"},
            },
            "required": ["agent", "question"],
        },
    )

    def __init__(self, answer: Answerer) -> None:
        self._answer = answer

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        agent, question = input.get("agent"), input.get("question")
        if not isinstance(agent, str) or not isinstance(question, str) or not question.strip():
            return ToolOutput(content="ask_agent: give `agent` (scout or verifier) and a non-empty `question`", is_error=True)
        try:
            return ToolOutput(content=await self._answer(agent, question))
        except LookupError as exc:
            return ToolOutput(content=f"ask_agent: {exc}", is_error=True)
