"""Fan-out results brought home in the cases a new user met (fresh-user s5 F1, F4, F5, F8),
end to end with the scripted model: a worker edit to a file the person had uncommitted
changes in, a file name that is not UTF-8, two fan-outs from one base, and ``musec gc``
after the repository was deleted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import Musec
from tests.e2e.test_fanout import DOUBLE, TEST_CALC, WORKERS, _repo


def _one_worker(tmp_path: Path, file: str, turns: list) -> Path:
    """A script: the main agent spawns worker ``w`` running ``turns``, then ends."""
    script = {
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": [{"name": "w", "instruction": "do it"}]}}],
                  [{"expect_result": "tests passed"}, {"text": "Fan-out done."}]],
        "agents": {"worker:w": {"turns": turns}},
    }
    path = tmp_path / file
    path.write_text(json.dumps(script))
    return path


def _run(musec: Musec, script: Path, repo: Path) -> str:
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["session_id"]


def _git(repo: Path, musec: Musec, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=musec.env, check=True).stdout


EDIT_DIRTY_LINE = [[{"tool": "edit_file", "input": {"path": "test_calc.py", "old_string": "# dirty",
                                                    "new_string": "# dirty, edited by worker"}}],
                   [{"text": "edited"}]]


def test_a_worker_edit_to_a_file_with_uncommitted_changes_is_applied_uncommitted(musec: Musec,
                                                                                  tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with (repo / "test_calc.py").open("a") as f:
        f.write("# dirty\n")
    head = _git(repo, musec, "rev-parse", "HEAD")
    sid = _run(musec, _one_worker(tmp_path, "dirty.json", EDIT_DIRTY_LINE), repo)

    applied = musec("apply", sid)

    assert applied.returncode == 0, applied.stderr
    assert "uncommitted" in applied.stdout and "test_calc.py" in applied.stdout
    assert (repo / "test_calc.py").read_text() == TEST_CALC + "# dirty, edited by worker\n"
    assert _git(repo, musec, "rev-parse", "HEAD") == head  # nothing of the person's was committed
    assert _git(repo, musec, "status", "--porcelain") == " M test_calc.py\n"
    again = musec("apply", sid)
    assert again.returncode == 0 and "nothing to apply" in again.stdout, again.stdout + again.stderr
    assert f"musec/{sid}/integration" in again.stdout  # kept: the workers' changes apart from the person's
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert events[-1]["type"] == "integration_applied" and events[-1]["how"] == "uncommitted"


def test_apply_refused_because_the_tree_changed_exits_1_and_says_what_to_do(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with (repo / "test_calc.py").open("a") as f:
        f.write("# dirty\n")
    sid = _run(musec, _one_worker(tmp_path, "dirty.json", EDIT_DIRTY_LINE), repo)
    with (repo / "test_calc.py").open("a") as f:
        f.write("# more since\n")

    refused = musec("apply", sid)

    assert refused.returncode == 1, (refused.stdout, refused.stderr)  # README: a failed check, not a usage error
    assert "changed since musec snapshotted" in refused.stderr and "| git apply -3" in refused.stderr
    assert f"musec/{sid}/integration" in refused.stderr
    assert (repo / "test_calc.py").read_text() == TEST_CALC + "# dirty\n# more since\n"


def test_an_untracked_name_that_is_not_utf8_is_snapshotted_and_applied(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    untracked = os.fsdecode(os.fsencode(repo) + b"/unt\xf6.txt")
    Path(untracked).write_bytes(b"dirty\n")
    turns = [[{"tool": "bash", "input": {"command": "printf 'new\\n' > \"$(printf 'na\\xefve.txt')\"; cat unt*.txt"}}],
             [{"expect_result": "dirty"}, {"text": "ok"}]]
    sid = _run(musec, _one_worker(tmp_path, "nonutf.json", turns), repo)

    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    spawned = next(e for e in events if e["type"] == "worker_spawned")
    assert spawned["snapshot"] and spawned["dirty_paths"] == ["unt\\xf6.txt"]
    assert musec("log", "verify", sid).returncode == 0
    assert musec("workers", sid).returncode == 0
    applied = musec("apply", sid)
    assert applied.returncode == 0, applied.stderr
    listed = subprocess.run(["git", "ls-tree", "-z", "--name-only", "HEAD"], cwd=repo, capture_output=True,
                            env=musec.env, check=True).stdout
    assert b"na\xefve.txt" in listed.split(b"\0") and b"unt\xf6.txt" not in listed.split(b"\0")
    assert Path(untracked).read_bytes() == b"dirty\n"  # still the person's, untracked


def test_the_second_of_two_fan_outs_from_one_base_merges_after_the_first(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    first = _run(musec, _one_worker(tmp_path, "a.json", WORKERS["feature"]), repo)
    second = _run(musec, _one_worker(tmp_path, "b.json", WORKERS["docs"]), repo)

    assert musec("apply", first).returncode == 0
    applied = musec("apply", second)

    assert applied.returncode == 0, applied.stderr
    assert "main: merge" in applied.stdout and "not on this merge" in applied.stdout
    assert "python3 -m unittest" in applied.stdout  # the tests to run on it, named
    assert (repo / "double.py").read_text() == DOUBLE and (repo / "NOTES.md").exists()
    assert _git(repo, musec, "status", "--porcelain") == ""
    assert len(_git(repo, musec, "log", "-1", "--format=%P").split()) == 2


def test_gc_removes_the_sessions_and_worktrees_of_a_deleted_repository(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    sid = _run(musec, _one_worker(tmp_path, "a.json", WORKERS["docs"]), repo)
    trees = musec.home / "state" / "worktrees" / sid
    assert trees.is_dir()
    shutil.rmtree(repo)

    done = musec("gc", "--older-than", "0s")

    assert done.returncode == 0, done.stderr
    assert f"  {sid}" in done.stdout and "kept" not in done.stdout
    assert f"note {sid}: its repository {repo} is gone" in done.stdout
    assert not trees.exists()
    assert sid not in [s["id"] for s in musec.json("sessions", "--all", "--json")]
