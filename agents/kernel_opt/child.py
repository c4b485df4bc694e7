"""The evaluation process: ``python -m musec.agents.kernel_opt.child REQUEST.json RESULT.json``.

Started by ``evaluate.run_child`` in its own session with a timeout. It loads the spec's
reference, baseline and input builder, then imports and runs the candidate only inside
``guard.candidate_scope`` (forbidden modules blocked), checks it against the reference on
every shape and dtype, and, when every check passed and a clock is available, times candidate
and baseline the same way (``measure``). The result is one JSON object written to RESULT.json;
what the candidate prints goes to this process's stdout/stderr, which the parent keeps apart.

``TRITON_INTERPRET`` is set by the request before torch or triton is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def load_callable(ref: str, spec_dir: str) -> Any:
    """Resolve ``"module:attr"`` or ``"file.py:attr"`` (relative to ``spec_dir``)."""
    mod_name, _, attr = ref.rpartition(":")
    if mod_name.endswith(".py"):
        path = Path(spec_dir) / mod_name
        module = load_file(path, f"_kernel_task_{path.stem}")
    else:
        module = importlib.import_module(mod_name)
    return getattr(module, attr)


def load_file(path: Path, name: str) -> Any:
    """Import a Python file as module ``name`` (registered in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def first_baseline(refs: list[str], spec_dir: str) -> tuple[str, Any, list[str]]:
    """The first baseline that imports: ``(ref, callable, notes on the ones skipped)``."""
    notes = []
    for ref in refs:
        try:
            return ref, load_callable(ref, spec_dir), notes
        except Exception as exc:
            notes.append(f"{ref}: {type(exc).__name__}: {exc}".splitlines()[0][:200])
    raise ImportError("no baseline could be imported: " + "; ".join(notes))


def short_error(exc: BaseException, candidate: str) -> str:
    """One line for an exception, with the candidate's deepest frame when there is one."""
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == candidate:
            where = f" (candidate line {frame.lineno}: {(frame.line or '').strip()[:80]})"
    msg = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}{where}"


def evaluate(req: dict[str, Any]) -> dict[str, Any]:
    """Run one evaluation request; return the result object (see ``evaluate.Evaluation``)."""
    import torch

    from .guard import candidate_scope
    from .measure import compare

    if req["torch_device"] == "cpu":
        # One thread, for every call on both sides: results do not depend on the machine's
        # core count, and a loaded machine's thread pool cannot stall one side's timing.
        torch.set_num_threads(1)
    spec_dir, cand_path = req["spec_dir"], req["candidate_path"]
    forbidden = req["forbidden"]
    reference = load_callable(req["reference"], spec_dir)
    base_ref, baseline, notes = first_baseline(req["baseline"], spec_dir)
    make_inputs = load_callable(req["inputs"], spec_dir)
    result: dict[str, Any] = {"baseline": base_ref, "notes": notes, "shapes": []}
    try:
        with candidate_scope(forbidden):
            module = load_file(Path(cand_path), "_kernel_candidate")
            kernel = getattr(module, req["entry"])
    except BaseException as exc:  # noqa: BLE001 - the candidate's failure is the result
        return {**result, "status": "error", "reason": "import failed: " + short_error(exc, cand_path)}
    for dtype in req["dtypes"]:
        for shape in req["shapes"]:
            args, kwargs = make_inputs(shape, dtype, req["torch_device"], 0)
            ref = reference(*args, **kwargs)
            args, kwargs = make_inputs(shape, dtype, req["torch_device"], 0)
            try:
                with candidate_scope(forbidden):
                    out = kernel(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001
                reason = short_error(exc, cand_path)
                result["shapes"].append({"shape": shape, "dtype": dtype, "ok": False, "reason": reason})
                continue
            row = compare(ref, out, req["tolerance"][dtype], req["abs_floor"])
            result["shapes"].append({"shape": shape, "dtype": dtype, **row})
    if not all(s["ok"] for s in result["shapes"]):
        bad = next(s for s in result["shapes"] if not s["ok"])
        return {**result, "status": "incorrect", "reason": f"{_label(bad)}: {bad['reason']}"}
    result["status"] = "correct"
    result["timing"] = req["timing_method"]
    if req["timing_method"] != "not measured":
        _time_all(req, kernel, baseline, make_inputs, result)
    return result


def _label(row: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in row["shape"].items()) + f" {row['dtype']}"


def _time_all(req, kernel, baseline, make_inputs, result) -> None:
    import torch

    from .guard import candidate_scope
    from .measure import time_cuda, time_wall_clock

    if req["torch_device"] == "cpu":
        torch.set_num_threads(1)  # one thread for both sides: a loaded machine's pool stalls
    work = load_callable(req["work"], req["spec_dir"]) if req.get("work") else None
    warmup, repeats = req["warmup"], req["repeats"]
    for row in result["shapes"]:
        args, kwargs = make_inputs(row["shape"], row["dtype"], req["torch_device"], 0)
        base = _bound(baseline, args, kwargs)
        base()  # lets a baseline finish its lazy imports before the scope is made
        cand = _scoped(kernel, args, kwargs, candidate_scope(req["forbidden"]))
        if req["timing_method"] == "wall_clock":
            tc, tb, row["noise"] = time_wall_clock(cand, base, warmup, repeats)
            row["timing"] = "wall_clock"
        else:
            tc, tb, row["timing"], row["noise"] = time_cuda(cand, base, warmup, repeats)
        row["candidate_us"], row["baseline_us"] = tc * 1e6, tb * 1e6
        row["speedup"] = tb / tc if tc > 0 else None
        if work is not None:
            nbytes, flops = work(row["shape"], row["dtype"])
            row["GBps"], row["TFLOPs"] = nbytes / tc / 1e9, flops / tc / 1e12
    result["timing"] = result["shapes"][0].get("timing", req["timing_method"])


def _scoped(fn, args, kwargs, scope):
    def call():
        with scope:
            return fn(*args, **kwargs)

    return call


def _bound(fn, args, kwargs):
    def call():
        return fn(*args, **kwargs)

    return call


def profile(req: dict[str, Any]) -> dict[str, Any]:
    """Run the candidate at one shape under ``torch.profiler``; return its key figures as text."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from .guard import candidate_scope

    make_inputs = load_callable(req["inputs"], req["spec_dir"])
    cand_path = req["candidate_path"]
    try:
        with candidate_scope(req["forbidden"]):
            kernel = getattr(load_file(Path(cand_path), "_kernel_candidate"), req["entry"])
    except BaseException as exc:  # noqa: BLE001
        return {"status": "error", "reason": "import failed: " + short_error(exc, cand_path)}
    args, kwargs = make_inputs(req["shape"], req["dtypes"][0], req["torch_device"], 0)
    activities = [ProfilerActivity.CPU]
    if req["torch_device"] == "cuda":
        activities.append(ProfilerActivity.CUDA)
    try:
        with candidate_scope(req["forbidden"]):
            kernel(*args, **kwargs)  # warm-up: compilation and autotuning stay out of the profile
            with torch_profile(activities=activities) as prof:
                for _ in range(5):
                    kernel(*args, **kwargs)
                if req["torch_device"] == "cuda":
                    torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001
        return {"status": "error", "reason": short_error(exc, cand_path)}
    key = "self_cuda_time_total" if req["torch_device"] == "cuda" else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=key, row_limit=12, max_name_column_width=60)
    return {"status": "ok", "profiler": "torch.profiler", "table": table}


def main(argv: list[str]) -> int:
    """Read the request, evaluate, write the result; exit 0 unless the harness itself failed."""
    req_path, out_path = argv[1], argv[2]
    req = json.loads(Path(req_path).read_text())
    if req.get("interpret"):
        os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, req["spec_dir"])
    t0 = time.perf_counter()
    try:
        result = profile(req) if req.get("mode") == "profile" else evaluate(req)
    except Exception as exc:  # the spec's own helpers failed: a harness error, not the candidate's
        result = {"status": "error", "reason": "harness: " + short_error(exc, req["candidate_path"])}
    result["eval_s"] = time.perf_counter() - t0
    Path(out_path).write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
