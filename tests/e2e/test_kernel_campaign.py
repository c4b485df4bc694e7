"""Done-means of the kernel-optimisation agent (issue 16), through the real CLI and daemon
with the scripted model: the CPU example with three candidates, a kill -9 mid-campaign and a
resume that keeps the leaderboard, the plot and CSV, and an exact replay."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.agents.kernel_opt.candidates import FASTER, FORBIDDEN, WRONG, git, one_commit_repo
from tests.conftest import BIN, Musec

pytest.importorskip("torch")


def _script(path: Path) -> Path:
    write = lambda src: [{"tool": "write_file", "input": {"path": "candidate.py", "content": src}}]  # noqa: E731
    evaluate = [{"tool": "evaluate_kernel", "input": {}}]
    path.write_text(json.dumps({"turns": [
        write(WRONG), evaluate,
        write(FORBIDDEN), evaluate,
        [{"tool": "bash", "input": {"command": "cat gate"}}],  # the test kills the daemon here
        write(FASTER), evaluate,
        [{"tool": "kernel_leaderboard", "input": {}}],
        [{"text": "the vectorised softmax is the best so far"}],
    ]}))
    return path


def _repo(tmp_path: Path) -> Path:
    repo = one_commit_repo(tmp_path / "proj")
    os.mkfifo(repo / "gate")
    return repo


def _run_until_gate(musec: Musec, repo: Path, script: Path) -> tuple[str, int, list[dict]]:
    """Start the campaign; read its stream-json until the bash call blocks on the gate;
    return the session id, the daemon's pid and the events seen."""
    proc = subprocess.Popen([str(BIN / "musec"), "optimize", "cpu-example", "--model", f"scripted:{script}",
                             "--approval", "auto", "--output-format", "stream-json", "--max-wall", "1h"],
                            cwd=repo, env=musec.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[dict] = []
    try:
        for line in proc.stdout:
            ev = json.loads(line)
            seen.append(ev)
            if ev.get("type") == "tool_started" and ev.get("tool") == "bash":
                break
        else:
            pytest.fail("the campaign ended before the gate: " + proc.stderr.read())
        started = seen[0]
        os.kill(started["pid"], signal.SIGKILL)  # kill -9 the daemon mid-campaign
        assert proc.wait(timeout=60) == 5  # the client says the daemon was lost
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return started["session_id"], started["pid"], seen


def test_cpu_campaign_end_to_end_with_kill_and_resume(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = _script(tmp_path / "campaign.json")
    sid, _, before = _run_until_gate(musec, repo, script)
    first_two = [e for e in before if e["type"] == "kernel_evaluated"]
    assert [e["status"] for e in first_two] == ["incorrect", "refused"]
    assert all(e["speedup"] is None and e["commit"] is None for e in first_two)  # no speedup for a failure
    assert "refused before running: forbidden import line 2: import scipy.special" == first_two[1]["reason"]
    board_before = musec("kernels", sid).stdout

    try:
        resumed = musec("run", "--resume", sid, cwd=repo, timeout=300)
    finally:
        _release_gate(repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    evals = [e for e in events if e["type"] == "kernel_evaluated"]
    assert [e["n"] for e in evals] == [1, 2, 3] and evals[:2] == first_two
    faster = evals[2]
    assert faster["status"] == "correct" and faster["speedup"] > 1.0 and faster["timing"] == "wall_clock"
    assert faster["tool_calls"] > first_two[1]["tool_calls"]
    # Kept as a commit on the campaign branch; the person's branch is untouched.
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git(repo, "rev-parse", "musec/kernel-opt/cpu-example").strip() == faster["commit"]
    assert git(repo, "show", "musec/kernel-opt/cpu-example:candidate.py") == FASTER
    # The leaderboard: the same first rows as before the kill, the new best on top.
    board = musec("kernels", sid)
    assert board.returncode == 0
    rows = board.stdout.splitlines()
    assert rows[1].split()[:3] == ["3", str(faster["tool_calls"]), "correct"]
    assert [r for r in rows if r.split()[0] in ("1", "2")] == [r for r in board_before.splitlines() if r.split()[0] in ("1", "2")]
    assert "branch: musec/kernel-opt/cpu-example\n" in board.stdout
    assert f"plot: {faster['plot_path']}\n" in board.stdout and f"CSV: {faster['csv_path']}\n" in board.stdout
    as_json = musec.json("kernels", sid, "--json")
    assert [e["n"] for e in as_json] == [3, 1, 2] and as_json[0]["shapes"][0]["ok"] is True
    # The plot and the CSV beside it.
    with open(faster["csv_path"]) as fh:
        assert [r["status"] for r in csv.DictReader(fh)] == ["incorrect", "refused", "correct"]
    assert Path(faster["plot_path"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert musec("log", "verify", sid).returncode == 0
    assert musec.json("replay", sid, "--json")["ok"]


def _release_gate(repo: Path) -> None:
    """Let the ``cat gate`` the killed daemon left behind finish (EOF on its FIFO)."""
    try:
        os.close(os.open(repo / "gate", os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader left


def test_optimize_refuses_an_unknown_spec_on_one_line(musec: Musec, tmp_path: Path) -> None:
    script = tmp_path / "empty.json"
    script.write_text('{"turns": []}')
    proc = musec("optimize", "no-such-spec", "--model", f"scripted:{script}", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "no campaign spec 'no-such-spec'" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
