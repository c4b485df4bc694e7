"""A fan-out's limits are the person's settings (user trial F16): ``[workers]
time_limit_s`` stops a worker, ``test_timeout_s`` the integration's test run (both were
fixed, 900 s and 600 s); a value that is not a positive number of seconds is one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import Musec
from tests.e2e.test_fanout import _repo

SLOW_TEST = "import time\nimport unittest\n\n\nclass SlowTest(unittest.TestCase):\n    def test_slow(self):\n        time.sleep(60)\n"


def _config(musec: Musec, text: str) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(text)


def test_the_workers_time_limit_and_the_test_timeout_are_settings(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "test_slow.py").write_text(SLOW_TEST)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=musec.env)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "slow"],
                   cwd=repo, check=True, env=musec.env)
    _config(musec, "[workers]\ntime_limit_s = 3\ntest_timeout_s = 2.5\n")
    script = tmp_path / "limits.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": [{"name": "w", "instruction": "take long"}]}}],
                  [{"expect_result": "tests FAILED (timed out)"}, {"text": "done"}]],
        "agents": {"worker:w": {"turns": [[{"tool": "write_file", "input": {"path": "w.txt", "content": "w\n"}}],
                                          [{"tool": "bash", "input": {"command": "sleep 60"}}], [{"text": "never"}]]}},
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "none",
                 "--output-format", "json", "go", cwd=repo, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    finished = next(e for e in events if e["type"] == "worker_finished")
    assert finished["exit_reason"] == "time_limit" and "3 s ([workers] time_limit_s)" in finished["message"]
    assert finished["commit"]  # what it had written is on its branch
    cut = next(e for e in events if e["type"] == "tool_interrupted" and e["agent"] == "worker:w")
    assert "time limit (3 s, [workers] time_limit_s)" in cut["reason"]
    integration = next(e for e in events if e["type"] == "integration")
    assert integration["tests_passed"] is False and not integration["ok"]
    took = next(e for e in events if e["type"] == "integration")["ts"] - finished["ts"]
    assert took < 30, took  # killed after 2.5 s, not the 600 s of before


def test_a_bad_limit_is_one_line_naming_the_key(musec: Musec, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _config(musec, "[workers]\ntest_timeout_s = 0\n")
    script = tmp_path / "none.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--agents", "none", "go", cwd=repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "[workers] test_timeout_s must be a positive number of seconds" in line, line
    assert "Traceback" not in proc.stderr
