"""Evaluation through a local Ray cluster (CPU only) gives the same results as the local runner."""

from __future__ import annotations

import msgspec
import pytest
from musec.agents.kernel_opt.campaign import Campaign
from musec.agents.kernel_opt.evaluate import evaluate_kernel
from musec.agents.kernel_opt.spec import load_spec

from tests.agents.kernel_opt.candidates import FASTER, FORBIDDEN, WRONG

ray = pytest.importorskip("ray")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # each evaluation is a process that imports torch (seconds)

TIMES = ("eval_s", "candidate_us", "baseline_us", "speedup", "GBps", "TFLOPs", "noise")


def _comparable(ev) -> dict:
    """An evaluation without its measured times (those differ from run to run)."""
    raw = msgspec.to_builtins(ev)
    for key in TIMES:
        raw.pop(key, None)
    for s in raw.get("shapes", []):
        for key in TIMES:
            s.pop(key, None)
    return raw


@pytest.fixture(scope="module")
def ray_evaluator():
    from musec.agents.kernel_opt.ray_runner import RayEvaluator

    evaluator = RayEvaluator(num_cpus=1)
    yield evaluator
    evaluator.shutdown()


@pytest.mark.timeout(300)
def test_ray_and_local_runner_agree(ray_evaluator, tmp_path):
    spec = load_spec("cpu-example")
    for name, source in (("wrong.py", WRONG), ("forbidden.py", FORBIDDEN), ("faster.py", FASTER)):
        (tmp_path / name).write_text(source)
        remote = ray_evaluator(spec, tmp_path, name, tool_calls=3)
        local = evaluate_kernel(spec, tmp_path, name, tool_calls=3)
        assert _comparable(remote) == _comparable(local), name
    assert remote.correct and remote.speedup > 1.0
    # A campaign takes the Ray runner in place of the local one.
    camp = Campaign(spec, tmp_path, tmp_path / "out", evaluator=ray_evaluator)
    entry = camp.evaluate("faster.py", tool_calls=4)
    assert entry.evaluation.correct and camp.board.best is entry
