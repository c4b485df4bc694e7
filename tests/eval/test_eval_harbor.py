"""``musec eval`` end to end: Harbor runs our task set with MusecAgent in BwrapEnvironment.

These need Harbor's own venv (Python >= 3.12, ~470 MB): ``$MUSEC_HARBOR_VENV`` or the
checkout's ``.venv-harbor`` (``.ci/run`` creates it once per CI run), with this checkout
installed into it (``pip install -e .``). Without it they are skipped, saying so. Real
Harbor, real bubblewrap, real pip installs of musec's wheel into each trial, and the
scripted model or the local Anthropic test server; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import BIN, REPO_ROOT, clean_env
from tests.support.anthropic_server import AnthropicServer, message

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

EVALS = REPO_ROOT / "evals"
WRONG = {"refactor-keep-behaviour", "hostile-readme", "deep-merge"}  # solved with their wrong.json instead


def _harbor_venv() -> Path:
    venv = Path(os.environ.get("MUSEC_HARBOR_VENV") or REPO_ROOT / ".venv-harbor")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import harbor, musec.harbor.agent"],
                           capture_output=True, text=True) if (venv / "bin" / "python").exists() else None
    if probe is None or probe.returncode != 0:
        pytest.skip(f"no Harbor venv with this musec at {venv} (.ci/run creates it with Python 3.12; "
                    "or set MUSEC_HARBOR_VENV)")
    return venv


@pytest.fixture
def harbor_venv() -> Path:
    return _harbor_venv()


def _eval(venv: Path, home: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
          timeout: float = 1400) -> subprocess.CompletedProcess[str]:
    full = {**clean_env(home), "MUSEC_HARBOR_VENV": str(venv), **(env or {})}
    return subprocess.run([str(BIN / "musec"), "eval", *args], env=full, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _trials(job: Path) -> dict[str, dict]:
    return {json.loads(p.read_text())["task_name"]: json.loads(p.read_text()) for p in job.glob("*/result.json")}


def _validate_atif(venv: Path, paths: list[Path]) -> subprocess.CompletedProcess[str]:
    code = ("import sys\nfrom harbor.models.trajectories import Trajectory\n"
            "for p in sys.argv[1:]:\n    t = Trajectory.model_validate_json(open(p).read())\n"
            "    assert t.steps[0].source == 'user' and any(s.tool_calls for s in t.steps), p\nprint('valid', len(sys.argv) - 1)")
    return subprocess.run([str(venv / "bin" / "python"), "-c", code, *map(str, paths)], capture_output=True, text=True)


def _interval(trial: dict) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(trial["started_at"]), datetime.fromisoformat(trial["finished_at"])


def test_task_set_scripted_rewards_trajectories_and_concurrency(harbor_venv: Path, tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    tasks = sorted(p.name for p in EVALS.iterdir() if (p / "task.toml").is_file())
    assert len(tasks) >= 10
    for name in tasks:
        variant = "wrong" if name in WRONG else "solve"
        shutil.copy(EVALS / name / "scripted" / f"{variant}.json", scripts / f"{name}.json")
    home = Path(tempfile.mkdtemp(prefix="mh", dir="/tmp"))
    try:
        proc = _eval(harbor_venv, home, str(EVALS), "--model", f"scripted:{scripts}/{{task}}.json", "-n", "4",
                     "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "set", "--ak", "agents=none", "--json",
                     "--compare", "nop")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary, compared = (json.loads(line) for line in proc.stdout.strip().splitlines())
    # --compare ran Harbor's do-nothing agent on the same tasks: every hidden test fails it.
    assert (compared["agent"], compared["trials"], compared["passed"]) == ("nop", len(tasks), 0)
    trials = _trials(tmp_path / "jobs" / "set")
    assert sorted(trials) == tasks
    rewards = {name: (t.get("verifier_result") or {}).get("rewards", {}).get("reward") for name, t in trials.items()}
    assert rewards == {name: 0.0 if name in WRONG else 1.0 for name in tasks}, {
        n: (t.get("exception_info") or {}).get("exception_message", "")[-400:] for n, t in trials.items()}
    assert summary["passed"] == len(tasks) - len(WRONG) and summary["failures"]["wrong result"] == len(WRONG)
    # Every trial's trajectory is valid ATIF, per Harbor's own models.
    paths = [tmp_path / "jobs" / "set" / t["trial_name"] / "agent" / "trajectory.json" for t in trials.values()]
    check = _validate_atif(harbor_venv, paths)
    assert check.returncode == 0 and f"valid {len(tasks)}" in check.stdout, check.stderr[-2000:]
    # The fan-out task really fanned out: two workers, integration passed, `musec apply` brought it home.
    fan = tmp_path / "jobs" / "set" / trials["fan-out-two-modules"]["trial_name"] / "agent"
    subagents = json.loads((fan / "trajectory.json").read_text())["subagent_trajectories"]
    assert sorted(t["trajectory_id"] for t in subagents) == ["worker:stats", "worker:units"]
    assert "fast-forward" in (fan / "musec-apply.txt").read_text()
    # The bwrap trials share one host Python: musec was installed with pip once per install
    # script (the offline task gets its own) and copied into the other trials.
    installs = [(tmp_path / "jobs" / "set" / t["trial_name"] / "agent" / "musec-install.txt").read_text()
                for t in trials.values()]
    assert sum("installed with pip" in text for text in installs) == 2, installs
    assert sum("copied from an earlier trial" in text for text in installs) == len(tasks) - 2, installs
    # Trials ran concurrently: some two overlap in time.
    spans = sorted(_interval(t) for t in trials.values())
    assert any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)), spans
    # The report command reads the same job and writes its plot.
    report = _eval(harbor_venv, tmp_path / "h2", "report", str(tmp_path / "jobs" / "set"), timeout=120)
    assert report.returncode == 0 and "pass rate" in report.stdout, report.stderr
    assert (tmp_path / "jobs" / "set" / "musec-eval.png").stat().st_size > 1000


def _anthropic_turns() -> list:
    test = "python3 -m unittest -q 2>&1"
    return [
        message([{"type": "text", "text": "Running the tests."},
                 {"type": "tool_use", "id": "toolu_01EvalRunA1", "name": "bash", "input": {"command": test}}],
                input_tokens=1200, output_tokens=40),
        message([{"type": "tool_use", "id": "toolu_01EvalEditB2", "name": "edit_file",
                  "input": {"path": "pager.py", "old_string": "start = number * size",
                            "new_string": "start = (number - 1) * size"}}], input_tokens=1500, output_tokens=60),
        message([{"type": "tool_use", "id": "toolu_01EvalRunC3", "name": "bash", "input": {"command": test}}],
                input_tokens=1700, output_tokens=30),
        message([{"type": "text", "text": "Fixed the off-by-one; the tests pass."}], input_tokens=1900, output_tokens=20),
    ]


def test_anthropic_wire_tokens_and_cost_equal_musec_cost(harbor_venv: Path, tmp_path: Path) -> None:
    key = "sk-ant-" + "api03-evalTestKeyNeverReal-0123456789abcdef"  # fake; split so no key-shaped literal is committed
    home = Path(tempfile.mkdtemp(prefix="mh", dir="/tmp"))
    try:
        with AnthropicServer() as server:
            server.enqueue(*_anthropic_turns())
            # The key and endpoint reach musec through Harbor's model connection: the key from
            # the variable --api-key-name names, the endpoint from --base-url.
            proc = _eval(harbor_venv, home, str(EVALS / "fix-failing-test"), "--model", "anthropic/claude-sonnet-4-6",
                         "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "wire", "--ak", "agents=none",
                         "--base-url", server.base_url, "--api-key-name", "EVAL_TEST_ANTHROPIC_KEY",
                         env={"EVAL_TEST_ANTHROPIC_KEY": key})
            requests = list(server.requests)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(requests) == 4 and all(r.headers["x-api-key"] == key for r in requests)
        trial = _trials(tmp_path / "jobs" / "wire")["fix-failing-test"]
        assert trial["verifier_result"]["rewards"]["reward"] == 1.0, trial.get("exception_info")
        agent_dir = tmp_path / "jobs" / "wire" / trial["trial_name"] / "agent"
        # `musec cost` of that session, asked of a daemon here over the trial's MUSEC_HOME.
        env = {**clean_env(agent_dir / "musec-home"), "MUSEC_SOCKET": str(home / "s.sock")}
        sid = trial["agent_result"]["metadata"]["musec_session_id"]
        cost = subprocess.run([str(BIN / "musec"), "cost", sid, "--json"], env=env, capture_output=True, text=True,
                              timeout=60)
        subprocess.run([str(BIN / "musec"), "daemon", "stop"], env=env, capture_output=True, timeout=60)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert cost.returncode == 0, cost.stderr
    rows = json.loads(cost.stdout)["rows"]
    ar = trial["agent_result"]
    assert ar["n_input_tokens"] == sum(r["input_tokens"] + r["cache_read_tokens"] + r["cache_write_tokens"] for r in rows) > 0
    assert ar["n_output_tokens"] == sum(r["output_tokens"] for r in rows) > 0
    assert ar["n_cache_tokens"] == sum(r["cache_read_tokens"] for r in rows)
    assert ar["cost_usd"] == pytest.approx(json.loads(cost.stdout)["total_usd"]) and ar["cost_usd"] > 0
    trajectory = json.loads((agent_dir / "trajectory.json").read_text())
    fm = trajectory["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_completion_tokens"]) == (ar["n_input_tokens"], ar["n_output_tokens"])
    steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    assert sum(s["metrics"]["prompt_tokens"] for s in steps) == ar["n_input_tokens"]
    assert [c["tool_call_id"] for s in steps for c in s.get("tool_calls", [])] == [
        "toolu_01EvalRunA1", "toolu_01EvalEditB2", "toolu_01EvalRunC3"]
    assert "OK" in steps[2]["observation"]["results"][0]["content"]
    leaked = [p for p in (tmp_path / "jobs").rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert not leaked, f"the API key was written to {leaked}"
    check = _validate_atif(harbor_venv, [agent_dir / "trajectory.json"])
    assert check.returncode == 0, check.stderr[-2000:]
