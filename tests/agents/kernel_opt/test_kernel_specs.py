"""The kda and mla-decode specs on a machine without a GPU: Triton interpreter, correctness only.

A correct candidate (the spec's own starting kernel) passes on every interpreter shape with
timing "not measured"; the same kernel with an off-by-one in its chunk loop fails the check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from musec.agents.kernel_opt.evaluate import evaluate_kernel, gpu_present
from musec.agents.kernel_opt.profile import NO_PROFILER, profile_kernel
from musec.agents.kernel_opt.spec import load_spec

pytest.importorskip("torch")
pytest.importorskip("triton")
pytestmark = [pytest.mark.skipif(gpu_present(), reason="with a GPU these specs time real shapes"), pytest.mark.slow]

CHUNK_LOOPS = {
    "kda": ("for i_c in range(0, tl.cdiv(T, BT)):", "for i_c in range(0, tl.cdiv(T, BT) - 1):"),
    "mla-decode": ("for i_n in range(0, tl.cdiv(T, BLOCK_N)):", "for i_n in range(0, tl.cdiv(T, BLOCK_N) - 1):"),
}


def _candidate(tmp_path: Path, name: str, off_by_one: bool) -> tuple:
    spec = load_spec(name)
    source = (Path(spec.spec_dir) / spec.start).read_text()
    good, bad = CHUNK_LOOPS[name]
    assert source.count(good) == 1
    if off_by_one:
        source = source.replace(good, bad)
    (tmp_path / spec.candidate).write_text(source)
    return spec, spec.candidate


@pytest.mark.parametrize("name", ["kda", "mla-decode"])
def test_correct_candidate_passes_under_the_interpreter(tmp_path, name):
    spec, path = _candidate(tmp_path, name, off_by_one=False)
    ev = evaluate_kernel(spec, tmp_path, path)
    assert ev.status == "correct", ev.reason
    assert ev.device == "cpu (Triton interpreter)" and ev.timing == "not measured"
    assert ev.speedup is None and ev.candidate_us is None
    assert len(ev.shapes) == 2 and all(s.ok and s.rel_rms < 1e-5 for s in ev.shapes)


@pytest.mark.parametrize("name", ["kda", "mla-decode"])
def test_off_by_one_in_the_chunk_loop_fails_the_check(tmp_path, name):
    spec, path = _candidate(tmp_path, name, off_by_one=True)
    ev = evaluate_kernel(spec, tmp_path, path)
    assert ev.status == "incorrect", ev.reason
    assert ev.speedup is None and not all(s.ok for s in ev.shapes)


def test_kda_candidate_may_not_call_our_own_kernel(tmp_path):
    spec = load_spec("kda")
    (tmp_path / spec.candidate).write_text("from musec.kernels.kda import chunk_kda as kernel\n")
    ev = evaluate_kernel(spec, tmp_path, spec.candidate)
    assert ev.status == "refused" and "musec.kernels.kda" in ev.reason


def test_profiler_says_plainly_that_there_is_none(tmp_path):
    spec, path = _candidate(tmp_path, "kda", off_by_one=False)
    assert profile_kernel(spec, tmp_path, path) == (NO_PROFILER, False)
