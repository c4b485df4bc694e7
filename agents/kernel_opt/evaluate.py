"""``evaluate_kernel``: check a candidate against the reference and time it against the baseline.

The candidate runs in a separate process (``child.py``) in its own session, with the spec's
timeout; on timeout the whole process group gets SIGTERM, then SIGKILL. Before that process is
started the source is read and a forbidden import refuses the candidate outright (it never
runs). A failed check never carries a speedup.

Device: a ``cpu`` spec runs on the CPU and is timed by wall clock. A ``cuda`` spec runs on the
GPU when one is present (CUDA-graph timing); without one it runs the ``[interpreter]`` shapes
under ``TRITON_INTERPRET=1`` on the CPU, checks correctness, and reports timing as
``not measured``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..tools.base import SandboxPolicy
from ..tools.errors import SandboxUnavailable
from .confine import confine
from .guard import forbidden_imports
from .measure import geomean
from .spec import CampaignSpec

Status = Literal["correct", "incorrect", "refused", "error", "timeout"]
NOT_MEASURED = "not measured"


class ShapeResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """One (shape, dtype) of an evaluation: errors, and times when measured (microseconds)."""

    shape: dict[str, Any]
    dtype: str
    ok: bool
    reason: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    rel_rms: float | None = None
    nonfinite: int = 0
    timing: str | None = None
    candidate_us: float | None = None
    baseline_us: float | None = None
    speedup: float | None = None
    noise: float | None = None
    GBps: float | None = None
    TFLOPs: float | None = None


class Evaluation(msgspec.Struct, frozen=True, omit_defaults=True):
    """The outcome of one ``evaluate_kernel`` call (the payload of a ``kernel_evaluated`` event).

    Attributes:
        candidate: the candidate's path as given (relative to the workspace).
        candidate_sha256: hash of the source that was evaluated.
        status: correct, incorrect (a check failed), refused (forbidden import), error (it
            did not import or the harness failed), timeout.
        reason: one line saying why when not correct.
        shapes: per shape and dtype results.
        timing: wall_clock, cuda_graph, cuda_events or "not measured".
        candidate_us, baseline_us: geometric means over shapes of the median times (us).
        speedup: baseline / candidate (geometric mean over shapes); only when correct and timed.
        noise: the largest per-shape spread of the paired rounds' ratios (``measure.ratio_spread``):
            a speedup within it of another is not told apart from it.
        baseline: which baseline was timed.
        device: cpu, cuda, or "cpu (Triton interpreter)".
        tool_calls: the campaign's tool-call count when this evaluation ran.
        eval_s: seconds the evaluation took.
    """

    candidate: str
    candidate_sha256: str
    status: Status
    reason: str | None = None
    shapes: list[ShapeResult] = []
    timing: str = NOT_MEASURED
    candidate_us: float | None = None
    baseline_us: float | None = None
    speedup: float | None = None
    noise: float | None = None
    baseline: str = ""
    device: str = ""
    tool_calls: int = 0
    eval_s: float = 0.0
    notes: list[str] = []

    @property
    def correct(self) -> bool:
        """True when every check passed."""
        return self.status == "correct"


def gpu_present() -> bool:
    """Whether an NVIDIA GPU is visible (``/dev/nvidiactl``), without importing torch.

    ``MUSEC_KERNEL_DEVICE=cpu`` forces the answer to False (tests, or to keep a GPU free).
    """
    if os.environ.get("MUSEC_KERNEL_DEVICE") == "cpu":
        return False
    return Path("/dev/nvidiactl").exists()


def placement(spec: CampaignSpec) -> dict[str, Any]:
    """Where and how a spec's evaluations run on this machine (request fields for the child)."""
    if spec.device == "cpu":
        return {"torch_device": "cpu", "interpret": False, "timing_method": "wall_clock",
                "shapes": spec.shapes, "dtypes": spec.dtypes, "device": "cpu"}  # fmt: skip
    if gpu_present():
        return {"torch_device": "cuda", "interpret": False, "timing_method": "cuda_graph",
                "shapes": spec.shapes, "dtypes": spec.dtypes, "device": "cuda"}  # fmt: skip
    return {"torch_device": "cpu", "interpret": True, "timing_method": NOT_MEASURED,
            "shapes": spec.interpreter.shapes, "dtypes": spec.interpreter.dtypes,
            "device": "cpu (Triton interpreter)"}  # fmt: skip


def build_request(spec: CampaignSpec, candidate_path: Path) -> dict[str, Any]:
    """The JSON request the evaluation process reads."""
    tol = {d: spec.rel_tolerance(d) for d in [*spec.dtypes, *spec.interpreter.dtypes]}
    return {
        **placement(spec),
        "spec_dir": spec.spec_dir,
        "candidate_path": str(candidate_path),
        "entry": spec.entry,
        "reference": spec.reference,
        "baseline": list(spec.baseline),
        "inputs": spec.inputs,
        "work": spec.work,
        "forbidden": list(spec.forbidden_modules),
        "tolerance": tol,
        "abs_floor": spec.abs_floor(),
        "warmup": spec.timing.warmup,
        "repeats": spec.timing.repeats,
    }


def evaluate_kernel(
    spec: CampaignSpec,
    workspace: Path,
    path: str,
    *,
    tool_calls: int = 0,
    timeout_s: float | None = None,
    sandbox: SandboxPolicy | None = None,
    env: Mapping[str, str] | None = None,
) -> Evaluation:
    """Evaluate the candidate at ``workspace / path`` (blocking; run it in a worker thread).

    Args:
        spec: the campaign spec.
        workspace: the folder the candidate path is relative to.
        path: the candidate file (usually ``spec.candidate``).
        tool_calls: the campaign's tool-call count so far (recorded in the result).
        timeout_s: limit for the evaluation process (default ``spec.budget.eval_timeout_s``).
        sandbox, env: the session's sandbox policy and the tools' environment: the
            candidate's code runs confined like ``bash`` (``run_child``); ``None``: unconfined.

    Returns:
        The ``Evaluation``; never raises for a bad candidate.
    """
    file = (workspace / path).resolve()
    try:
        source = file.read_text()
    except OSError as exc:
        return Evaluation(path, "", "error", f"cannot read {path}: {exc.strerror}", tool_calls=tool_calls)
    sha = hashlib.sha256(source.encode()).hexdigest()
    base = {"candidate": path, "candidate_sha256": sha, "tool_calls": tool_calls}
    hits = forbidden_imports(source, spec.forbidden_modules)
    if hits:
        reason = "refused before running: forbidden import " + "; ".join(hits)
        return Evaluation(**base, status="refused", reason=reason)
    req = build_request(spec, file)
    t0 = time.monotonic()
    raw, problem = run_child(req, timeout_s or spec.budget.eval_timeout_s, cwd=workspace, sandbox=sandbox, env=env)
    wall = time.monotonic() - t0
    if problem is not None:
        status = "timeout" if problem.startswith("timed out") else "error"
        return Evaluation(**base, status=status, reason=problem, device=req["device"], eval_s=wall)
    return _from_child(raw, base, req["device"], wall)


def _from_child(raw: dict[str, Any], base: dict[str, Any], device: str, wall: float) -> Evaluation:
    shapes = [msgspec.convert(s, ShapeResult) for s in raw.get("shapes", [])]
    status = raw.get("status", "error")
    speedup = cand_us = base_us = noise = None
    timing = raw.get("timing", NOT_MEASURED) if status == "correct" else NOT_MEASURED
    if status == "correct" and timing != NOT_MEASURED:
        cand_us = geomean([s.candidate_us for s in shapes if s.candidate_us])
        base_us = geomean([s.baseline_us for s in shapes if s.baseline_us])
        speedup = geomean([s.speedup for s in shapes if s.speedup])
        noise = max((s.noise for s in shapes if s.noise is not None), default=None)
    return Evaluation(
        **base, status=status, reason=raw.get("reason"), shapes=shapes, timing=timing,
        candidate_us=cand_us, baseline_us=base_us, speedup=speedup, noise=noise,
        baseline=raw.get("baseline", ""), device=device, eval_s=wall, notes=raw.get("notes", []),
    )  # fmt: skip


def run_child(req: dict[str, Any], timeout_s: float, cwd: Path, sandbox: SandboxPolicy | None = None,
              env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str | None]:
    """Run ``child.py`` on ``req``; return ``(result, None)`` or ``({}, one-line problem)``.

    Args:
        req: the request (``build_request``).
        timeout_s: the process's limit, in seconds; its process group is killed past it.
        cwd: the workspace (the working directory).
        sandbox: the session's sandbox policy: the child runs confined like ``bash``
            (``confine.confine``); ``None`` runs it unconfined (direct calls, Ray tasks).
        env: the environment (default: this process's).
    """
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "TRITON_INTERPRET"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with tempfile.TemporaryDirectory(prefix="musec-kernel-eval-") as tmp:
        req_file, out_file, log_file = (Path(tmp) / n for n in ("req.json", "out.json", "log.txt"))
        req_file.write_text(json.dumps(req))
        cmd = [sys.executable, "-m", "musec.agents.kernel_opt.child", str(req_file), str(out_file)]
        try:
            cmd, env = confine(cmd, sandbox, cwd, tmp, env, reads=[str(req.get("spec_dir") or "")])
        except SandboxUnavailable as exc:
            return {}, f"the evaluation cannot run in the sandbox: {exc}"
        with open(log_file, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return {}, f"timed out after {timeout_s:g} s (the evaluation process was killed)"
        if out_file.is_file():
            return json.loads(out_file.read_text()), None
        tail = log_file.read_bytes()[-600:].decode(errors="replace").strip().splitlines()
        last = tail[-1] if tail else ""
        return {}, f"the evaluation process exited with status {proc.returncode} without a result: {last}"


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue

