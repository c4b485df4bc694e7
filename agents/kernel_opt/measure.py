"""Correctness metrics and timers used inside the evaluation process (imports torch lazily).

Correctness (KERNELS.md section 1.8's metric, plus what a reviewer wants to see): per output
tensor the maximum absolute error, the maximum relative error ``|d| / (|ref| + abs_floor)``,
the relative RMS error ``rms(d) / rms(ref)``, and the count of NaN/inf where the reference is
finite. A tensor passes when it has no such non-finite value and either its maximum absolute
error is at most ``abs_floor`` or its relative RMS error is below the tolerance.

Timing: candidate and baseline are timed in the same process, the same way, interleaved
(round r times both, order alternating), and each gets the median over rounds; the spread
of the per-round ratios (``ratio_spread``) says how much of a speedup is noise:
``wall_clock`` (``time.perf_counter`` around one call; the CPU example) or ``cuda_graph`` (one
call captured in a CUDA graph, replays timed with CUDA events; if either side cannot be
captured both fall back to CUDA events around eager calls).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any


def as_tensors(out: Any) -> list[Any]:
    """A callable's result as a list: a tensor -> [tensor]; a tuple/list -> its elements."""
    return list(out) if isinstance(out, tuple | list) else [out]


def compare(ref: Any, out: Any, tol: float, abs_floor: float) -> dict[str, Any]:
    """Compare every output of ``out`` with ``ref``.

    Returns:
        ``{"ok", "reason", "max_abs", "max_rel", "rel_rms", "nonfinite"}`` over all outputs
        (worst values); ``reason`` is a one-line explanation when not ok.
    """
    import torch

    refs, outs = as_tensors(ref), as_tensors(out)
    worst = {"max_abs": 0.0, "max_rel": 0.0, "rel_rms": 0.0, "nonfinite": 0}
    if len(refs) != len(outs):
        return {"ok": False, "reason": f"returned {len(outs)} outputs, reference has {len(refs)}", **worst}
    reason = None
    for i, (r, o) in enumerate(zip(refs, outs, strict=True)):
        if r is None and o is None:
            continue
        if not (isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor)):
            reason = reason or f"output {i}: expected a tensor, got {type(o).__name__}"
            continue
        if tuple(r.shape) != tuple(o.shape):
            reason = reason or f"output {i}: shape {tuple(o.shape)} != reference {tuple(r.shape)}"
            continue
        m = _metrics(r.detach().double().cpu(), o.detach().double().cpu(), abs_floor)
        for key in ("max_abs", "max_rel", "rel_rms"):
            worst[key] = max(worst[key], m[key])
        worst["nonfinite"] += m["nonfinite"]
        if m["nonfinite"]:
            reason = reason or f"output {i}: {m['nonfinite']} NaN/inf values where the reference is finite"
        elif m["max_abs"] > abs_floor and not m["rel_rms"] < tol:
            reason = reason or f"output {i}: relative RMS error {m['rel_rms']:.3e} >= {tol:.1e} (max abs {m['max_abs']:.3e})"
    return {"ok": reason is None, "reason": reason, **worst}


def _metrics(r, o, abs_floor: float) -> dict[str, Any]:
    finite = r.isfinite()
    bad = int((finite & ~o.isfinite()).sum())
    ok = finite & o.isfinite()
    if not bool(ok.any()):
        return {"max_abs": 0.0, "max_rel": 0.0, "rel_rms": 0.0, "nonfinite": bad}
    d = (r[ok] - o[ok]).abs()
    ref_abs = r[ok].abs()
    rms_ref = float(r[ok].pow(2).mean().sqrt())
    return {
        "max_abs": float(d.max()),
        "max_rel": float((d / (ref_abs + abs_floor)).max()),
        "rel_rms": float(d.pow(2).mean().sqrt()) / max(rms_ref, 1e-30),
        "nonfinite": bad,
    }


def ratio_spread(tc: list[float], tb: list[float]) -> float:
    """The noise of a speedup measured in paired rounds: half the interquartile range of the
    per-round ratios ``tb[r] / tc[r]``, relative to their median (0.05: about +-5 %).
    0.0 with fewer than 4 rounds (too few to tell)."""
    ratios = sorted(b / c for c, b in zip(tc, tb, strict=True) if c > 0)
    if len(ratios) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return (q3 - q1) / 2 / statistics.median(ratios)


def time_wall_clock(
    cand: Callable[[], Any], base: Callable[[], Any], warmup: int, repeats: int
) -> tuple[float, float, float]:
    """Median wall-clock seconds of one call of each, interleaved (CPU), and the
    ``ratio_spread`` of the rounds.

    A sample is ``k`` back-to-back calls (``k`` chosen per callable so a sample lasts about a
    millisecond) divided by ``k``, so fast calls are not lost in the clock's resolution.
    """
    for _ in range(warmup):
        cand()
        base()
    k_c, k_b = _calls_per_sample(cand), _calls_per_sample(base)
    tc: list[float] = []
    tb: list[float] = []
    for r in range(repeats):
        order = ((cand, k_c, tc), (base, k_b, tb))
        for fn, k, acc in order if r % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            acc.append((time.perf_counter() - t0) / k)
    return statistics.median(tc), statistics.median(tb), ratio_spread(tc, tb)


def _calls_per_sample(fn: Callable[[], Any], target_s: float = 1e-3) -> int:
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    return max(1, min(1000, math.ceil(target_s / max(t, 1e-7))))


def time_cuda(
    cand: Callable[[], Any], base: Callable[[], Any], warmup: int, repeats: int
) -> tuple[float, float, str, float]:
    """Median seconds of one call of each on the GPU (CUDA graphs for both, or events for
    both), the method, and the ``ratio_spread`` of the rounds."""
    import torch

    for _ in range(max(1, warmup)):
        cand()
        base()
    torch.cuda.synchronize()
    try:
        runners = [_graph_runner(cand), _graph_runner(base)]
        method = "cuda_graph"
    except Exception:  # capture failed on either side: both eager under events
        torch.cuda.synchronize()
        runners, method = [cand, base], "cuda_events"
    times: list[list[float]] = [[], []]
    for r in range(repeats):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[i].append(_event_time_s(runners[i], iters=10))
    return statistics.median(times[0]), statistics.median(times[1]), method, ratio_spread(times[0], times[1])


def _graph_runner(fn: Callable[[], Any]) -> Callable[[], Any]:
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _event_time_s(run: Callable[[], Any], iters: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def geomean(xs: list[float]) -> float | None:
    """Geometric mean of positive numbers, or None for an empty list."""
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None
