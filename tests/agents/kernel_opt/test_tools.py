"""The campaign's tools, called the way the agent loop calls them (real evaluation process)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from musec.agents.kernel_opt.campaign import Campaign
from musec.agents.kernel_opt.spec import load_spec
from musec.agents.kernel_opt.tools import campaign_prompt, campaign_tools
from musec.agents.tools.base import ToolContext

from tests.agents.kernel_opt.candidates import FASTER, git

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # each evaluation is a process that imports torch (seconds)


def test_evaluate_profile_and_leaderboard_tools(repo, tmp_path):
    spec = load_spec("cpu-example")
    camp = Campaign(spec, repo, tmp_path / "out")
    camp.prepare()
    evaluate, profile, board = campaign_tools(camp, tool_calls=lambda: 12)
    assert [t.name for t in (evaluate, profile, board)] == ["evaluate_kernel", "profile_kernel", "kernel_leaderboard"]
    assert evaluate.access == "execute" and board.access == "read"
    ctx = ToolContext(workspace=repo, env={})

    async def main():
        refused = await evaluate.run({"path": "../x.py"}, ctx)
        missing = await evaluate.run({"path": "nope.py"}, ctx)
        (repo / spec.candidate).write_text(FASTER)
        done = await evaluate.run({}, ctx)
        prof = await profile.run({"shape": "first"}, ctx)
        shown = await board.run({}, ctx)
        return refused, missing, done, prof, shown

    refused, missing, done, prof, shown = anyio.run(main)
    assert refused.is_error and "inside the workspace" in refused.content
    assert missing.is_error and "no file nope.py" in missing.content
    assert not done.is_error and "evaluation #1 of candidate.py" in done.content and "new best: kept as commit" in done.content
    assert camp.board.entries[0].evaluation.tool_calls == 12
    assert git(repo, "show", "--format=%s", "-s", camp.branch).startswith("cpu-example: ")
    assert prof.is_error and "shape must be an integer" in prof.content
    assert shown.content.splitlines()[1].split()[:3] == ["1", "12", "correct"]
    assert str(Path(tmp_path / "out" / "speedup.png")) in shown.content
    assert "candidate.py" in campaign_prompt(camp) and "fla" in campaign_prompt(camp)
