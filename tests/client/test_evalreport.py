"""``musec eval``'s table from a Harbor job directory: statistics and failure classes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from musec.client import evalreport

from tests.conftest import BIN, clean_env


def test_wilson_interval_known_values() -> None:
    low, high = evalreport.wilson_interval(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert evalreport.wilson_interval(0, 5)[0] == 0.0 and evalreport.wilson_interval(5, 5)[1] == 1.0
    assert all(math.isnan(x) for x in evalreport.wilson_interval(0, 0))


@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_bounds(case: tuple[int, int, int]) -> None:
    n, c, k = case
    value = evalreport.pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    assert value == (0.0 if c == 0 else value)
    if k == 1:
        assert value == pytest.approx(c / n)
    assert evalreport.pass_at_k(n, c, k) >= evalreport.pass_at_k(n, c, 1) - 1e-12


def _trial(job: Path, name: str, task: str, reward: float | None, exc: str = "", cost: float = 0.5) -> None:
    (job / name).mkdir(parents=True)
    (job / name / "result.json").write_text(json.dumps({
        "trial_name": name, "task_name": task, "started_at": "2026-01-01T00:00:00", "finished_at": "2026-01-01T00:01:00",
        "agent_result": {"n_input_tokens": 100, "n_cache_tokens": 40, "n_output_tokens": 10, "cost_usd": cost},
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "exception_info": {"exception_type": exc} if exc else None}))


def test_report_of_a_job_directory(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "result.json").write_text(json.dumps({"started_at": "2026-01-01T00:00:00", "finished_at": "2026-01-01T00:03:00"}))
    (job / "config.json").write_text(json.dumps({"agents": [{"name": "musec.harbor.agent:MusecAgent", "model_name": "m"}]}))
    _trial(job, "a__1", "a", 1.0)
    _trial(job, "a__2", "a", 0.0)
    _trial(job, "b__1", "b", None, "AgentTimeoutError")
    _trial(job, "b__2", "b", None, "UnknownApiError")
    _trial(job, "c__1", "c", None, "RewardFileNotFoundError")
    _trial(job, "c__2", "c", None, "NonZeroAgentExitCodeError")
    d = evalreport.load(job).as_dict()
    assert (d["tasks"], d["trials"], d["passed"], d["tasks_solved"]) == (3, 6, 1, 1)
    assert d["failures"] == {"wrong result": 1, "agent error": 1, "timeout": 1, "verifier failure": 1, "provider error": 1}
    assert d["pass_at_k"]["1"] == pytest.approx(1 / 6) and d["pass_at_k"]["2"] == pytest.approx(1 / 3)
    assert d["cost_per_task_usd"] == pytest.approx(1.0) and d["cost_per_solved_task_usd"] == pytest.approx(3.0)
    assert (d["input_tokens"], d["cached_tokens"], d["wall_s"]) == (600, 240, 180.0)


def test_eval_report_cli(tmp_path: Path, musec_home: Path) -> None:
    import subprocess

    job = tmp_path / "job"
    job.mkdir()
    (job / "result.json").write_text("{}")
    _trial(job, "a__1", "a", 1.0)
    proc = subprocess.run([str(BIN / "musec"), "eval", "report", str(job)], env=clean_env(musec_home),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "pass rate 100.0%" in proc.stdout and (job / "musec-eval.png").is_file()
    bad = subprocess.run([str(BIN / "musec"), "eval", "report", str(tmp_path / "nope")], env=clean_env(musec_home),
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a Harbor job directory" in bad.stderr and "Traceback" not in bad.stderr
    missing = subprocess.run([str(BIN / "musec"), "eval", str(tmp_path)], env=clean_env(musec_home),
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "give the model" in missing.stderr
