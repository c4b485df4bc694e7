"""End to end with the scripted model (fresh-user s5 F2, F3): a key under ``~/.ssh`` and a
folder a ``read`` deny rule names stay out of every command (the main agent's, a worker's),
so out of the log and the model's context; git works in a worker, whose sandbox cannot
move the person's refs; musec still commits the worker's work."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from tests.conftest import Musec
from tests.support.repos import one_commit_repo

KEY = "FAKE-PRIVATE-KEY-e2e-5d3a"
PEEK = "cat ~/.ssh/id_rsa ~/vault/a.txt ~/.aws/credentials 2>&1 | sed 's/^/peek: /'; echo PEEKED"
GIT = ("git status --short; git log --oneline -1; git diff --stat; git add notes.txt && git diff --cached --name-only;"
       " git -c user.name=w -c user.email=w@x commit -qm mine; git branch -f main HEAD 2>&1 | tail -1; echo GITDONE")


@pytest.fixture
def home() -> Iterator[Path]:
    """The daemon's ``$HOME``, outside /tmp (the sandbox's private /tmp would hide it)."""
    try:
        path = Path(tempfile.mkdtemp(prefix="musec-home-", dir="/var/tmp")).resolve()
    except OSError:
        pytest.skip("/var/tmp is not writable here")
    for rel, text in ((".ssh/id_rsa", "ssh"), ("vault/a.txt", "vault"), (".aws/credentials", "aws")):
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(f"{KEY} {text}\n")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_hidden_keys_stay_out_of_every_command_and_git_works_in_a_worker(
        musec: Musec, tmp_path: Path, home: Path) -> None:
    repo = one_commit_repo(tmp_path / "proj")
    main_before = str(pygit2.Repository(str(repo)).references["refs/heads/main"].target)
    (musec.home / "config").mkdir(parents=True, exist_ok=True)
    (musec.home / "config" / "config.toml").write_text('[permissions]\ndeny = ["read(~/vault/**)"]\n')
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "turns": [
            [{"tool": "bash", "input": {"command": PEEK}}],
            [{"expect_result": "PEEKED"},
             {"tool": "spawn_workers", "input": {"tasks": [{"name": "w1", "instruction": "write notes"}]}}],
            [{"expect_result": "worker w1"}, {"text": "done"}],
        ],
        "agents": {"worker:w1": {"turns": [
            [{"tool": "write_file", "input": {"path": "notes.txt", "content": "notes\n"}}],
            [{"tool": "bash", "input": {"command": PEEK + "; " + GIT}}],
            [{"expect_result": "GITDONE"}, {"text": "wrote notes"}],
        ]}},
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                 cwd=repo, env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    for path in musec.home.rglob("*"):  # not in the log, a blob, or anywhere musec keeps
        if path.is_file() and not path.is_socket():
            assert KEY.encode() not in path.read_bytes(), path
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    results = {e["agent"]: e["content"] for e in events if e["type"] == "tool_finished" and e["tool"] == "bash"}
    assert results.keys() == {"main", "worker:w1"}
    for text in results.values():
        assert text.count("peek: cat:") == 3, text  # each file: "No such file or directory"
    worker = results["worker:w1"]
    assert "not a git repository" not in worker, worker
    assert "?? notes.txt" in worker and " calc" in worker and "\nnotes.txt\n" in worker
    assert "musec: a worker does not commit" in worker and "GITDONE" in worker
    after = pygit2.Repository(str(repo))
    assert str(after.references["refs/heads/main"].target) == main_before  # the worker moved no ref of the person's
    branch = after.branches.local[f"musec/{sid}/w1"]
    assert "notes.txt" in branch.peel().tree  # musec committed the worker's work itself
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, env=musec.env)
    assert status.stdout == ""
