"""Benchmarks for musec's kernels: ``python -m musec.kernels.bench kda|mla [--json PATH] [--rounds N]``.

On a CUDA GPU, for each shape of KERNELS.md sections 0 and 5.3 it builds one call per
implementation with the very same arguments (ours; the PyTorch reference ``naive_chunk_kda`` or
``mla_decode_reference``; FLA's ``chunk_kda`` when ``fla`` is installed, the only place it may
be imported), checks each call's output against the fp32 oracle at that shape (tolerances from
``musec.kernels.testing``), and then times exactly those calls, no other variant:

- every call the same way: median kernel time under a CUDA graph
  (``triton.testing.do_bench_cudagraph``); if any call cannot be captured, all of them are
  timed with CUDA events instead, and the row says which method was used;
- interleaved: ``--rounds`` rounds, each timing every call once in a rotated order; the speedup
  of a baseline is the median over rounds of ``t_baseline / t_ours`` (min and max printed);
- achieved GB/s and TFLOP/s next to the H200 ceilings (KERNELS.md section 4).

A call whose correctness check fails gets no time and no speedup (for ours: the shape fails).

Without a GPU no timing is possible: it says so on one line, then runs the same checks on tiny
shapes under the Triton interpreter (fp32).

Exit codes: 0 all checks of our kernels passed; 1 a check failed (or a kernel raised); 2 bad
usage (argparse); 3 torch or triton is not installed.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

#: H200 SXM ceilings (KERNELS.md section 4).
H200_HBM_BYTES_PER_S = 4.8e12
H200_BF16_FLOP_PER_S = 989e12

EXIT_OK, EXIT_INCORRECT, EXIT_NO_TORCH = 0, 1, 3

#: (B, T, H, D) for KDA: the goal shapes of section 0, then FLA's registry shapes (section 5.3).
KDA_SHAPES = [
    (1, 8192, 64, 128),
    (1, 8192, 96, 128),
    (1, 4096, 16, 128),
    (2, 16384, 16, 128),
    (4, 2048, 16, 128),
    (4, 4096, 64, 128),
    (8, 2048, 32, 256),
    (8, 1024, 8, 64),
]
#: (B, H, T) for MLA: the case-study shape, the bandwidth goal shape, FlashMLA's benchmark shapes.
MLA_SHAPES = [(1, 64, 8192), (64, 64, 8192), (128, 16, 4096), (128, 128, 8192)]
#: Tiny shapes checked under the interpreter (CPU, fp32).
KDA_CPU_SHAPES = [(1, 130, 2, 32), (2, 64, 1, 60)]
MLA_CPU_SHAPES = [(1, 64, 300), (2, 16, 70)]

OURS = "musec"


def _say(line: str) -> None:
    print(line, flush=True)


class Case:
    """One benchmark shape: the oracle's outputs, the calls to check and time, the work done.

    Attributes:
        shape: a label such as ``B1_T8192_H64_D128``.
        ref: the fp32 oracle's outputs (a tuple of tensors).
        names: output names, one per element of ``ref`` (``o``, ``final_state``, ...).
        calls: implementation name -> zero-argument callable; every call gets the same inputs.
        nbytes: compulsory HBM bytes of one call.
        flops: floating-point operations of one call.
        tol: relative RMS tolerance for the inputs' dtype.
    """

    def __init__(self, shape, ref, names, calls, nbytes, flops, tol):
        self.shape, self.ref, self.names, self.calls = shape, ref, names, calls
        self.nbytes, self.flops, self.tol = nbytes, flops, tol


def kda_case(B: int, T: int, H: int, D: int, dtype: Any, device: str, seed: int = 0) -> Case:
    """KDA inputs (FLA's recipe, KERNELS.md section 1.8), the oracle, and the calls to compare.

    Every call is ``fn(q, k, v, g, beta, initial_state=h0, output_final_state=True)`` with q, k,
    v, beta in ``dtype``, g and h0 fp32; the oracle is ``naive_recurrent_kda``.
    """
    import torch
    from musec.kernels.kda import chunk_kda, naive_chunk_kda, naive_recurrent_kda
    from musec.kernels.testing import tolerance

    F = torch.nn.functional
    gen = torch.Generator(device=device).manual_seed(seed)
    q = F.normalize(torch.rand(B, T, H, D, device=device, generator=gen), dim=-1).to(dtype)
    k = F.normalize(torch.rand(B, T, H, D, device=device, generator=gen), dim=-1).to(dtype)
    v = torch.rand(B, T, H, D, device=device, generator=gen).to(dtype)
    g = F.logsigmoid(torch.randn(B, T, H, D, device=device, generator=gen))  # fp32 log-decay
    beta = torch.randn(B, T, H, device=device, generator=gen).sigmoid().to(dtype)
    h0 = torch.randn(B, H, D, D, device=device, generator=gen) * 0.1
    args = (q, k, v, g, beta)
    kw = {"initial_state": h0, "output_final_state": True}
    impls = {OURS: chunk_kda, "torch": naive_chunk_kda}
    if device != "cpu":
        try:
            from fla.ops.kda import chunk_kda as fla_chunk_kda  # the baseline; never in kernels
        except Exception:
            fla_chunk_kda = None
        if fla_chunk_kda is not None:
            impls["fla"] = fla_chunk_kda
    calls = {name: functools.partial(fn, *args, **kw) for name, fn in impls.items()}
    ref = naive_recurrent_kda(*args, **kw)
    th = B * T * H
    flops = th * (6 * D * D + 3 * 64 * D + 64 * 64)  # report eq. 13
    nbytes = th * (4 * D * 2 + D * 4 + 2) + 2 * B * H * D * D * 4  # q,k,v,o bf16; g fp32; states
    shape = f"B{B}_T{T}_H{H}_D{D}"
    return Case(shape, ref, ("o", "final_state"), calls, nbytes, flops, tolerance(dtype))


def mla_case(B: int, H: int, T: int, dtype: Any, device: str, seed: int = 0) -> Case:
    """MLA decode inputs (``randn / 10``, KERNELS.md section 2.4), the oracle, and the calls.

    Every call is ``fn(q, kv, 1/sqrt(192))``; the oracle is ``mla_decode_reference`` in fp32
    (the ``torch`` baseline is the same function on the benchmark's dtype).
    """
    import torch
    from musec.kernels.mla import mla_decode, mla_decode_reference
    from musec.kernels.testing import tolerance

    gen = torch.Generator(device=device).manual_seed(seed)
    q = (torch.randn(B, H, 576, device=device, generator=gen) / 10).to(dtype)
    kv = (torch.randn(B, T, 576, device=device, generator=gen) / 10).to(dtype)
    scale = 1 / math.sqrt(192)
    impls = {OURS: mla_decode, "torch": mla_decode_reference}
    calls = {name: functools.partial(fn, q, kv, scale) for name, fn in impls.items()}
    ref = mla_decode_reference(q.float(), kv.float(), scale)
    nbytes = B * T * 576 * 2 + B * H * (576 + 512) * 2
    flops = 2 * B * H * T * (576 + 512)
    return Case(f"B{B}_H{H}_T{T}", ref, ("out", "lse"), calls, nbytes, flops, tolerance(dtype))


def check_calls(case: Case) -> dict[str, str | None]:
    """Run every call once and compare its outputs with the oracle: name -> None or a reason."""
    from musec.kernels.testing import check_close

    reasons: dict[str, str | None] = {}
    for name, fn in case.calls.items():
        try:
            outs = fn()
        except Exception as exc:  # a baseline that raises is reported, not fatal
            reasons[name] = f"raised {type(exc).__name__}: {str(exc)[:100]}"
            continue
        reason = None
        for label, r, o in zip(case.names, case.ref, outs, strict=True):
            reason = reason or check_close(label, r, o.to(r.dtype), case.tol)
        reasons[name] = reason
    return reasons


def cuda_timers() -> tuple[Callable[[Callable[[], Any]], float], Callable[[Callable[[], Any]], float]]:
    """The two GPU timers, each returning a median in milliseconds: CUDA graph, CUDA events."""
    import triton.testing

    def graph(fn):
        return triton.testing.do_bench_cudagraph(fn, rep=50, return_mode="median")

    def events(fn):
        return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")

    return graph, events


def time_interleaved(
    calls: dict[str, Callable[[], Any]], rounds: int, timers: tuple | None = None
) -> tuple[dict[str, list[float]], str]:
    """Time every call ``rounds`` times, rotating the order each round, all by the same method.

    Args:
        calls: implementation name -> zero-argument callable.
        rounds: rounds of timing (each times every call once).
        timers: ``(graph, events)`` timers in milliseconds; default ``cuda_timers()``.

    Returns:
        ``(times_us, method)``: name -> one median time (microseconds) per round, and
        ``"cuda-graph"`` or, when any call cannot be captured in a CUDA graph, ``"events"``
        for all of them (never a mix).
    """
    graph, events = timers or cuda_timers()
    method, bench = "cuda-graph", graph
    try:
        for fn in calls.values():
            graph(fn)  # warm-up capture of each call
    except Exception:  # capture failed (a host sync in a call, ...): events for every call
        method, bench = "events", events
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(bench(calls[name]) * 1e3)
    return times, method


def _row(**kw) -> dict:
    _say("  ".join(f"{k}={v}" for k, v in kw.items()))
    return kw


def bench_case(case: Case, op: str, rounds: int, rows: list[dict]) -> bool:
    """Check, then time, one shape; append one row per implementation. False if ours failed."""
    import torch

    reasons = check_calls(case)
    for name, reason in reasons.items():
        if reason is not None:
            rows.append(_row(op=op, shape=case.shape, impl=name, correct=False, reason=reason))
    if reasons[OURS] is not None:
        return False
    timed = {name: fn for name, fn in case.calls.items() if reasons[name] is None}
    times, method = time_interleaved(timed, rounds)
    ours = times[OURS]
    t_us = statistics.median(ours)
    rows.append(
        _row(op=op, shape=case.shape, impl=OURS, correct=True, timing=method,
             time_us=round(t_us, 2), GBps=round(case.nbytes / t_us / 1e3, 1),
             hbm_pct=round(100 * case.nbytes / (t_us * 1e-6) / H200_HBM_BYTES_PER_S, 1),
             TFLOPs=round(case.flops / t_us / 1e6, 2),
             floor_us=round(case.nbytes / H200_HBM_BYTES_PER_S * 1e6, 2))
    )  # fmt: skip
    for name, ts in times.items():
        if name == OURS:
            continue
        ratios = sorted(b / a for a, b in zip(ours, ts, strict=True))
        rows.append(
            _row(op=op, shape=case.shape, impl=name, correct=True, timing=method,
                 time_us=round(statistics.median(ts), 2),
                 speedup_of_musec=round(statistics.median(ratios), 3),
                 speedup_min=round(ratios[0], 3), speedup_max=round(ratios[-1], 3))
        )  # fmt: skip
    torch.cuda.empty_cache()
    return True


def bench_gpu(op: str, rounds: int, rows: list[dict]) -> bool:
    """Check and time every shape of ``op`` in bf16 on the GPU. False if one of ours failed."""
    import torch

    ok = True
    if op == "kda":
        cases = (lambda s=s: kda_case(*s, torch.bfloat16, "cuda") for s in KDA_SHAPES)
    else:
        cases = (lambda s=s: mla_case(*s, torch.bfloat16, "cuda") for s in MLA_SHAPES)
    for make in cases:
        ok = bench_case(make(), op, rounds, rows) and ok
    return ok


def cpu_check(op: str) -> bool:
    """Correctness only, fp32 and tiny shapes under the Triton interpreter (every call checked)."""
    import torch

    if op == "kda":
        cases = [functools.partial(kda_case, *s, torch.float32, "cpu") for s in KDA_CPU_SHAPES]
    else:
        cases = [functools.partial(mla_case, *s, torch.float32, "cpu") for s in MLA_CPU_SHAPES]
    ok = True
    for i, make in enumerate(cases):
        case = make()
        reasons = check_calls(case)
        failed = [f"{name}: {why}" for name, why in reasons.items() if why is not None]
        verdict = "ok" if not failed else "FAILED: " + "; ".join(failed)
        _say(f"{op} interpreter check {i + 1}/{len(cases)} {case.shape} ({', '.join(reasons)}): {verdict}")
        ok = ok and not failed
    return ok


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m musec.kernels.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("op", choices=["kda", "mla"])
    parser.add_argument("--json", metavar="PATH", help="also write the result rows as JSON")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (GPU)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError as exc:
        _say(f"musec.kernels.bench needs torch and triton (pip install 'musec[kernels]'): {exc}")
        return EXIT_NO_TORCH
    gpu = torch.cuda.is_available()
    if not gpu:
        # Must happen before triton is first imported (triton.language defines jit functions).
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        _say(f"musec.kernels.bench needs torch and triton (pip install 'musec[kernels]'): {exc}")
        return EXIT_NO_TORCH
    rows: list[dict] = []
    try:
        if not gpu:
            _say(
                f"no CUDA GPU: no timing is possible here; running the {args.op} correctness check only (Triton interpreter, fp32, tiny shapes)"
            )
            ok = cpu_check(args.op)
        else:
            _say(
                f"device: {torch.cuda.get_device_name()}; ceilings quoted are the H200's (4.8 TB/s HBM, 989 TFLOP/s bf16)"
            )
            ok = bench_gpu(args.op, max(1, args.rounds), rows)
    except Exception as exc:  # a kernel that raises is a failed check, reported on one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        _say(f"{args.op}: kernel raised {type(exc).__name__}: {first}")
        ok = False
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"op": args.op, "ok": ok, "rows": rows}, fh, indent=1)
    return EXIT_OK if ok else EXIT_INCORRECT


if __name__ == "__main__":
    sys.exit(main())
