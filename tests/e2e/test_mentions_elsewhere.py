"""``@path`` mentions outside a person's message (issue 18): in a goal's condition the judge
gets the file as it is at each judgment (it has no tools to read it); in a fan-out
worker's task the worker gets the file from its own worktree, under its own read rules.
Both are read once and recorded in the ``user_message`` they belong to, so a replay
rebuilds the same requests without reading the files again."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import LIBRARY, Musec
from tests.e2e.test_fanout import CALC, _repo
from tests.e2e.test_goal import FIX, MET, _events, _replays


def test_a_goal_conditions_mention_gives_the_judge_the_file(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "goal.json"
    script.write_text(json.dumps({"turns": [[FIX], [{"text": "Fixed."}]],
                                  "agents": {"evaluator": {"turns": [[{"text": json.dumps(MET)}]]}}}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                 "--goal", "the tests in @test_pager.py pass", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    asked = [e for e in _events(musec, sid) if e["type"] == "user_message" and e["agent"] == "evaluator"]
    assert len(asked) == 1
    assert asked[0]["attachments"] == [{"path": "test_pager.py", "size_bytes": len(LIBRARY["test_pager.py"].encode()),
                                        "content": LIBRARY["test_pager.py"]}]
    (buggy_repo / "test_pager.py").write_text("changed after the run\n")
    _replays(musec, sid)  # the judge's request is rebuilt from the log, not from the file as it is now


def test_a_workers_task_mention_attaches_the_file_of_its_own_worktree(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    outside = repo / "calc.py"  # the person's copy: a worker reads its own worktree's, never this one
    tasks = [{"name": "docs", "instruction": f"describe @calc.py (not @{outside})"}]
    script = tmp_path / "fanout.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}], [{"text": "Fan-out done."}]],
        "agents": {"worker:docs": {"turns": [[{"text": "It adds."}]]}},
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "split it",
                 cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = _events(musec, sid)
    task = next(e for e in events if e["type"] == "user_message" and e["agent"] == "worker:docs")
    attached, refused = task["attachments"]
    assert attached == {"path": "calc.py", "size_bytes": len(CALC), "content": CALC}
    assert refused["kind"] == "refused" and "outside" in refused["refused"], refused
    spawned = next(e for e in events if e["type"] == "worker_spawned")
    assert spawned["path"] != str(repo)
    _replays(musec, sid)
