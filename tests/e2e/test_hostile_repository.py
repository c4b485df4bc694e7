"""The hostile repository (issue 13, "Done means"): a sparse checkout, a Git LFS-tracked
file, a file name that is not UTF-8, key-shaped text, CRLF files and a symlink out, plus
uncommitted work. A scripted session reads, edits, fans out and applies on it; afterwards
the person's branch holds exactly the workers' changes, their uncommitted work is as it
was, every written file holds the bytes the model sent, and the log verifies and replays."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Musec

LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
               "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")
KEYISH = "TOKEN = 'sk-ant-api03-" + "Zx9" * 12 + "'\n"
BAD = b"a/bad\xffname.txt"
TEST_TOP = ("import unittest\n\nfrom top import value\n\n\nclass T(unittest.TestCase):\n"
            "    def test_value(self):\n        self.assertEqual(value(), 1)\n")


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, env=env, check=True)
    return done.stdout.decode("utf-8", "surrogateescape")


@pytest.fixture
def hostile(tmp_path: Path, musec: Musec) -> Path:
    repo = tmp_path / "hostile"
    (repo / "a").mkdir(parents=True)
    (repo / "b").mkdir()
    (repo / "top.py").write_text("def value():\n    return 1\n")
    (repo / "test_top.py").write_text(TEST_TOP)
    (repo / "a" / "x.py").write_text("X = 1\n")
    (repo / "a" / "util.py").write_text("def util():\n    return 2\n")
    (repo / "a" / "win.py").write_bytes(b"def f():\r\n    return 'crlf'\r\n")
    (repo / "a" / "keys.py").write_text(KEYISH)
    (repo / "a" / "model.bin").write_text(LFS_POINTER)
    with open(os.path.join(os.fsencode(repo), BAD), "wb") as f:
        f.write(b"not utf-8 name\n")
    (repo / "b" / "y.txt").write_text("outside the sparse set\n")
    (repo / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    os.symlink("/etc", repo / "a" / "out")
    env = {**musec.env, "GIT_AUTHOR_NAME": "p", "GIT_AUTHOR_EMAIL": "p@example.invalid",
           "GIT_COMMITTER_NAME": "p", "GIT_COMMITTER_EMAIL": "p@example.invalid"}
    git(repo, "init", "-q", "-b", "main", env=env)
    git(repo, "add", "-A", env=env)
    git(repo, "commit", "-q", "-m", "hostile", env=env)
    git(repo, "sparse-checkout", "set", "--no-cone", "/*.py", "/.git*", "/a/", env=env)
    assert not (repo / "b" / "y.txt").exists()
    # the person's uncommitted work: a change, a staged change and an untracked file
    (repo / "a" / "x.py").write_text("X = 1  # mine, not committed\n")
    (repo / "top.py").write_text("def value():\n    return 1  # staged\n")
    git(repo, "add", "top.py", env=env)
    (repo / "notes.txt").write_text("my notes\n")
    return repo


def _state(repo: Path) -> dict[str, bytes]:
    out = {}
    for root, dirs, files in os.walk(os.fsencode(repo)):
        dirs[:] = [d for d in dirs if d != b".git"]
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, os.fsencode(repo))] = f.read()
    return out


def test_a_session_on_a_hostile_repository(musec: Musec, hostile: Path, tmp_path: Path) -> None:
    head_before = git(hostile, "rev-parse", "HEAD").strip()
    new_file = "def g():\r\n    return 'new'\r\n"
    worker_turns = [
        [{"tool": "read_file", "input": {"path": "a/model.bin"}}],
        [{"expect_result": "git-lfs"}, {"tool": "edit_file", "input": {"path": "a/util.py", "old_string": "return 2",
                                                                      "new_string": "return 2  # by the worker"}}],
        [{"tool": "write_file", "input": {"path": "a/new.py", "content": new_file}}],
        [{"text": "done"}],
    ]
    main_turns = [
        [{"tool": "glob", "input": {"pattern": "a/*"}}],
        [{"expect_result": "bad\\xffname.txt"}, {"tool": "read_file", "input": {"path": "a/bad\\xffname.txt"}}],
        [{"expect_result": "not utf-8 name"}, {"tool": "grep", "input": {"pattern": "crlf"}}],
        [{"tool": "edit_file", "input": {"path": "a/win.py", "old_string": "return 'crlf'",
                                         "new_string": "return 'still crlf'"}}],
        [{"tool": "read_file", "input": {"path": "a/keys.py"}}],
        [{"tool": "read_file", "input": {"path": "a/out/hostname"}}],
        [{"expect_result": "outside the workspace"},
         {"tool": "spawn_workers", "input": {"tasks": [{"name": "w", "instruction": "change top and add new"}]}}],
        [{"expect_result": "tests passed"}, {"text": "Fan-out done."}],
    ]
    script = tmp_path / "hostile.json"
    script.write_text(json.dumps({"turns": main_turns, "agents": {"worker:w": {"turns": worker_turns}}}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                 "go", cwd=hostile, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    before_apply = _state(hostile)
    assert (hostile / "a" / "win.py").read_bytes() == b"def f():\r\n    return 'still crlf'\r\n"
    assert (hostile / "a" / "keys.py").read_text() == KEYISH

    applied = musec("apply", sid)
    assert applied.returncode == 0, applied.stderr

    # The branch holds exactly the workers' changes, on top of the old HEAD.
    assert git(hostile, "rev-parse", "HEAD~1").strip() == head_before
    changed = git(hostile, "diff", "--name-only", "HEAD~1", "HEAD").split()
    assert sorted(changed) == ["a/new.py", "a/util.py"]
    assert git(hostile, "show", "HEAD:a/util.py") == "def util():\n    return 2  # by the worker\n"
    assert git(hostile, "show", "HEAD:a/new.py").encode() == new_file.encode()
    # The person's uncommitted work is as it was; the workers' new file arrived beside it.
    after = _state(hostile)
    assert after.pop(b"a/new.py") == new_file.encode()
    assert after.pop(b"a/util.py") == b"def util():\n    return 2  # by the worker\n"
    before_apply.pop(b"a/util.py")
    assert after == before_apply
    status = git(hostile, "status", "--porcelain")
    assert " M a/x.py" in status and "?? notes.txt" in status
    assert " M a/win.py" in status and "M  top.py" in status  # the staged change is still staged
    assert "b/y.txt" not in status and not (hostile / "b" / "y.txt").exists()  # still sparse
    assert "S b/y.txt" in git(hostile, "ls-files", "-t")
    assert musec("log", "verify", sid).returncode == 0
    replayed = musec.json("replay", sid, "--json")
    # The key-shaped text the agent read is exact in what ran and redacted in the log; each
    # request's digest is of it as the log rebuilds it, so every one is still compared.
    assert replayed["ok"] and replayed["redacted_requests"] == 0


def test_key_shaped_text_is_written_as_the_model_sent_it(musec: Musec, hostile: Path, tmp_path: Path) -> None:
    # Issue 13 case 1: redaction is for what is stored; the file, the command and the
    # results the model reads hold the exact bytes, and the redacted log still replays.
    script = tmp_path / "keys.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "write_file", "input": {"path": "a/secret.py", "content": KEYISH}}],
        [{"tool": "bash", "input": {"command": "grep -c \"$(cat a/keys.py)\" a/secret.py"}}],
        [{"expect_result": "\n1\n"}, {"tool": "read_file", "input": {"path": "a/keys.py"}}],
        [{"expect_result": KEYISH.strip()}, {"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                 cwd=hostile)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (hostile / "a" / "secret.py").read_text() == KEYISH
    sid = json.loads(proc.stdout)["session_id"]
    log = (musec.home / "state" / "sessions" / f"{sid}.jsonl").read_bytes()
    assert KEYISH.strip().encode() not in log and b"[REDACTED]" in log
    assert musec("log", "verify", sid).returncode == 0
    replayed = musec.json("replay", sid, "--json")
    assert replayed["ok"] and replayed["redacted_requests"] == 0  # compared exactly, not skipped
