"""Stage 0 of chunked KDA: optional gate activation, then the chunk-local cumulative log-decay.

``G_r = sum_{i <= r} g_i`` over the rows of each 64-token chunk (it restarts at every chunk and
every sequence start), per head and key channel, in fp32 (KERNELS.md section 1.6, stage 0).
With the gate in the kernel, ``g`` is raw and is first turned into a log-decay (section 1.4):
``-exp(A_log[h]) * softplus(g + dt_bias)`` (``GATE_DEFAULT``) or
``lower_bound * sigmoid(exp(A_log[h]) * (g + dt_bias))`` (``GATE_LOWER_BOUND``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import next_pow2

from .index import CHUNK, Chunking, chunk_bounds

GATE_NONE, GATE_DEFAULT, GATE_LOWER_BOUND = 0, 1, 2


@triton.jit
def _gate(x, A_log, dt_bias, i_h, cols, lower_bound, K: tl.constexpr, GATE: tl.constexpr,
          HAS_A_LOG: tl.constexpr, HAS_DT_BIAS: tl.constexpr):
    """Apply the gate activation to raw logits x [BT, BK] of head i_h (fp32 in, fp32 out)."""
    if HAS_DT_BIAS:
        x = x + tl.load(dt_bias + i_h * K + cols, mask=cols < K, other=0.0).to(tl.float32)[None, :]
    if GATE == 1:
        # -exp(A_log) * softplus(x), softplus linear above 20
        a = tl.exp(tl.load(A_log + i_h).to(tl.float32))
        sp = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
        x = -a * sp
    else:
        # lower_bound * sigmoid(exp(A_log) * x)
        if HAS_A_LOG:
            x = x * tl.exp(tl.load(A_log + i_h).to(tl.float32))
        x = lower_bound * (1.0 / (1.0 + tl.exp(-tl.maximum(x, -80.0))))
    return x


@triton.jit
def _cumsum_kernel(g, gc, A_log, dt_bias, cu_seqlens, chunk_indices, T, NT, lower_bound,
                   H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                   GATE: tl.constexpr, HAS_A_LOG: tl.constexpr, HAS_DT_BIAS: tl.constexpr,
                   IS_VARLEN: tl.constexpr):
    """Grid (chunks, H, K-tiles): gc[chunk rows, h, cols] = cumsum over rows of gate(g)."""
    i_c, i_h, i_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_t, bos, eos = chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN)
    rows = bos + i_t * BT + tl.arange(0, BT)
    cols = i_k * BK + tl.arange(0, BK)
    mask = (rows < eos)[:, None] & (cols < K)[None, :]
    offs = (rows[:, None] * H + i_h) * K + cols[None, :]
    x = tl.load(g + offs, mask=mask, other=0.0).to(tl.float32)
    if GATE != 0:
        x = _gate(x, A_log, dt_bias, i_h, cols, lower_bound, K, GATE, HAS_A_LOG, HAS_DT_BIAS)
        x = tl.where(mask, x, 0.0)
    tl.store(gc + offs, tl.cumsum(x, axis=0), mask=mask)


def chunk_local_cumsum(
    g: torch.Tensor,
    chunking: Chunking,
    gate: int = GATE_NONE,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    lower_bound: float | None = None,
) -> torch.Tensor:
    """Chunk-local cumulative log-decay (stage 0), with the gate applied first if asked.

    Args:
        g: [B, T, H, K] contiguous log-decay (natural log, <= 0; any float dtype), or raw gate
            logits when ``gate`` is not ``GATE_NONE``.
        chunking: from ``index.prepare_chunking``.
        gate: ``GATE_NONE``, ``GATE_DEFAULT`` or ``GATE_LOWER_BOUND`` (see the module docstring).
        A_log: fp32 [H] or None.
        dt_bias: fp32 [H * K] or None.
        lower_bound: the lower-bound gate's bound in [-5, 0), or None.

    Returns:
        fp32 [B * T, H, K]: ``G`` (natural log), restarting at every chunk.
    """
    B, T, H, K = g.shape
    gc = torch.empty(B * T, H, K, device=g.device, dtype=torch.float32)
    if chunking.n_chunks == 0:
        return gc
    BK = min(64, next_pow2(K))
    dummy = gc  # placeholder for absent optional pointers (never read)
    _cumsum_kernel[(chunking.n_chunks, H, triton.cdiv(K, BK))](
        g, gc,
        A_log.float().contiguous() if A_log is not None else dummy,
        dt_bias.float().contiguous() if dt_bias is not None else dummy,
        chunking.cu_seqlens, chunking.chunk_indices, chunking.T, chunking.nt,
        float(lower_bound if lower_bound is not None else 0.0),
        H=H, K=K, BT=CHUNK, BK=BK, GATE=gate,
        HAS_A_LOG=A_log is not None, HAS_DT_BIAS=dt_bias is not None,
        IS_VARLEN=chunking.varlen,
    )  # fmt: skip
    return gc
