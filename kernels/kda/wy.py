"""Stage 2 of chunked KDA: the WY factors ``W`` and ``U`` of every chunk.

With ``M = (I + Akk)^-1`` from the intra-chunk stage (KERNELS.md section 1.6, stage 2;
Kimi Linear tech report eq. 7):

    W = M diag(beta) (exp(G) * K)      [C, K]
    U = M diag(beta) V                 [C, V]

One program per (chunk, head); each is a [64, 64] x [64, tile] product per K- and V-tile.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import next_pow2, tune_configs

from .index import CHUNK, Chunking, chunk_bounds, dot_precision, load_rows, load_scalars, store_rows


@triton.jit
def _load_lower(ptr, t0, eos, i_h, H: tl.constexpr, BT: tl.constexpr):
    """Load a chunk's [BT, BT] fp32 matrix from [tokens, H, BT] rows, keeping columns <= row."""
    o_t = tl.arange(0, BT)
    rows = t0 + o_t
    mask = (rows < eos)[:, None] & (o_t[None, :] <= o_t[:, None])
    offs = (rows[:, None] * H + i_h) * BT + o_t[None, :]
    return tl.load(ptr + offs, mask=mask, other=0.0).to(tl.float32)


def _wy_configs():
    return tune_configs([triton.Config({"BK": bk}, num_warps=w) for bk in (64, 32) for w in (4, 8)])


@triton.autotune(configs=_wy_configs(), key=["K", "V", "PREC"])
@triton.jit
def _wy_kernel(k, v, gc, beta, M, W, U, cu_seqlens, chunk_indices, T, NT, H: tl.constexpr,
               K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
               BV: tl.constexpr, PREC: tl.constexpr, IS_VARLEN: tl.constexpr):
    """Grid (chunks, H): W and U rows of one chunk."""
    i_c, i_h = tl.program_id(0), tl.program_id(1)
    i_n, i_t, bos, eos = chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    m = _load_lower(M, t0, eos, i_h, H, BT)
    b = load_scalars(beta, t0, eos, i_h, H, BT)[:, None]
    for i_k in range(0, tl.cdiv(K, BK)):
        c0 = i_k * BK
        kt = load_rows(k, t0, eos, i_h, c0, H, K, BT, BK)
        gt = load_rows(gc, t0, eos, i_h, c0, H, K, BT, BK)
        w = tl.dot(m, kt * tl.exp(gt) * b, input_precision=PREC)
        store_rows(W, w, t0, eos, i_h, c0, H, K, BT, BK)
    for i_v in range(0, tl.cdiv(V, BV)):
        c0 = i_v * BV
        vt = load_rows(v, t0, eos, i_h, c0, H, V, BT, BV)
        u = tl.dot(m, vt * b, input_precision=PREC)
        store_rows(U, u, t0, eos, i_h, c0, H, V, BT, BV)


def recompute_w_u(
    k: torch.Tensor,
    v: torch.Tensor,
    gc: torch.Tensor,
    beta: torch.Tensor,
    M: torch.Tensor,
    chunking: Chunking,
) -> tuple[torch.Tensor, torch.Tensor]:
    """WY factors of every chunk (stage 2).

    Args:
        k: [B, T, H, K] contiguous keys (fp32/fp16/bf16).
        v: [B, T, H, V] contiguous values, k's dtype.
        gc: fp32 [B * T, H, K] chunk-local cumulative log-decay.
        beta: [B, T, H] contiguous.
        M: fp32 [B * T, H, 64] lower-triangular inverse from ``chunk_kda_fwd_intra``.
        chunking: from ``index.prepare_chunking``.

    Returns:
        ``(W, U)``: W [B * T, H, K] and U [B * T, H, V], both in k's dtype.
    """
    B, T, H, K = k.shape
    V = v.shape[-1]
    W = torch.empty(B * T, H, K, device=k.device, dtype=k.dtype)
    U = torch.empty(B * T, H, V, device=k.device, dtype=k.dtype)
    _wy_kernel[(chunking.n_chunks, H)](
        k, v, gc, beta, M, W, U, chunking.cu_seqlens, chunking.chunk_indices, chunking.T,
        chunking.nt, H=H, K=K, V=V, BT=CHUNK, BV=min(64, next_pow2(V)),
        PREC=dot_precision(k.dtype), IS_VARLEN=chunking.varlen,
    )
    return W, U
