"""Fan-out end to end: workers in worktrees, integration tests on the merged tree, apply."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Musec

CALC = "def add(a, b):\n    return a + b\n"
TEST_CALC = "import unittest\n\nfrom calc import add\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
DOUBLE = "from calc import add\n\n\ndef double(x):\n    return add(x, x)\n"
TEST_DOUBLE = "import unittest\n\nfrom double import double\n\n\nclass DoubleTest(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(double(4), 8)\n"
RUN = {"tool": "bash", "input": {"command": "python3 -m unittest -q 2>&1"}}

WORKERS = {
    "rename": [
        [{"tool": "edit_file", "input": {"path": "calc.py", "old_string": "def add(", "new_string": "def plus("}}],
        [{"tool": "edit_file", "input": {"path": "test_calc.py", "old_string": "add", "new_string": "plus", "replace_all": True}}],
        [RUN], [{"expect_result": "OK"}, {"text": "Renamed add to plus."}],
    ],
    "feature": [
        [{"tool": "write_file", "input": {"path": "double.py", "content": DOUBLE}}],
        [{"tool": "write_file", "input": {"path": "test_double.py", "content": TEST_DOUBLE}}],
        [RUN], [{"expect_result": "OK"}, {"text": "Added double()."}],
    ],
    "docs": [
        [{"tool": "write_file", "input": {"path": "NOTES.md", "content": "calc: small arithmetic helpers\n"}}],
        [{"text": "Wrote notes."}],
    ],
}


def _repo(tmp_path: Path) -> Path:
    import pygit2

    repo_dir = tmp_path / "calc"
    repo_dir.mkdir()
    (repo_dir / "calc.py").write_text(CALC)
    (repo_dir / "test_calc.py").write_text(TEST_CALC)
    (repo_dir / ".gitignore").write_text("__pycache__/\n")
    repo = pygit2.init_repository(str(repo_dir), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("test", "test@example.invalid")
    repo.create_commit("HEAD", sig, sig, "calc", repo.index.write_tree(), [])
    return repo_dir


def _fingerprint(repo: Path) -> dict[str, str]:
    """Every file of the working copy, plus the index, HEAD and the branch ref."""
    out = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if path.is_file() and (rel.parts[0] != ".git" or str(rel) in (".git/index", ".git/HEAD", ".git/refs/heads/main")):
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _script(tmp_path: Path, names: list[str], expect: str) -> Path:
    tasks = [{"name": n, "instruction": f"do the {n} part"} for n in names]
    script = {
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}],
                  [{"expect_result": expect}, {"text": "Fan-out done."}]],
        "agents": {f"worker:{n}": {"turns": WORKERS[n]} for n in names},
    }
    path = tmp_path / "fanout.json"
    path.write_text(json.dumps(script))
    return path


def test_green_branches_that_break_together_are_caught(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = _fingerprint(repo)
    script = _script(tmp_path, ["rename", "feature", "docs"], "tests FAILED")
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "split it", cwd=repo)
    sid = json.loads(proc.stdout)["session_id"]
    if proc.returncode != 0:
        print(musec("log", sid, "--json").stdout[-6000:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _fingerprint(repo) == before  # the person's working copy is byte-identical

    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    integration = next(e for e in events if e["type"] == "integration")
    assert integration["tests_passed"] is False and not integration["ok"]
    assert any("test_double" in t for t in integration["failing_tests"])
    assert sorted(e["worker"] for e in events if e["type"] == "worker_finished") == ["docs", "feature", "rename"]
    assert all(e["exit_reason"] == "finished" for e in events if e["type"] == "worker_finished")
    assert musec("log", "verify", sid).returncode == 0
    replay = musec.json("replay", sid, "--json")
    assert replay["ok"] and replay["model_requests"] == 2 + 4 + 4 + 2  # main and each worker, re-derived

    workers = musec.json("workers", sid, "--json")
    assert {w["name"]: w["commits"] for w in workers["workers"]} == {"rename": 1, "feature": 1, "docs": 1}
    assert "FAILED" in workers["integration"]
    refused = musec("apply", sid)
    assert refused.returncode == 1 and "did not pass" in refused.stderr  # a failed check, not a usage error


def test_clean_integration_is_applied_through_git(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = _script(tmp_path, ["feature", "docs"], "tests passed")
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "split it", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    assert not (repo / "double.py").exists()

    applied = musec("apply", sid)
    assert applied.returncode == 0, applied.stderr
    assert "main:" in applied.stdout
    assert (repo / "double.py").read_text() == DOUBLE and (repo / "NOTES.md").exists()
    assert (repo / "double.py").stat().st_mode & 0o777 == 0o644  # the daemon's private umask does not leak
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, env=musec.env)
    assert status.stdout == ""
    # the ended session's worktrees and branches went with the apply (their commits are on main)
    trees = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True, env=musec.env)
    branches = subprocess.run(["git", "branch", "--list", "musec/*"], cwd=repo, capture_output=True, text=True, env=musec.env)
    assert len(trees.stdout.splitlines()) == 1 and branches.stdout == "", trees.stdout + branches.stdout
    assert not (musec.home / "state" / "worktrees" / sid).exists()
    again = musec("apply", sid)
    assert again.returncode == 0 and "already on your branch; nothing to apply" in again.stdout  # idempotent
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True,
                          env=musec.env).stdout == ""
    # The session had ended; its log still says that the person's branch changed.
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert events[-1]["type"] == "integration_applied" and events[-1]["branch"] == "main"
    assert musec("log", "verify", sid).returncode == 0
    assert next(s for s in musec.json("sessions", "--all", "--json") if s["id"] == sid)["status"] == "applied"


@pytest.mark.parametrize("tasks", [[], [{"name": "a b", "instruction": "x"}], [{"name": "integration", "instruction": "x"}]])
def test_bad_spawn_input_is_answered_not_run(musec: Musec, tmp_path: Path, tasks: list) -> None:
    repo = _repo(tmp_path)
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}],
                                            [{"expect_result": "spawn_workers:"}, {"text": "ok"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_gc_removes_worktrees_but_never_uncommitted_work(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = _script(tmp_path, ["feature", "docs"], "tests passed")
    first = json.loads(musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                             "one", cwd=repo).stdout)["session_id"]
    second = json.loads(musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                              "two", cwd=repo).stdout)["session_id"]
    trees = musec.home / "state" / "worktrees"
    (trees / second / "docs" / "scratch.txt").write_text("work in progress\n")
    # neither was applied: without --discard-unapplied their workers' commits are kept (s8 J9)
    dry = musec("gc", "--older-than", "0s", "--dry-run")
    assert dry.returncode == 0 and f"kept {first}: kept worktree of docs: its branch musec/{first}/docs holds 1 commit" in dry.stdout
    dry = musec("gc", "--older-than", "0s", "--dry-run", "--discard-unapplied")  # says what would go, with sizes
    assert dry.returncode == 0 and f"kept {second}: kept worktree of docs" in dry.stdout
    line = next(x for x in dry.stdout.splitlines() if first in x)
    assert int(line.split()[-2]) > 1000 and line.endswith("bytes")
    assert (trees / first).exists()
    done = musec("gc", "--older-than", "0s", "--discard-unapplied")
    assert done.returncode == 0 and first in done.stdout
    assert f"kept {second}: kept worktree of docs" in done.stdout
    # how to rescue it: the folder and the branch
    assert str(trees / second / "docs") in done.stdout and f"musec/{second}/docs" in done.stdout
    assert not (trees / first).exists() and (trees / second / "docs" / "scratch.txt").exists()
    branches = subprocess.run(["git", "branch", "--list", "musec/*"], cwd=repo, capture_output=True, text=True, env=musec.env)
    assert first not in branches.stdout and f"musec/{second}/integration" in branches.stdout
    # the kept session is whole (issue 13, case 12): its integration can still be applied
    assert (trees / second / "integration").is_dir()
    assert "integration at" in musec("workers", second).stdout
    applied = musec("apply", second)
    assert applied.returncode == 0, applied.stderr
    assert (repo / "double.py").read_text() == DOUBLE


def test_a_worker_name_is_not_reused_in_a_session(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    tasks = [{"name": "docs", "instruction": "do the docs part"}]
    script = tmp_path / "twice.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}],
                  [{"tool": "spawn_workers", "input": {"tasks": tasks}}],
                  [{"expect_result": "worker name docs was used earlier"}, {"text": "ok"}]],
        "agents": {"worker:docs": {"turns": WORKERS["docs"]}},
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verifier_writes_no_bytecode_into_the_workspace(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".gitignore").unlink()
    script = tmp_path / "quiet.json"
    script.write_text(json.dumps({"turns": [[{"text": "nothing to do"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "verifier", "go", cwd=repo,
                 env={"PYTHONDONTWRITEBYTECODE": ""})
    assert proc.returncode == 0, proc.stderr
    assert not (repo / "__pycache__").exists()


def test_a_crash_mid_fan_out_strands_no_work(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    tasks = [{"name": "fast", "instruction": "write a file"}, {"name": "slow", "instruction": "take long"}]
    script = tmp_path / "crash.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}], [{"text": "done"}]],
        "agents": {"worker:fast": {"turns": [[{"tool": "write_file", "input": {"path": "fast.txt", "content": "fast\n"}}],
                                             [{"text": "wrote it"}]]},
                   "worker:slow": {"turns": [[{"tool": "bash", "input": {"command": "echo started; sleep 5"}}], [{"text": "slept"}]]}},
    }))
    crashed = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=repo,
                    env={"MUSEC_CRASH_AT": "during_tool"})  # when slow prints "started"
    assert crashed.returncode == 5, crashed.stdout + crashed.stderr
    sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]
    resumed = musec("run", "--resume", sid, cwd=repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    workers = {w["name"]: w for w in musec.json("workers", sid, "--json")["workers"]}
    # The workers went on from their logs: each finished its script and committed its work.
    assert workers["fast"]["state"] == "finished" and workers["fast"]["commits"] == 1
    assert workers["slow"]["state"] == "finished"
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert any(e["type"] == "integration" for e in events)
    told = [e for e in events if e["type"] == "agent_message" and e["from"] == "fanout"]
    assert len(told) == 1 and "tests passed" in told[0]["body"]
    assert musec("log", "verify", sid).returncode == 0
    assert musec.json("replay", sid, "--json")["ok"]
