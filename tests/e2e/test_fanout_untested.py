"""A fan-out in a repository with no test command can be applied (fresh-user s8 J7): its
integration was never ``ok`` (no tests passed, since none ran), so `musec apply` refused it
for "conflicts or failing tests" though there were neither, and "configure one" was
explained nowhere. Now it applies, saying nothing was tested and how to set a test
command (``[workers] test_command``); a refusal names its real reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Musec


def _repo(tmp_path: Path) -> Path:
    import pygit2

    repo_dir = tmp_path / "plain"
    (repo_dir / "a").mkdir(parents=True)
    (repo_dir / "a" / "one.py").write_text("ONE = 1\n")
    repo = pygit2.init_repository(str(repo_dir), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("test", "test@example.invalid")
    repo.create_commit("HEAD", sig, sig, "plain", repo.index.write_tree(), [])
    return repo_dir


def _fan_out(musec: Musec, tmp_path: Path, repo: Path, expect: str) -> str:
    script = tmp_path / "untested.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": [{"name": "wa", "instruction": "add a module"}]}}],
                  [{"expect_result": expect}, {"text": "done"}]],
        "agents": {"worker:wa": {"turns": [[{"tool": "write_file", "input": {"path": "a/new.py", "content": "NEW = 2\n"}}],
                                           [{"text": "added a/new.py"}]]}},
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "none",
                 "--output-format", "json", "split it", cwd=repo, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["session_id"]


def test_a_fan_out_with_no_test_command_applies_saying_nothing_was_tested(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    sid = _fan_out(musec, tmp_path, repo, "nothing was tested; set one as test_command in the [workers] table")
    workers = musec("workers", sid)
    assert "nothing tested" in workers.stdout and "[workers] test_command" in workers.stdout, workers.stdout
    proc = musec("apply", sid, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing was tested" in proc.stdout + proc.stderr and "test_command" in proc.stdout + proc.stderr
    assert (repo / "a" / "new.py").read_text() == "NEW = 2\n"


def test_a_configured_test_command_runs_and_a_refusal_names_the_failing_tests(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[workers]\ntest_command = \"python3 -c 'raise SystemExit(3)'\"\n")
    sid = _fan_out(musec, tmp_path, repo, "tests FAILED (exit status 3)")
    proc = musec("apply", sid, cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert "the tests failed (python3 -c 'raise SystemExit(3)')" in line and "conflicts or" not in line, line
    assert not (repo / "a" / "new.py").exists()


def test_a_test_command_that_is_not_a_command_line_is_one_line(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[workers]\ntest_command = 3\n")
    script = tmp_path / "none.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--agents", "none", "go", cwd=repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "[workers] test_command must be a command line" in line, line
