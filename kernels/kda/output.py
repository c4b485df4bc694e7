"""Stage 4 of chunked KDA: the output of every chunk, in parallel over chunks.

With h[t] the state entering chunk [t] and V_new its pseudo-values (KERNELS.md section 1.6,
stage 4; Kimi Linear tech report eq. 9):

    O = scale * (exp(G) * Q) h[t]  +  Aqk V_new

(``scale`` is already folded into Aqk.) One program per (chunk, head, V-tile).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import next_pow2, tune_configs

from .index import CHUNK, Chunking, chunk_bounds, dot_precision, load_rows, store_rows


def _output_configs():
    return tune_configs(
        [triton.Config({"BV": bv}, num_warps=w) for bv in (64, 32) for w in (4, 8)]
    )


@triton.autotune(configs=_output_configs(), key=["K", "V", "PREC"])
@triton.jit
def _output_kernel(q, gc, h, v_new, Aqk, o, cu_seqlens, chunk_indices, T, NT, scale,
                   H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                   BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr,
                   IS_VARLEN: tl.constexpr):
    """Grid (chunks, H, V-tiles): o rows of one chunk and head, columns of one V-tile."""
    i_c, i_h, i_v = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_t, bos, eos = chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    c0 = i_v * BV
    dt = v_new.dtype.element_ty
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = c0 + tl.arange(0, BV)
    s_offs = ((tl.cast(i_c, tl.int64) * H + i_h) * K + o_k[:, None]) * V + o_v[None, :]
    s = tl.load(h + s_offs, mask=(o_k < K)[:, None] & (o_v < V)[None, :], other=0.0)
    qg = load_rows(q, t0, eos, i_h, 0, H, K, BT, BK)
    qg = qg * tl.exp(load_rows(gc, t0, eos, i_h, 0, H, K, BT, BK)) * scale
    rows = t0 + o_t
    a_mask = (rows < eos)[:, None] & (o_t[None, :] <= o_t[:, None])
    a = tl.load(Aqk + (rows[:, None] * H + i_h) * BT + o_t[None, :], mask=a_mask, other=0.0)
    vn = load_rows(v_new, t0, eos, i_h, c0, H, V, BT, BV).to(dt)
    out = tl.dot(qg.to(dt), s, input_precision=PREC)
    out += tl.dot(a.to(dt), vn, input_precision=PREC)
    store_rows(o, out, t0, eos, i_h, c0, H, V, BT, BV)


def chunk_output(
    q: torch.Tensor,
    gc: torch.Tensor,
    h: torch.Tensor,
    v_new: torch.Tensor,
    Aqk: torch.Tensor,
    scale: float,
    chunking: Chunking,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """Output of every chunk (stage 4).

    Args:
        q: [B, T, H, K] contiguous queries.
        gc: fp32 [B * T, H, K] chunk-local cumulative log-decay.
        h: [n_chunks, H, K, V] state entering each chunk (``chunk_state``).
        v_new: [B * T, H, V] pseudo-values (``chunk_state``).
        Aqk: [B * T, H, 64] scaled intra-chunk scores (``chunk_kda_fwd_intra``).
        scale: query scale.
        chunking: from ``index.prepare_chunking``.
        out_dtype: dtype of the output (v's dtype).

    Returns:
        o [B, T, H, V] in ``out_dtype``.
    """
    B, T, H, K = q.shape
    V = v_new.shape[-1]
    o = torch.empty(B, T, H, V, device=q.device, dtype=out_dtype)

    def grid(meta):
        return (chunking.n_chunks, H, triton.cdiv(V, meta["BV"]))

    _output_kernel[grid](
        q, gc, h, v_new, Aqk, o, chunking.cu_seqlens, chunking.chunk_indices, chunking.T,
        chunking.nt, scale, H=H, K=K, V=V, BT=CHUNK, BK=next_pow2(K),
        PREC=dot_precision(q.dtype), IS_VARLEN=chunking.varlen,
    )
    return o
