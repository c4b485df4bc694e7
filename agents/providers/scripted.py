"""The scripted model (``scripted:PATH``): canned answers for tests and demos (DESIGN §8).

Script format (JSON)::

    {"turns": [TURN, ...],
     "agents": {"AGENT_ID": {"turns": [TURN, ...]}, ...}}

Each TURN is a list of blocks, answered as one model call:

* ``{"text": "..."}``: text from the model (also streamed through ``on_delta``);
* ``{"tool": NAME, "input": {...}}``: a tool call (``input`` defaults to ``{}``);
* ``{"expect_result": "TEXT"}``: asserts that the latest tool result in the request
  contains TEXT; otherwise the call raises ``ScriptError`` showing expected and actual.

The model is stateless with respect to the request, so replay and resume work: the turn
answered is the number of assistant messages already in ``request.messages``. Past the
last turn it answers ``(script finished)`` with no tool call, which ends the loop.

Agent ids are ``main``, ``worker:NAME`` and the background roles' names. ``main`` uses
``agents.main`` if present, else the top-level ``turns``; any other agent uses its
``agents`` entry, and an agent the script does not name finishes at once.
Tool call ids are deterministic: ``toolu_scripted_<turn>_<i>`` for ``main`` and
``toolu_scripted_<agent>_<turn>_<i>`` otherwise (``:`` in the agent id becomes ``-``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
from musec.agents.core.conversation import (
    Block,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from musec.agents.core.errors import ScriptError

from .base import OnDelta, TextDelta

__all__ = ["FINISHED_TEXT", "ScriptedProvider", "load_script"]

FINISHED_TEXT = "(script finished)"
_SHOW_CHARS = 300

Turn = list[dict[str, Any]]


def _where(path: Path, detail: str) -> ScriptError:
    return ScriptError(f"scripted model {path}: {detail}")


def _check_turns(path: Path, turns: Any, where: str) -> list[Turn]:
    if not isinstance(turns, list):
        raise _where(path, f"{where} must be a list of turns")
    for t, turn in enumerate(turns):
        if not isinstance(turn, list):
            raise _where(path, f"{where}[{t}] must be a list of blocks")
        for b, block in enumerate(turn):
            at = f"{where}[{t}][{b}]"
            if not isinstance(block, dict):
                raise _where(path, f"{at} must be an object")
            if isinstance(block.get("text"), str):
                continue
            if isinstance(block.get("tool"), str):
                if not isinstance(block.get("input", {}), dict):
                    raise _where(path, f"{at}: 'input' must be an object")
                continue
            if isinstance(block.get("expect_result"), str):
                continue
            raise _where(path, f"{at} must have a string 'text', 'tool' or 'expect_result'")
    return turns


def load_script(path: Path, agent_id: str = "main") -> list[Turn]:
    """Read and validate a script; return the turns of ``agent_id``.

    Raises:
        ScriptError: the file is missing, unreadable, not JSON, or not a valid script.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _where(path, f"cannot read the script: {exc.strerror or exc}") from exc
    try:
        script = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise _where(path, f"not valid JSON: {exc}") from exc
    if not isinstance(script, dict):
        raise _where(path, 'must be a JSON object {"turns": [...]}')
    agents = script.get("agents", {})
    if not isinstance(agents, dict):
        raise _where(path, "'agents' must be an object mapping agent ids to {\"turns\": [...]}")
    for name, entry in agents.items():
        if not isinstance(entry, dict) or "turns" not in entry:
            raise _where(path, f'agents[{name!r}] must be {{"turns": [...]}}')
        _check_turns(path, entry["turns"], f"agents[{name!r}].turns")
    top = _check_turns(path, script.get("turns", []), "turns")
    if agent_id in agents:
        return agents[agent_id]["turns"]
    return top if agent_id == "main" else []


def _shorten(text: str) -> str:
    return text if len(text) <= _SHOW_CHARS else text[:_SHOW_CHARS] + f"… ({len(text)} chars)"


def _latest_tool_result(request: ModelRequest) -> ToolResultBlock | None:
    for message in reversed(request.messages):
        for block in reversed(message.content):
            if isinstance(block, ToolResultBlock):
                return block
    return None


class ScriptedProvider:
    """A ``Provider`` answering from a script file; see the module docstring.

    Args:
        path: the script file (read once, here).
        agent_id: whose turns to answer.

    Raises:
        ScriptError: the script is missing or invalid.
    """

    name = "scripted"

    def __init__(self, path: Path, agent_id: str = "main"):
        self.path = path
        self.agent_id = agent_id
        self.model = str(path)
        self.turns = load_script(path, agent_id)
        self._id_prefix = (
            "toolu_scripted_"
            if agent_id == "main"
            else "toolu_scripted_" + re.sub(r"[^A-Za-z0-9_-]", "-", agent_id) + "_"
        )

    def __repr__(self) -> str:
        return f"ScriptedProvider(path={str(self.path)!r}, agent_id={self.agent_id!r})"

    async def complete(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        """Answer turn N, N being the number of assistant messages in the request.

        Raises:
            ScriptError: an ``expect_result`` block does not match the latest tool result.
        """
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn >= len(self.turns):
            await on_delta(TextDelta(FINISHED_TEXT))
            return ModelResponse(
                content=[TextBlock(FINISHED_TEXT)], stop_reason="end_turn", model="scripted"
            )
        content: list[Block] = []
        for block in self.turns[turn]:
            if "expect_result" in block:
                self._check_expectation(request, turn, block["expect_result"])
            elif "tool" in block:
                calls = sum(1 for b in content if isinstance(b, ToolCallBlock))
                call_id = f"{self._id_prefix}{turn}_{calls}"
                content.append(ToolCallBlock(call_id, block["tool"], dict(block.get("input", {}))))
            else:
                await on_delta(TextDelta(block["text"]))
                content.append(TextBlock(block["text"]))
        stop = "tool_use" if any(isinstance(b, ToolCallBlock) for b in content) else "end_turn"
        return ModelResponse(content=content, stop_reason=stop, model="scripted")

    def _check_expectation(self, request: ModelRequest, turn: int, expected: str) -> None:
        latest = _latest_tool_result(request)
        where = f"scripted model {self.path}, agent {self.agent_id}, turn {turn}"
        if latest is None:
            raise ScriptError(
                f"{where}: expected a tool result containing {expected!r}, but there is none"
            )
        if expected not in latest.content:
            raise ScriptError(
                f"{where}: expected the latest tool result ({latest.call_id}) to contain "
                f"{_shorten(expected)!r}; actual: {_shorten(latest.content)!r}"
            )

    async def aclose(self) -> None:
        """Nothing to release."""
