"""`musec gc` and a fan-out's worktrees and branches (fresh-user s8 J9): the dry run named
only the sessions, while the real run deleted their worktrees and branches, among them a
worker's branch holding the only copy of a commit never applied. Now the dry run and the
real run list the same worktrees and branches, and a branch with commits never applied is
kept (the whole session, so `musec apply` still works) unless ``--discard-unapplied``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import Musec
from tests.e2e.test_fanout import _repo, _script


def _branches(musec: Musec, repo: Path) -> str:
    return subprocess.run(["git", "branch", "--list", "musec/*"], cwd=repo, capture_output=True, text=True,
                          env=musec.env).stdout


def _listed(out: str) -> list[str]:
    """The lines under the verb line (the sessions, their worktrees and branches)."""
    return [x.strip() for x in out.splitlines()[1:] if x.startswith("  ")]


def test_gc_keeps_unapplied_worker_commits_and_its_dry_run_lists_what_goes(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = _script(tmp_path, ["docs"], "tests passed")
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "one", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    trees = musec.home / "state" / "worktrees" / sid
    for args in (("--dry-run",), ()):
        kept = musec("gc", "--older-than", "0s", *args)
        assert kept.returncode == 0, kept.stderr
        assert f"kept {sid}: kept worktree of docs: its branch musec/{sid}/docs holds 1 commit never applied" in kept.stdout
        assert "--discard-unapplied" in kept.stdout and f"musec apply {sid}" in kept.stdout
        assert f"musec/{sid}/docs" in _branches(musec, repo) and (trees / "docs").is_dir()
    assert musec("workers", sid).returncode == 0

    dry = musec("gc", "--older-than", "0s", "--dry-run", "--discard-unapplied")
    assert dry.returncode == 0, dry.stderr
    expected = [f"worktree {trees / 'docs'}", f"branch musec/{sid}/docs (1 commit never applied)",
                f"worktree {trees / 'integration'}", f"branch musec/{sid}/integration"]
    listed = _listed(dry.stdout)
    assert listed[0].startswith(sid) and listed[1:] == expected, dry.stdout
    assert f"musec/{sid}/docs" in _branches(musec, repo)  # the dry run removed nothing
    done = musec("gc", "--older-than", "0s", "--discard-unapplied")
    assert done.returncode == 0, done.stderr
    assert _listed(done.stdout) == listed, (dry.stdout, done.stdout)  # the real run removes what the dry run said
    assert done.stdout.splitlines()[0].startswith("removed 1 session")
    assert _branches(musec, repo) == "" and not trees.exists()


def test_gc_removes_an_applied_fan_out_without_asking(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = _script(tmp_path, ["docs"], "tests passed")
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "one", cwd=repo)
    sid = json.loads(proc.stdout)["session_id"]
    applied = musec("apply", sid, cwd=repo)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    done = musec("gc", "--older-than", "0s")
    assert done.returncode == 0 and "kept" not in done.stdout and sid in done.stdout, done.stdout
    assert _branches(musec, repo) == ""
