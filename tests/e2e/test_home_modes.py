"""A fresh MUSEC_HOME is private (issue 18): the root, its config and state directories
0700, every file holding session data (logs, blobs, the kernel campaign's CSV and plot)
0600, under the usual umask 022. A real daemon, a real session, a real campaign."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Musec


@pytest.fixture
def fresh(musec_home: Path) -> Iterator[Musec]:
    """A runner whose MUSEC_HOME does not exist yet (the fixture's own folder is made 0700
    by mkdtemp), with the umask most people have."""
    old = os.umask(0o022)
    runner = Musec(musec_home / "home")
    try:
        yield runner
    finally:
        runner.stop()
        os.umask(old)


def _loose(home: Path) -> list[str]:
    """Everything under ``home`` (itself included) that others could read or list."""
    found = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        if mode != want:
            found.append(f"{path.relative_to(home.parent)} {oct(mode)}")
    return found


def test_a_fresh_home_and_a_session_s_files_are_private(fresh: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "python3 -c 'print(\"x\" * 200000)'"}}],
        [{"text": "done"}],
    ]}))
    proc = fresh("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                 cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    assert any(p.is_file() for p in (fresh.home / "state" / "blobs").rglob("*"))  # the long output, kept whole
    assert any((fresh.home / "state" / "sessions").iterdir())
    assert (fresh.home / "config").is_dir()
    assert _loose(fresh.home) == []


def test_loose_state_and_config_dirs_are_tightened(fresh: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    for name in ("config", "state", "state/sessions"):
        (fresh.home / name).mkdir(parents=True, mode=0o755)
        (fresh.home / name).chmod(0o755)
    assert fresh("daemon", "start").returncode == 0
    assert [x for x in _loose(fresh.home) if not x.startswith("home ")] == []


def test_a_kernel_campaign_s_csv_and_plot_are_private(fresh: Musec, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tests.agents.kernel_opt.candidates import FASTER, one_commit_repo

    repo = one_commit_repo(tmp_path / "proj")
    script = tmp_path / "campaign.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "write_file", "input": {"path": "candidate.py", "content": FASTER}}],
        [{"tool": "evaluate_kernel", "input": {}}],
        [{"text": "faster"}],
    ]}))
    proc = fresh("optimize", "cpu-example", "--model", f"scripted:{script}", "--approval", "auto",
                 "--output-format", "json", "--max-wall", "1h", cwd=repo, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    out = fresh.home / "state" / "kernels" / sid
    assert (out / "leaderboard.csv").is_file() and (out / "speedup.png").is_file()
    assert _loose(fresh.home) == []
