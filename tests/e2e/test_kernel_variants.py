"""Issue 16 part 6: a campaign fans variant ideas out to workers in worktrees. Each worker
evaluates its own candidate with the campaign's tools; every evaluation lands on the one
leaderboard, and the best from any worker is committed on the one campaign branch while
the person's branch stays where it was. Real CLI, daemon, git worktrees, scripted model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.agents.kernel_opt.candidates import FASTER, WRONG, git, one_commit_repo
from tests.conftest import Musec

pytest.importorskip("torch")


def _worker(source: str, idea: str) -> dict:
    return {"turns": [
        [{"tool": "write_file", "input": {"path": "candidate.py", "content": source}}],
        [{"tool": "evaluate_kernel", "input": {}}],
        [{"text": idea}],
    ]}


def test_workers_evaluate_variants_onto_one_board_and_branch(musec: Musec, tmp_path: Path) -> None:
    repo = one_commit_repo(tmp_path / "proj")
    head = git(repo, "rev-parse", "HEAD").strip()
    tasks = [{"name": "axis", "instruction": "try softmax over dim 0"},
             {"name": "fused", "instruction": "try torch.softmax over the last dim"}]
    script = tmp_path / "variants.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}],
                  [{"tool": "kernel_leaderboard", "input": {}}],
                  [{"text": "fused wins"}]],
        "agents": {"worker:axis": _worker(WRONG, "dim 0 is wrong"),
                   "worker:fused": _worker(FASTER, "the library softmax is faster")},
    }))
    proc = musec("optimize", "cpu-example", "--model", f"scripted:{script}", "--approval", "auto",
                 "--output-format", "json", "--max-wall", "1h", cwd=repo, timeout=300)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout.splitlines()[-1])["session_id"]
    events = [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]
    evaluated = [e for e in events if e["type"] == "kernel_evaluated"]
    assert sorted(e["status"] for e in evaluated) == ["correct", "incorrect"]
    assert sorted(e["n"] for e in evaluated) == [1, 2]  # one board: numbered across the workers
    best = next(e for e in evaluated if e["status"] == "correct")
    assert best["commit"] and best["speedup"] > 1
    assert git(repo, "show", f"{best['branch']}:candidate.py") == FASTER
    assert git(repo, "rev-parse", "main").strip() == head  # the person's branch did not move
    assert os.path.exists(best["csv_path"])
    board = musec.json("kernels", sid, "--json")
    assert [e["status"] for e in board] == ["correct", "incorrect"]
    assert musec.json("replay", sid, "--json")["ok"]
