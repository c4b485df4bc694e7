"""``profile_kernel``: the profiler's key figures for a candidate at one shape, or a plain "none".

On the CPU (a ``cpu`` spec) and on a GPU the candidate runs five times under ``torch.profiler``
in a separate process (the same guard and timeout as ``evaluate_kernel``) and the answer is its
table of operators and kernels by self time. Under the Triton interpreter (a ``cuda`` spec on
a machine without a GPU) there is nothing to profile and the answer says so; Triton's proton
and Nsight Compute need a GPU and are not used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .evaluate import build_request, run_child
from .guard import forbidden_imports
from .spec import CampaignSpec, shape_label

NO_PROFILER = (
    "no profiler available: there is no GPU on this machine, so the kernel runs under the Triton "
    "interpreter, where neither proton nor Nsight Compute can measure anything; "
    "use evaluate_kernel for correctness"
)


def profile_kernel(spec: CampaignSpec, workspace: Path, path: str, shape: int = 0, *,
                   sandbox: Any = None, env: Any = None) -> tuple[str, bool]:
    """Profile the candidate at ``workspace / path`` on shape number ``shape``.

    Returns:
        ``(text, is_error)``: the profiler's table (or why there is none) and whether that is
        an error the model should fix (bad shape index, forbidden import, failed run).
    """
    req = build_request(spec, (workspace / path).resolve())
    if req["interpret"]:
        return NO_PROFILER, False
    shapes = req["shapes"]
    if not 0 <= shape < len(shapes):
        return f"shape must be 0..{len(shapes) - 1} (the spec's shapes: {', '.join(shape_label(s) for s in shapes)})", True
    try:
        source = (workspace / path).read_text()
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}", True
    hits = forbidden_imports(source, spec.forbidden_modules)
    if hits:
        return "refused before running: forbidden import " + "; ".join(hits), True
    req.update(mode="profile", shape=shapes[shape])
    raw, problem = run_child(req, spec.budget.eval_timeout_s, cwd=workspace, sandbox=sandbox, env=env)
    if problem is not None:
        return problem, True
    if raw.get("status") != "ok":
        return raw.get("reason", "profiling failed"), True
    head = f"{raw['profiler']} on {req['device']}, {shape_label(shapes[shape])} {req['dtypes'][0]}, 5 calls:"
    return head + "\n" + raw["table"], False
