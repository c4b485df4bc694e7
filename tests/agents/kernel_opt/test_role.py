"""The role's contract with the daemon: events in, the same board out after a resume; budgets."""

from __future__ import annotations

import anyio
import msgspec
import pytest
from musec.agents.core.events import KernelEvaluated, decode_event, line_fields
from musec.agents.kernel_opt.role import entry_of, evaluated_event, start_campaign
from musec.agents.tools.base import ToolContext

from tests.agents.kernel_opt.candidates import FASTER, WRONG

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # real evaluation processes


def test_events_rebuild_the_board_and_budgets_stop_the_campaign(repo, tmp_path):
    events: list[KernelEvaluated] = []
    calls = {"n": 0}
    camp, tools, prompt = start_campaign("cpu-example", repo, tmp_path / "out", events.append, lambda: calls["n"])
    assert (repo / "candidate.py").is_file() and "cpu-example" in prompt
    evaluate = tools[0]
    ctx = ToolContext(workspace=repo, env={})
    for n, source in enumerate((WRONG, FASTER)):
        (repo / "candidate.py").write_text(source)
        calls["n"] = 5 * (n + 1)
        anyio.run(evaluate.run, {}, ctx)
    wire = [msgspec.json.decode(msgspec.json.encode(line_fields(e))) for e in events]  # as the log holds them
    read_back = [decode_event(msgspec.json.encode(w)) for w in wire]
    assert [e["status"] for e in wire] == ["incorrect", "correct"] and [e["tool_calls"] for e in wire] == [5, 10]
    assert wire[0]["speedup"] is None and wire[1]["speedup"] > 1 and wire[1]["commit"]
    assert entry_of(read_back[1]) == camp.board.entries[1]
    # Resume: a new role from the recorded events has the same board and goes on numbering.
    again, _, _ = start_campaign("cpu-example", repo, tmp_path / "out", events.append, lambda: 11, past=read_back)
    assert again.board.render() == camp.board.render() and again.board.best.n == 2
    assert evaluated_event(again.board.entries[1], again).evaluation == wire[1]["evaluation"]
    # Budgets: the spec allows 200 tool calls; a wall budget of 0 s is spent at once.
    spent, tools3, _ = start_campaign("cpu-example", repo, tmp_path / "out", events.append, lambda: 200, past=read_back)
    out = anyio.run(tools3[0].run, {}, ctx)
    assert out.is_error and "budget of 200 tool calls is spent" in out.content
    late, tools4, _ = start_campaign("cpu-example", repo, tmp_path / "out", events.append, lambda: 1, past=read_back,
                                     started_at=0.0, max_wall_s=60)
    out = anyio.run(tools4[0].run, {}, ctx)
    assert out.is_error and "wall-time budget of 60 s is spent" in out.content
    assert len(events) == 2  # refused calls record nothing
