"""Benchmarks for musec's kernels: ``python -m musec.kernels.bench kda|mla [--json PATH]``.

On a CUDA GPU, for each shape of KERNELS.md sections 0 and 5.3 it first checks the Triton
kernel against the fp32 reference at that very shape (tolerances from ``musec.kernels.testing``)
and only then times it: median kernel time under a CUDA graph (``triton.testing.
do_bench_cudagraph``), achieved GB/s and TFLOP/s next to the H200 ceilings (KERNELS.md section
4), and the speedup over the PyTorch reference and, when ``fla`` is installed, over FLA's
``chunk_kda`` (the baseline; only this benchmark may import it). A shape whose correctness check
fails gets no time and no speedup.

Without a GPU no timing is possible: it says so on one line, then runs the correctness check
on tiny shapes under the Triton interpreter (fp32).

Exit codes: 0 all checks passed; 1 a correctness check failed (or a kernel raised); 2 bad usage (argparse);
3 torch or triton is not installed.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
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


def _say(line: str) -> None:
    print(line, flush=True)


def _kda_inputs(B, T, H, D, dtype, device, seed=0):
    import torch

    F = torch.nn.functional
    gen = torch.Generator(device=device).manual_seed(seed)
    q = F.normalize(torch.rand(B, T, H, D, device=device, generator=gen), dim=-1).to(dtype)
    k = F.normalize(torch.rand(B, T, H, D, device=device, generator=gen), dim=-1).to(dtype)
    v = torch.rand(B, T, H, D, device=device, generator=gen).to(dtype)
    g = F.logsigmoid(torch.randn(B, T, H, D, device=device, generator=gen))  # fp32 log-decay
    beta = torch.randn(B, T, H, device=device, generator=gen).sigmoid().to(dtype)
    return q, k, v, g, beta


def _mla_inputs(B, H, T, dtype, device, seed=0):
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    q = (torch.randn(B, H, 576, device=device, generator=gen) / 10).to(dtype)
    kv = (torch.randn(B, T, 576, device=device, generator=gen) / 10).to(dtype)
    return q, kv


def _check_kda(B, T, H, D, dtype, device) -> tuple[str | None, tuple]:
    import torch
    from musec.kernels.kda import chunk_kda, naive_recurrent_kda
    from musec.kernels.testing import check_close, tolerance

    q, k, v, g, beta = _kda_inputs(B, T, H, D, dtype, device)
    h0 = torch.randn(B, H, D, D, device=device) * 0.1
    o_ref, s_ref = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    reason = check_close("o", o_ref, o, tolerance(dtype)) or check_close(
        "final_state", s_ref, s, tolerance(dtype)
    )
    return reason, (q, k, v, g, beta)


def _check_mla(B, H, T, dtype, device) -> tuple[str | None, tuple]:
    from musec.kernels.mla import mla_decode, mla_decode_reference
    from musec.kernels.testing import check_close, tolerance

    q, kv = _mla_inputs(B, H, T, dtype, device)
    scale = 1 / math.sqrt(192)
    out_ref, lse_ref = mla_decode_reference(q, kv, scale)
    out, lse = mla_decode(q, kv, scale)
    reason = check_close("out", out_ref, out, tolerance(dtype)) or check_close(
        "lse", lse_ref, lse, tolerance(dtype)
    )
    return reason, (q, kv, scale)


def _time_graph_us(fn: Callable[[], Any]) -> tuple[float, str]:
    """Median time of ``fn`` in microseconds: under a CUDA graph when capture works, else CUDA events."""
    import torch
    import triton.testing

    fn()  # autotune and compile outside the graph
    torch.cuda.synchronize()
    try:
        return triton.testing.do_bench_cudagraph(
            fn, rep=100, return_mode="median"
        ) * 1e3, "cuda-graph"
    except Exception:  # capture failed (host sync in fn, ...): fall back to events
        torch.cuda.synchronize()
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3, "events"


def _time_eager_us(fn: Callable[[], Any]) -> float | None:
    import torch
    import triton.testing

    try:
        return triton.testing.do_bench(fn, warmup=3, rep=50, return_mode="median") * 1e3
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None


def _row(**kw) -> dict:
    _say("  ".join(f"{k}={v}" for k, v in kw.items()))
    return kw


def bench_kda(rows: list[dict]) -> bool:
    """Time chunk_kda at KDA_SHAPES (bf16 q/k/v/beta, fp32 g). Returns False if a check failed."""
    import torch
    from musec.kernels.kda import chunk_kda, naive_chunk_kda

    try:
        from fla.ops.kda import chunk_kda as fla_chunk_kda  # baseline only; never used by kernels/
    except Exception:
        fla_chunk_kda = None
    ok = True
    for B, T, H, D in KDA_SHAPES:
        shape = f"B{B}_T{T}_H{H}_D{D}"
        reason, (q, k, v, g, beta) = _check_kda(B, T, H, D, torch.bfloat16, "cuda")
        if reason is not None:
            ok = False
            rows.append(_row(op="kda", shape=shape, impl="musec", correct=False, reason=reason))
            continue
        t_us, how = _time_graph_us(functools.partial(chunk_kda, q, k, v, g, beta))
        th = B * T * H
        flops = th * (6 * D * D + 3 * 64 * D + 64 * 64)  # report eq. 13
        nbytes = th * (4 * D * 2 + D * 4 + 2)  # q, k, v, o bf16 + fp32 g + bf16 beta
        t_ref = _time_eager_us(functools.partial(naive_chunk_kda, q, k, v, g, beta))
        t_fla = None
        fla_note = "not installed"
        if fla_chunk_kda is not None:
            try:
                o_fla, _ = fla_chunk_kda(q, k, v, g, beta)
                o_mine, _ = chunk_kda(q, k, v, g, beta)
                t_fla, _ = _time_graph_us(functools.partial(fla_chunk_kda, q, k, v, g, beta))
                fla_note = (
                    f"max|fla-musec|={float((o_fla.float() - o_mine.float()).abs().max()):.2e}"
                )
            except Exception as exc:  # report, do not crash the benchmark
                fla_note = f"failed: {type(exc).__name__}: {exc}"[:120]
        rows.append(
            _row(
                op="kda",
                shape=shape,
                impl="musec",
                correct=True,
                timing=how,
                time_us=round(t_us, 1),
                GBps=round(nbytes / t_us / 1e3, 1),
                hbm_pct=round(100 * nbytes / t_us / 1e-6 / H200_HBM_BYTES_PER_S, 1),
                TFLOPs=round(flops / t_us / 1e6, 2),
                floor_us=round(nbytes / H200_HBM_BYTES_PER_S * 1e6, 1),
                torch_ref_us=None if t_ref is None else round(t_ref, 1),
                speedup_vs_torch=None if t_ref is None else round(t_ref / t_us, 2),
                fla_us=None if t_fla is None else round(t_fla, 1),
                speedup_vs_fla=None if t_fla is None else round(t_fla / t_us, 2),
                fla=fla_note,
            )
        )
        torch.cuda.empty_cache()
    return ok


def bench_mla(rows: list[dict]) -> bool:
    """Time mla_decode at MLA_SHAPES (bf16). Returns False if a check failed."""
    import torch
    from musec.kernels.mla import mla_decode, mla_decode_reference

    ok = True
    for B, H, T in MLA_SHAPES:
        shape = f"B{B}_H{H}_T{T}"
        reason, (q, kv, scale) = _check_mla(B, H, T, torch.bfloat16, "cuda")
        if reason is not None:
            ok = False
            rows.append(_row(op="mla", shape=shape, impl="musec", correct=False, reason=reason))
            continue
        t_us, how = _time_graph_us(functools.partial(mla_decode, q, kv, scale))
        nbytes = B * T * 576 * 2 + B * H * (576 + 512) * 2
        flops = 2 * B * H * T * (576 + 512)
        t_ref = _time_eager_us(functools.partial(mla_decode_reference, q, kv, scale))
        rows.append(
            _row(
                op="mla",
                shape=shape,
                impl="musec",
                correct=True,
                timing=how,
                time_us=round(t_us, 2),
                GBps=round(nbytes / t_us / 1e3, 1),
                hbm_pct=round(100 * nbytes / t_us / 1e-6 / H200_HBM_BYTES_PER_S, 1),
                TFLOPs=round(flops / t_us / 1e6, 2),
                floor_us=round(nbytes / H200_HBM_BYTES_PER_S * 1e6, 2),
                torch_ref_us=None if t_ref is None else round(t_ref, 1),
                speedup_vs_torch=None if t_ref is None else round(t_ref / t_us, 2),
            )
        )
        torch.cuda.empty_cache()
    return ok


def cpu_check(op: str) -> bool:
    """Correctness only, fp32 and tiny shapes under the Triton interpreter."""
    import torch

    checks = {
        "kda": [
            lambda: _check_kda(1, 130, 2, 32, torch.float32, "cpu")[0],
            lambda: _check_kda(2, 64, 1, 60, torch.float32, "cpu")[0],
        ],
        "mla": [
            lambda: _check_mla(1, 64, 300, torch.float32, "cpu")[0],
            lambda: _check_mla(2, 16, 70, torch.float32, "cpu")[0],
        ],
    }[op]
    ok = True
    for i, check in enumerate(checks):
        reason = check()
        _say(
            f"{op} interpreter check {i + 1}/{len(checks)}: {'ok' if reason is None else 'FAILED: ' + reason}"
        )
        ok = ok and reason is None
    return ok


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m musec.kernels.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("op", choices=["kda", "mla"])
    parser.add_argument("--json", metavar="PATH", help="also write the result rows as JSON")
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
            ok = bench_kda(rows) if args.op == "kda" else bench_mla(rows)
    except Exception as exc:  # a kernel that raises is a failed check, reported on one line
        _say(
            f"{args.op}: kernel raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        )
        ok = False
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"op": args.op, "ok": ok, "rows": rows}, fh, indent=1)
    return EXIT_OK if ok else EXIT_INCORRECT


if __name__ == "__main__":
    sys.exit(main())
