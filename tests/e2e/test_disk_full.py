"""End to end on a real full disk: a small tmpfs as MUSEC_HOME (fresh-user s8 J4).

A big tool output that does not fit leaves no partial blob behind; a session started
while the disk is full is refused in one line that says so and what to do, and leaves no
log; an empty log (a start that failed before its first line, as older musecs left them)
is "a session that never started" to resume and to ``log verify``; ``musec doctor`` says
the state folder's disk is full. Needs root (``mount``); skipped where it is not allowed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Musec

SIZE = 4 << 20


@pytest.fixture
def small_home() -> Iterator[Path]:
    home = Path(tempfile.mkdtemp(prefix="mhf", dir="/tmp"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(home)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        home.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], capture_output=True)
        home.rmdir()


@pytest.fixture
def full_musec(small_home: Path) -> Iterator[Musec]:
    runner = Musec(small_home)
    yield runner
    runner.stop()


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill(path: Path) -> Path:
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def _script(tmp_path: Path, name: str, turns: list) -> str:
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps({"turns": turns}))
    return f"scripted:{script}"


def test_a_full_state_disk_is_said_and_leaves_nothing_behind(full_musec: Musec, small_home: Path,
                                                             buggy_repo: Path, tmp_path: Path) -> None:
    musec = full_musec
    state = small_home / "state"
    big = _script(tmp_path, "big", [[{"tool": "bash", "input": {"command": f"head -c {2 * SIZE} /dev/zero | tr '\\\\0' a"}}],
                                    [{"text": "done"}]])
    proc = musec("run", "--model", big, "--approval", "auto", "make big output", cwd=buggy_repo)
    assert proc.returncode != 0 and "No space left on device" in proc.stderr, proc.stderr
    # 1. the part of the blob written is gone: the disk is not kept full
    assert [p.name for p in (state / "blobs").rglob("*") if ".tmp" in p.name] == []
    assert _free(small_home) > SIZE // 2
    logs_before = sorted(p.name for p in (state / "sessions").iterdir())

    filler = _fill(small_home)
    # 2. a new session on the full disk: one line that says so and what to do
    small = _script(tmp_path, "small", [[{"text": "hi"}]])
    proc = musec("run", "--model", small, "--approval", "auto", "while full", cwd=buggy_repo)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is full" in lines[0] and "musec gc" in lines[0] and "OSError" not in lines[0], lines
    # 3. and no log of a session that never started
    assert sorted(p.name for p in (state / "sessions").iterdir()) == logs_before
    # 5. doctor checks the space
    doctor = musec("doctor")
    assert doctor.returncode == 1 and any(line.startswith("✗ disk space") for line in doctor.stdout.splitlines()), doctor.stdout

    filler.unlink()
    proc = musec("run", "--model", small, "--approval", "auto", "after", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr  # space freed: sessions start again
    # 4. the first session goes on; its cut call is said to be cut by the log, not by a daemon stop
    (first,) = [name.removesuffix(".jsonl") for name in logs_before]
    proc = musec("run", "--resume", first, "--model", small, "--approval", "auto", "go on", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in (state / "sessions" / f"{first}.jsonl").read_text().splitlines()]
    (cut,) = [e for e in events if e["type"] == "tool_interrupted"]
    assert "the daemon did not" in cut["reason"] and "No space left on device" in cut["reason"], cut


def test_an_empty_log_is_a_session_that_never_started(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    small = _script(tmp_path, "small", [[{"text": "hi"}]])
    assert musec("run", "--model", small, "--approval", "auto", "start the daemon", cwd=buggy_repo).returncode == 0
    sid = "1a234cf6478-07b7a0"
    (musec.home / "state" / "sessions" / f"{sid}.jsonl").write_bytes(b"")  # as a failed start of an older musec left
    proc = musec("run", "--resume", sid, "--model", small, "hi", cwd=buggy_repo)
    assert proc.returncode == 2 and "never started" in proc.stderr and "held by" not in proc.stderr, proc.stderr
    verify = musec("log", "verify", sid)
    assert verify.returncode != 0 and "never started" in verify.stdout, verify.stdout
    assert "changed after it was written" not in verify.stdout, verify.stdout
