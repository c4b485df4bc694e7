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


def test_timing_uses_one_method_for_every_call_and_rotates_the_order():
    from musec.kernels.bench import time_interleaved

    log = []

    def graph(fn):
        if fn is torch_ref:
            raise RuntimeError("operation not permitted when stream is capturing")
        log.append(("graph", fn.__name__))
        return 1.0

    def events(fn):
        log.append(("events", fn.__name__))
        return 2.0

    def musec():
        pass

    def torch_ref():
        pass

    calls = {"musec": musec, "torch": torch_ref}
    times, method = time_interleaved(calls, 3, timers=(graph, events))
    assert method == "events"
    assert times == {"musec": [2000.0] * 3, "torch": [2000.0] * 3}
    timed = [entry for entry in log if entry[0] == "events"]
    assert [name for _, name in timed] == ["musec", "torch_ref", "torch_ref", "musec", "musec", "torch_ref"]

    log.clear()
    del calls["torch"]
    times, method = time_interleaved(calls, 2, timers=(graph, events))
    assert method == "cuda-graph" and times == {"musec": [1000.0, 1000.0]}
