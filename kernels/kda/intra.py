"""Stage 1 of chunked KDA: the intra-chunk matrices ``Aqk`` and ``M = (I + Akk)^-1``.

For one chunk of C = 64 rows and one head, with ``G`` the chunk-local cumulative log-decay
(KERNELS.md section 1.6, stages 1 and 1b):

    Akk[r, i] = beta_r * sum_d K[r, d] K[i, d] exp(G_r[d] - G_i[d])     i < r
    Aqk[r, i] = scale  * sum_d Q[r, d] K[i, d] exp(G_r[d] - G_i[d])     i <= r
    M         = (I + Akk)^-1                                            unit lower triangular

The per-channel decay cannot be factored out of a plain matmul without overflow, so the chunk
is tiled into four 16-row sub-blocks: an off-diagonal block (I, J), J < I, uses the first row
of I as its reference point so both factors ``exp(G_r - G_ref)`` and ``exp(G_ref - G_i)`` are
<= 1 and the block is one matmul; a diagonal block is evaluated exactly per channel. ``M`` is
forward substitution on the four diagonal blocks, then block merging
``M_IJ = -M_II sum_{J <= L < I} Akk_IL M_LJ`` in IEEE fp32 (its errors feed every output).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import tune_configs

from .index import (
    CHUNK,
    SUB,
    Chunking,
    chunk_bounds,
    dot_precision,
    load_g,
    load_rows,
    load_scalars,
    load_vec,
)


@triton.jit
def _sub_tiles(ptr, t0, eos, i_h, c0, H: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
               BD: tl.constexpr):
    """The four [BC, BD] sub-block tiles of a chunk starting at row t0."""
    x0 = load_rows(ptr, t0, eos, i_h, c0, H, D, BC, BD)
    x1 = load_rows(ptr, t0 + BC, eos, i_h, c0, H, D, BC, BD)
    x2 = load_rows(ptr, t0 + 2 * BC, eos, i_h, c0, H, D, BC, BD)
    x3 = load_rows(ptr, t0 + 3 * BC, eos, i_h, c0, H, D, BC, BD)
    return x0, x1, x2, x3


@triton.jit
def _sub_g(gc, t0, eos, last, i_h, c0, H: tl.constexpr, K: tl.constexpr, BC: tl.constexpr,
           BK: tl.constexpr):
    """Decay tiles of the four sub-blocks, and the reference rows of blocks 1..3."""
    g_last = load_vec(gc, last, i_h, c0, H, K, BK)
    g0 = load_g(gc, t0, eos, i_h, c0, g_last, H, K, BC, BK)
    g1 = load_g(gc, t0 + BC, eos, i_h, c0, g_last, H, K, BC, BK)
    g2 = load_g(gc, t0 + 2 * BC, eos, i_h, c0, g_last, H, K, BC, BK)
    g3 = load_g(gc, t0 + 3 * BC, eos, i_h, c0, g_last, H, K, BC, BK)
    # reference rows: first row of blocks 1..3, clamped to the last valid row
    r1 = load_vec(gc, tl.minimum(t0 + BC, last), i_h, c0, H, K, BK)
    r2 = load_vec(gc, tl.minimum(t0 + 2 * BC, last), i_h, c0, H, K, BK)
    r3 = load_vec(gc, tl.minimum(t0 + 3 * BC, last), i_h, c0, H, K, BK)
    return g0, g1, g2, g3, r1, r2, r3


@triton.jit
def _acc_diag(kk_acc, qk_acc, k_i, q_i, g_i, BC: tl.constexpr):
    """Add one K-tile's exact per-channel Akk and Aqk terms of a diagonal sub-block."""
    r = tl.arange(0, BC)
    causal = (r[:, None] >= r[None, :])[:, :, None]  # [r, i, 1]
    arg = g_i[:, None, :] - g_i[None, :, :]  # G_r - G_i, <= 0 where i <= r
    e = tl.where(causal, tl.exp(tl.where(causal, arg, 0.0)), 0.0)
    kk_acc += tl.sum(k_i[:, None, :] * k_i[None, :, :] * e, axis=2)
    qk_acc += tl.sum(q_i[:, None, :] * k_i[None, :, :] * e, axis=2)
    return kk_acc, qk_acc


@triton.jit
def _acc_off(kk_acc, qk_acc, k_i, q_i, g_i, k_j, g_j, ref, PREC: tl.constexpr):
    """Add one K-tile's Akk and Aqk terms of block (I, J), J < I, with reference row ``ref``."""
    fr = tl.exp(g_i - ref[None, :])  # <= 1: rows of I come at or after the reference
    fc = tl.exp(ref[None, :] - g_j)  # <= 1: rows of J come before it
    kc = tl.trans(k_j * fc)
    kk_acc += tl.dot(k_i * fr, kc, input_precision=PREC)
    qk_acc += tl.dot(q_i * fr, kc, input_precision=PREC)
    return kk_acc, qk_acc


@triton.jit
def _scores(q, k, gc, t0, eos, last, i_h, H: tl.constexpr, K: tl.constexpr, BC: tl.constexpr,
            BK: tl.constexpr, PREC: tl.constexpr):
    """Unscaled Akk and Aqk sub-blocks of one chunk: diagonals 0..3, then (1,0) (2,0) (2,1) (3,0) (3,1) (3,2)."""
    z = tl.zeros([BC, BC], dtype=tl.float32)
    D0, D1, D2, D3, A10, A20, A21, A30, A31, A32 = z, z, z, z, z, z, z, z, z, z
    Q0, Q1, Q2, Q3, Q10, Q20, Q21, Q30, Q31, Q32 = z, z, z, z, z, z, z, z, z, z
    for i_k in range(0, tl.cdiv(K, BK)):
        c0 = i_k * BK
        k0, k1, k2, k3 = _sub_tiles(k, t0, eos, i_h, c0, H, K, BC, BK)
        q0, q1, q2, q3 = _sub_tiles(q, t0, eos, i_h, c0, H, K, BC, BK)
        g0, g1, g2, g3, r1, r2, r3 = _sub_g(gc, t0, eos, last, i_h, c0, H, K, BC, BK)
        D0, Q0 = _acc_diag(D0, Q0, k0, q0, g0, BC)
        D1, Q1 = _acc_diag(D1, Q1, k1, q1, g1, BC)
        D2, Q2 = _acc_diag(D2, Q2, k2, q2, g2, BC)
        D3, Q3 = _acc_diag(D3, Q3, k3, q3, g3, BC)
        A10, Q10 = _acc_off(A10, Q10, k1, q1, g1, k0, g0, r1, PREC)
        A20, Q20 = _acc_off(A20, Q20, k2, q2, g2, k0, g0, r2, PREC)
        A21, Q21 = _acc_off(A21, Q21, k2, q2, g2, k1, g1, r2, PREC)
        A30, Q30 = _acc_off(A30, Q30, k3, q3, g3, k0, g0, r3, PREC)
        A31, Q31 = _acc_off(A31, Q31, k3, q3, g3, k1, g1, r3, PREC)
        A32, Q32 = _acc_off(A32, Q32, k3, q3, g3, k2, g2, r3, PREC)
    return (D0, D1, D2, D3, A10, A20, A21, A30, A31, A32,
            Q0, Q1, Q2, Q3, Q10, Q20, Q21, Q30, Q31, Q32)


@triton.jit
def _inv_unit_lower(D, BC: tl.constexpr):
    """Inverse of (I + D) for a strictly lower-triangular [BC, BC] fp32 block, by forward substitution."""
    r = tl.arange(0, BC)
    X = (r[:, None] == r[None, :]).to(tl.float32)
    for i in tl.static_range(1, BC):
        a = tl.sum(tl.where(r[:, None] == i, D, 0.0), axis=0)  # row i of D, over columns j
        new = tl.where(r == i, 1.0, 0.0) - tl.sum(a[:, None] * X, axis=0)
        X = tl.where(r[:, None] == i, new[None, :], X)
    return X


@triton.jit
def _dot(a, b):
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _solve(D0, D1, D2, D3, A10, A20, A21, A30, A31, A32, BC: tl.constexpr):
    """Blocks of M = (I + Akk)^-1 from Akk's strictly-lower diagonal blocks and its off-diagonal blocks."""
    M00 = _inv_unit_lower(D0, BC)
    M11 = _inv_unit_lower(D1, BC)
    M22 = _inv_unit_lower(D2, BC)
    M33 = _inv_unit_lower(D3, BC)
    M10 = -_dot(M11, _dot(A10, M00))
    M21 = -_dot(M22, _dot(A21, M11))
    M32 = -_dot(M33, _dot(A32, M22))
    M20 = -_dot(M22, _dot(A20, M00) + _dot(A21, M10))
    M31 = -_dot(M33, _dot(A31, M11) + _dot(A32, M21))
    M30 = -_dot(M33, _dot(A30, M00) + _dot(A31, M10) + _dot(A32, M20))
    return M00, M11, M22, M33, M10, M20, M21, M30, M31, M32


@triton.jit
def _store_block(ptr, x, t0, eos, i_h, col0, H: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """Store a [BC, BC] block at rows t0.., chunk columns col0.. of a [tokens, H, BT] matrix."""
    rows = t0 + tl.arange(0, BC)
    cols = col0 + tl.arange(0, BC)
    mask = (rows < eos)[:, None] & (cols < BT)[None, :]
    tl.store(ptr + (rows[:, None] * H + i_h) * BT + cols[None, :], x.to(ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _store_lower(ptr, B0, B1, B2, B3, B10, B20, B21, B30, B31, B32, t0, eos, i_h,
                 H: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """Store the ten lower sub-blocks of a chunk's [BT, BT] matrix (the upper ones are never read)."""
    _store_block(ptr, B0, t0, eos, i_h, 0, H, BT, BC)
    _store_block(ptr, B1, t0 + BC, eos, i_h, BC, H, BT, BC)
    _store_block(ptr, B2, t0 + 2 * BC, eos, i_h, 2 * BC, H, BT, BC)
    _store_block(ptr, B3, t0 + 3 * BC, eos, i_h, 3 * BC, H, BT, BC)
    _store_block(ptr, B10, t0 + BC, eos, i_h, 0, H, BT, BC)
    _store_block(ptr, B20, t0 + 2 * BC, eos, i_h, 0, H, BT, BC)
    _store_block(ptr, B21, t0 + 2 * BC, eos, i_h, BC, H, BT, BC)
    _store_block(ptr, B30, t0 + 3 * BC, eos, i_h, 0, H, BT, BC)
    _store_block(ptr, B31, t0 + 3 * BC, eos, i_h, BC, H, BT, BC)
    _store_block(ptr, B32, t0 + 3 * BC, eos, i_h, 2 * BC, H, BT, BC)


def _intra_configs():
    return tune_configs([triton.Config({"BK": bk}, num_warps=w) for bk in (64, 32) for w in (4, 8)])


@triton.autotune(configs=_intra_configs(), key=["K", "PREC"])
@triton.jit
def _intra_kernel(q, k, gc, beta, Aqk, M, cu_seqlens, chunk_indices, T, NT, scale,
                  H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
                  BK: tl.constexpr, PREC: tl.constexpr, IS_VARLEN: tl.constexpr):
    """Grid (chunks, H): Aqk (scaled) and M of one chunk, stored as [tokens, H, BT] rows."""
    i_c, i_h = tl.program_id(0), tl.program_id(1)
    i_n, i_t, bos, eos = chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    last = tl.minimum(t0 + BT, eos) - 1
    (D0, D1, D2, D3, A10, A20, A21, A30, A31, A32,
     Q0, Q1, Q2, Q3, Q10, Q20, Q21, Q30, Q31, Q32) = _scores(
        q, k, gc, t0, eos, last, i_h, H, K, BC, BK, PREC)
    _store_lower(Aqk, Q0 * scale, Q1 * scale, Q2 * scale, Q3 * scale, Q10 * scale, Q20 * scale,
                 Q21 * scale, Q30 * scale, Q31 * scale, Q32 * scale, t0, eos, i_h, H, BT, BC)
    # beta scales the rows of Akk; its diagonal blocks keep only the strictly lower part.
    b0 = load_scalars(beta, t0, eos, i_h, H, BC)[:, None]
    b1 = load_scalars(beta, t0 + BC, eos, i_h, H, BC)[:, None]
    b2 = load_scalars(beta, t0 + 2 * BC, eos, i_h, H, BC)[:, None]
    b3 = load_scalars(beta, t0 + 3 * BC, eos, i_h, H, BC)[:, None]
    o_c = tl.arange(0, BC)
    strict = o_c[:, None] > o_c[None, :]
    M00, M11, M22, M33, M10, M20, M21, M30, M31, M32 = _solve(
        tl.where(strict, D0, 0.0) * b0, tl.where(strict, D1, 0.0) * b1,
        tl.where(strict, D2, 0.0) * b2, tl.where(strict, D3, 0.0) * b3,
        A10 * b1, A20 * b2, A21 * b2, A30 * b3, A31 * b3, A32 * b3, BC)
    _store_lower(M, M00, M11, M22, M33, M10, M20, M21, M30, M31, M32, t0, eos, i_h, H, BT, BC)


def chunk_kda_fwd_intra(
    q: torch.Tensor,
    k: torch.Tensor,
    gc: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    chunking: Chunking,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Intra-chunk score matrix and triangular inverse (stage 1).

    Args:
        q, k: [B, T, H, K] contiguous, fp32/fp16/bf16, L2-normalised over K.
        gc: fp32 [B * T, H, K] chunk-local cumulative log-decay (``chunk_local_cumsum``).
        beta: [B, T, H] contiguous, in (0, 1).
        scale: query scale (multiplies Aqk).
        chunking: from ``index.prepare_chunking``.

    Returns:
        ``(Aqk, M)``, both [B * T, H, 64]: row r of a chunk holds that chunk's row r. Aqk is in
        q's dtype, M in fp32; only the lower triangle (including the diagonal) is written.
    """
    B, T, H, K = q.shape
    Aqk = torch.empty(B * T, H, CHUNK, device=q.device, dtype=q.dtype)
    M = torch.empty(B * T, H, CHUNK, device=q.device, dtype=torch.float32)
    _intra_kernel[(chunking.n_chunks, H)](
        q, k, gc, beta, Aqk, M, chunking.cu_seqlens, chunking.chunk_indices, chunking.T,
        chunking.nt, scale, H=H, K=K, BT=CHUNK, BC=SUB, PREC=dot_precision(q.dtype),
        IS_VARLEN=chunking.varlen,
    )
    return Aqk, M
