"""evaluate_kernel on the CPU example: a separate process, checks on every shape, wall-clock timing."""

from __future__ import annotations

import pytest
from musec.agents.kernel_opt.evaluate import evaluate_kernel
from musec.agents.kernel_opt.spec import load_spec

from tests.agents.kernel_opt.candidates import FASTER, FORBIDDEN, WRONG

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # each evaluation is a process that imports torch (seconds)


@pytest.fixture(scope="module")
def spec():
    return load_spec("cpu-example")


def test_faster_candidate_is_correct_and_measured_faster(spec, tmp_path):
    (tmp_path / "candidate.py").write_text(FASTER)
    ev = evaluate_kernel(spec, tmp_path, "candidate.py", tool_calls=7)
    assert ev.status == "correct", ev.reason
    assert ev.timing == "wall_clock" and ev.device == "cpu" and ev.tool_calls == 7
    assert len(ev.shapes) == 2 and all(s.ok and s.max_abs < 1e-5 and s.nonfinite == 0 for s in ev.shapes)
    assert all(s.candidate_us > 0 and s.baseline_us > 0 for s in ev.shapes)
    assert ev.speedup > 1.0  # a vectorised softmax against a Python loop over rows
    assert ev.shapes[0].GBps > 0 and ev.shapes[0].TFLOPs > 0


def test_wrong_candidate_fails_its_check_and_reports_no_speedup(spec, tmp_path):
    (tmp_path / "candidate.py").write_text(WRONG)
    ev = evaluate_kernel(spec, tmp_path, "candidate.py")
    assert ev.status == "incorrect" and not ev.correct
    assert "relative RMS error" in ev.reason and "n=384,d=64,m=96 float32" in ev.reason
    assert ev.speedup is None and ev.candidate_us is None and ev.timing == "not measured"
    assert all(s.speedup is None and s.max_abs > 0.1 for s in ev.shapes)


def test_forbidden_import_is_refused_before_running(spec, tmp_path):
    (tmp_path / "candidate.py").write_text(FORBIDDEN)
    ev = evaluate_kernel(spec, tmp_path, "candidate.py")
    assert ev.status == "refused" and ev.eval_s == 0.0 and ev.shapes == []
    assert ev.reason == "refused before running: forbidden import line 2: import scipy.special"


def test_candidate_that_hangs_is_killed_at_the_timeout(spec, tmp_path):
    (tmp_path / "candidate.py").write_text("import time\n\ndef kernel(x, w):\n    time.sleep(600)\n")
    ev = evaluate_kernel(spec, tmp_path, "candidate.py", timeout_s=25)
    assert ev.status == "timeout" and "timed out after 25 s" in ev.reason and ev.speedup is None


@pytest.mark.parametrize(
    "source, words",
    [
        ("def kernel(:\n", "import failed: SyntaxError"),
        ("import torch\n", "import failed: AttributeError"),
        ("import torch\ndef kernel(x, w):\n    return x.new_full((x.shape[0], w.shape[1]), float('nan'))\n", "NaN/inf values"),
        ("import torch\ndef kernel(x, w):\n    raise RuntimeError('boom')\n", "RuntimeError: boom (candidate line 3"),
    ],
)
def test_broken_candidates_say_why_on_one_line(spec, tmp_path, source, words):
    (tmp_path / "candidate.py").write_text(source)
    ev = evaluate_kernel(spec, tmp_path, "candidate.py")
    assert not ev.correct and ev.speedup is None
    assert words in ev.reason and "\n" not in ev.reason


def test_profile_on_the_cpu_gives_the_profilers_table(spec, tmp_path):
    from musec.agents.kernel_opt.profile import profile_kernel

    (tmp_path / "candidate.py").write_text(FASTER)
    text, is_error = profile_kernel(spec, tmp_path, "candidate.py", 1)
    assert not is_error and text.startswith("torch.profiler on cpu, n=129,d=33,m=70 float32")
    assert "aten::_softmax" in text and "Self CPU" in text
    assert profile_kernel(spec, tmp_path, "candidate.py", 2) == (
        "shape must be 0..1 (the spec's shapes: n=384,d=64,m=96, n=129,d=33,m=70)", True)
    (tmp_path / "candidate.py").write_text(FORBIDDEN)
    text, is_error = profile_kernel(spec, tmp_path, "candidate.py", 0)
    assert is_error and text.startswith("refused before running")


ESCAPING = """import socket
import torch

try:
    with open({outside!r}, "w") as f:
        f.write("written by the candidate")
    WROTE = True
except OSError:
    WROTE = False
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    REACHED = True
except OSError:
    REACHED = False


def kernel(x, w):
    if WROTE or REACHED:
        raise RuntimeError(f"escaped: wrote={{WROTE}} reached={{REACHED}}")
    return torch.softmax(x @ w, dim=-1)
"""


@pytest.mark.skipif(__import__("shutil").which("bwrap") is None, reason="needs bubblewrap")
def test_the_candidate_runs_in_the_sessions_sandbox(spec, tmp_path):
    """The candidate's module level ran with the daemon's rights: it wrote outside the
    workspace and reached the network under --approval auto (fresh user s5 F11). With the
    session's sandbox policy it can do neither, and the evaluation still works (torch in
    bubblewrap, the result file written through the sandbox)."""
    import shutil
    import socket
    import tempfile
    from pathlib import Path

    from musec.agents.tools.base import SandboxPolicy

    outside = Path(tempfile.mkdtemp(prefix="outside", dir="/var/tmp"))  # not the sandbox's private /tmp
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        source = ESCAPING.format(outside=str(outside / "escaped.txt"), port=listener.getsockname()[1])
        (tmp_path / "candidate.py").write_text(source)
        ev = evaluate_kernel(spec, tmp_path, "candidate.py", sandbox=SandboxPolicy(mode="bwrap"))
        assert ev.status == "correct", ev.reason
        assert not (outside / "escaped.txt").exists()
        unconfined = evaluate_kernel(spec, tmp_path, "candidate.py")  # a direct call: as before
        assert "escaped: wrote=True reached=True" in unconfined.reason
        assert (outside / "escaped.txt").exists()
    finally:
        listener.close()
        shutil.rmtree(outside, ignore_errors=True)
