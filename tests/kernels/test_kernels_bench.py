"""The benchmark entry point on a machine without a GPU: one line saying no timing, a correctness check, exit 0."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="with a GPU the benchmark times real shapes (minutes)"
)
@pytest.mark.parametrize("op", ["kda", "mla"])
def test_bench_without_gpu_checks_correctness_only(op, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-m", "musec.kernels.bench", op, "--json", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("no CUDA GPU: no timing is possible here")
    assert all(line.endswith(": ok") for line in lines[1:]) and len(lines) > 1
    assert "Traceback" not in proc.stderr


def test_bench_rejects_unknown_op():
    proc = subprocess.run(
        [sys.executable, "-m", "musec.kernels.bench", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
