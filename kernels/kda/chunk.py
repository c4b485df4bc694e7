"""Triton chunked KDA forward (``chunk_kda``): chunk 64, WY representation, sequential state scan.

Three kernels, following the chunk algorithm of the Kimi Linear tech report (arXiv 2510.26692,
eqs. 6-9) as restated in ``shared/KERNELS.md`` section 1.6; written from that math, not from
any kernel library:

1. ``_cumsum_kernel`` (parallel over chunks x heads x K-tiles): optional gate activation, then
   the chunk-local cumulative log-decay ``G`` (fp32).
2. ``_intra_kernel`` (parallel over chunks x heads): the intra-chunk matrices ``Akk`` and
   ``Aqk`` on 16x16 sub-blocks (off-diagonal blocks use the first row of their row block as the
   decay reference point so both exponentials are <= 1; diagonal blocks are evaluated exactly
   per channel), the unit-lower-triangular inverse ``M = (I + Akk)^-1`` (forward substitution
   on the four diagonal blocks, then block merging), and the WY factors
   ``W = M diag(beta) (exp(G) * K)`` and ``U = M diag(beta) V``.
3. ``_state_output_kernel`` (parallel over sequences x heads x V-tiles, serial over chunks): the
   inter-chunk scan ``V_new = U - W S``, the output ``O = scale (exp(G) * Q) S + Aqk V_new`` and
   the state update ``S <- diag(exp(G_C)) S + (exp(G_C - G) * K)^T V_new``.

Chunks never cross a sequence boundary: with ``cu_seqlens`` a host-built table maps each chunk
to its sequence. Padded rows of a partial last chunk are masked (k = v = beta = 0) and their
cumulative decay is pinned to the last valid row, so no exponent is ever positive.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import next_pow2, tune_configs

CHUNK = 64  # tokens per chunk (BT)
SUB = 16  # rows per sub-block (BC); CHUNK == 4 * SUB is assumed by _intra_kernel


@triton.jit
def _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN: tl.constexpr):
    """Map a global chunk id to (sequence n, chunk-in-sequence i_t, bos, eos)."""
    if IS_VARLEN:
        i_n = tl.load(chunk_indices + i_c * 2).to(tl.int64)
        i_t = tl.load(chunk_indices + i_c * 2 + 1).to(tl.int64)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        i_c = tl.cast(i_c, tl.int64)
        i_n = i_c // NT
        i_t = i_c % NT
        bos = i_n * T
        eos = bos + T
    return i_n, i_t, bos, eos


@triton.jit
def _cumsum_kernel(
    g,
    gc,
    A_log,
    dt_bias,
    cu_seqlens,
    chunk_indices,
    T,
    NT,
    lower_bound,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    GATE: tl.constexpr,
    HAS_A_LOG: tl.constexpr,
    HAS_DT_BIAS: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    i_c, i_h, i_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_t, bos, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN)
    rows = bos + i_t * BT + tl.arange(0, BT)
    cols = i_k * BK + tl.arange(0, BK)
    mask = (rows < eos)[:, None] & (cols < K)[None, :]
    offs = (rows[:, None] * H + i_h) * K + cols[None, :]
    x = tl.load(g + offs, mask=mask, other=0.0).to(tl.float32)
    if GATE != 0:
        if HAS_DT_BIAS:
            x = (
                x
                + tl.load(dt_bias + i_h * K + cols, mask=cols < K, other=0.0).to(tl.float32)[
                    None, :
                ]
            )
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
        x = tl.where(mask, x, 0.0)
    tl.store(gc + offs, tl.cumsum(x, axis=0), mask=mask)


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
def _load_rows(
    ptr,
    t_start,
    eos,
    i_h,
    col0,
    H: tl.constexpr,
    D: tl.constexpr,
    BC: tl.constexpr,
    BD: tl.constexpr,
):
    """Load a [BC, BD] fp32 tile of a [tokens, H, D] tensor (rows t_start.., cols col0..), 0 outside."""
    rows = t_start + tl.arange(0, BC)
    cols = col0 + tl.arange(0, BD)
    mask = (rows < eos)[:, None] & (cols < D)[None, :]
    return tl.load(ptr + (rows[:, None] * H + i_h) * D + cols[None, :], mask=mask, other=0.0).to(
        tl.float32
    )


@triton.jit
def _load_g(
    gc,
    t_start,
    eos,
    i_h,
    col0,
    g_last,
    H: tl.constexpr,
    K: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
):
    """Cumulative decay rows; rows past the sequence end take the last valid row's value."""
    rows = t_start + tl.arange(0, BC)
    x = _load_rows(gc, t_start, eos, i_h, col0, H, K, BC, BK)
    return tl.where((rows < eos)[:, None], x, g_last[None, :])


@triton.jit
def _diag_block(k_i, q_i, g_i, BC: tl.constexpr):
    """Exact per-channel Akk and Aqk contributions of one diagonal sub-block (one K-tile)."""
    r = tl.arange(0, BC)
    causal = r[:, None] >= r[None, :]  # [r, i]
    arg = g_i[:, None, :] - g_i[None, :, :]  # G_r - G_i, <= 0 where i <= r
    e = tl.exp(tl.where(causal[:, :, None], arg, 0.0))
    e = tl.where(causal[:, :, None], e, 0.0)
    kk = tl.sum(k_i[:, None, :] * k_i[None, :, :] * e, axis=2)
    qk = tl.sum(q_i[:, None, :] * k_i[None, :, :] * e, axis=2)
    return kk, qk


@triton.jit
def _offdiag_block(k_i, q_i, g_i, k_j, g_j, ref, PREC: tl.constexpr):
    """Akk and Aqk contributions of block (I, J), J < I, with reference row ``ref`` (first row of I)."""
    fr = tl.exp(g_i - ref[None, :])  # <= 1: rows of I come at or after the reference
    fc = tl.exp(ref[None, :] - g_j)  # <= 1: rows of J come before it
    kc = tl.trans(k_j * fc)
    kk = tl.dot(k_i * fr, kc, input_precision=PREC)
    qk = tl.dot(q_i * fr, kc, input_precision=PREC)
    return kk, qk


@triton.jit
def _store_block(
    ptr, x, t_start, eos, i_h, col0, H: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr
):
    rows = t_start + tl.arange(0, BC)
    cols = col0 + tl.arange(0, BC)
    mask = (rows < eos)[:, None] & (cols < BT)[None, :]
    tl.store(
        ptr + (rows[:, None] * H + i_h) * BT + cols[None, :], x.to(ptr.dtype.element_ty), mask=mask
    )


@triton.jit
def _store_rows(
    ptr,
    x,
    t_start,
    eos,
    i_h,
    col0,
    H: tl.constexpr,
    D: tl.constexpr,
    BC: tl.constexpr,
    BD: tl.constexpr,
):
    rows = t_start + tl.arange(0, BC)
    cols = col0 + tl.arange(0, BD)
    mask = (rows < eos)[:, None] & (cols < D)[None, :]
    tl.store(
        ptr + (rows[:, None] * H + i_h) * D + cols[None, :], x.to(ptr.dtype.element_ty), mask=mask
    )


def _intra_configs():
    return tune_configs([triton.Config({"BK": bk}, num_warps=w) for bk in (64, 32) for w in (4, 8)])


@triton.autotune(configs=_intra_configs(), key=["K", "V", "PREC"])
@triton.jit
def _intra_kernel(
    k,
    q,
    v,
    gc,
    beta,
    Aqk,
    W,
    U,
    cu_seqlens,
    chunk_indices,
    T,
    NT,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    PREC: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    i_c, i_h = tl.program_id(0), tl.program_id(1)
    i_n, i_t, bos, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    t1, t2, t3 = t0 + BC, t0 + 2 * BC, t0 + 3 * BC
    last = tl.minimum(t0 + BT, eos) - 1
    o_k = tl.arange(0, BK)
    o_c = tl.arange(0, BC)

    z = tl.zeros([BC, BC], dtype=tl.float32)
    D0, D1, D2, D3 = z, z, z, z  # Akk diagonal blocks
    A10, A20, A21, A30, A31, A32 = z, z, z, z, z, z  # Akk off-diagonal blocks
    Q0, Q1, Q2, Q3 = z, z, z, z  # Aqk diagonal blocks
    Q10, Q20, Q21, Q30, Q31, Q32 = z, z, z, z, z, z
    for i_k in range(0, tl.cdiv(K, BK)):
        c0 = i_k * BK
        g_last = tl.load(gc + (last * H + i_h) * K + c0 + o_k, mask=c0 + o_k < K, other=0.0)
        k0 = _load_rows(k, t0, eos, i_h, c0, H, K, BC, BK)
        k1 = _load_rows(k, t1, eos, i_h, c0, H, K, BC, BK)
        k2 = _load_rows(k, t2, eos, i_h, c0, H, K, BC, BK)
        k3 = _load_rows(k, t3, eos, i_h, c0, H, K, BC, BK)
        q0 = _load_rows(q, t0, eos, i_h, c0, H, K, BC, BK)
        q1 = _load_rows(q, t1, eos, i_h, c0, H, K, BC, BK)
        q2 = _load_rows(q, t2, eos, i_h, c0, H, K, BC, BK)
        q3 = _load_rows(q, t3, eos, i_h, c0, H, K, BC, BK)
        g0 = _load_g(gc, t0, eos, i_h, c0, g_last, H, K, BC, BK)
        g1 = _load_g(gc, t1, eos, i_h, c0, g_last, H, K, BC, BK)
        g2 = _load_g(gc, t2, eos, i_h, c0, g_last, H, K, BC, BK)
        g3 = _load_g(gc, t3, eos, i_h, c0, g_last, H, K, BC, BK)
        # reference rows: first row of blocks 1..3 (clamped to the last valid row)
        r1 = tl.load(
            gc + (tl.minimum(t1, last) * H + i_h) * K + c0 + o_k, mask=c0 + o_k < K, other=0.0
        )
        r2 = tl.load(
            gc + (tl.minimum(t2, last) * H + i_h) * K + c0 + o_k, mask=c0 + o_k < K, other=0.0
        )
        r3 = tl.load(
            gc + (tl.minimum(t3, last) * H + i_h) * K + c0 + o_k, mask=c0 + o_k < K, other=0.0
        )

        a, b = _diag_block(k0, q0, g0, BC)
        D0 += a
        Q0 += b
        a, b = _diag_block(k1, q1, g1, BC)
        D1 += a
        Q1 += b
        a, b = _diag_block(k2, q2, g2, BC)
        D2 += a
        Q2 += b
        a, b = _diag_block(k3, q3, g3, BC)
        D3 += a
        Q3 += b
        a, b = _offdiag_block(k1, q1, g1, k0, g0, r1, PREC)
        A10 += a
        Q10 += b
        a, b = _offdiag_block(k2, q2, g2, k0, g0, r2, PREC)
        A20 += a
        Q20 += b
        a, b = _offdiag_block(k2, q2, g2, k1, g1, r2, PREC)
        A21 += a
        Q21 += b
        a, b = _offdiag_block(k3, q3, g3, k0, g0, r3, PREC)
        A30 += a
        Q30 += b
        a, b = _offdiag_block(k3, q3, g3, k1, g1, r3, PREC)
        A31 += a
        Q31 += b
        a, b = _offdiag_block(k3, q3, g3, k2, g2, r3, PREC)
        A32 += a
        Q32 += b

    # beta scales the rows of Akk; scale the rows of Aqk.
    b0 = tl.load(beta + (t0 + o_c) * H + i_h, mask=t0 + o_c < eos, other=0.0).to(tl.float32)[
        :, None
    ]
    b1 = tl.load(beta + (t1 + o_c) * H + i_h, mask=t1 + o_c < eos, other=0.0).to(tl.float32)[
        :, None
    ]
    b2 = tl.load(beta + (t2 + o_c) * H + i_h, mask=t2 + o_c < eos, other=0.0).to(tl.float32)[
        :, None
    ]
    b3 = tl.load(beta + (t3 + o_c) * H + i_h, mask=t3 + o_c < eos, other=0.0).to(tl.float32)[
        :, None
    ]
    strict = o_c[:, None] > o_c[None, :]
    D0 = tl.where(strict, D0, 0.0) * b0
    D1 = tl.where(strict, D1, 0.0) * b1
    D2 = tl.where(strict, D2, 0.0) * b2
    D3 = tl.where(strict, D3, 0.0) * b3
    A10 *= b1
    A20 *= b2
    A21 *= b2
    A30 *= b3
    A31 *= b3
    A32 *= b3

    _store_block(Aqk, Q0 * scale, t0, eos, i_h, 0, H, BT, BC)
    _store_block(Aqk, Q1 * scale, t1, eos, i_h, BC, H, BT, BC)
    _store_block(Aqk, Q2 * scale, t2, eos, i_h, 2 * BC, H, BT, BC)
    _store_block(Aqk, Q3 * scale, t3, eos, i_h, 3 * BC, H, BT, BC)
    _store_block(Aqk, Q10 * scale, t1, eos, i_h, 0, H, BT, BC)
    _store_block(Aqk, Q20 * scale, t2, eos, i_h, 0, H, BT, BC)
    _store_block(Aqk, Q21 * scale, t2, eos, i_h, BC, H, BT, BC)
    _store_block(Aqk, Q30 * scale, t3, eos, i_h, 0, H, BT, BC)
    _store_block(Aqk, Q31 * scale, t3, eos, i_h, BC, H, BT, BC)
    _store_block(Aqk, Q32 * scale, t3, eos, i_h, 2 * BC, H, BT, BC)

    # M = (I + Akk)^-1: diagonal blocks by forward substitution, then block merging
    # M_IJ = -M_II * sum_{J <= L < I} Akk_IL M_LJ (IEEE fp32: errors here feed every output).
    M00 = _inv_unit_lower(D0, BC)
    M11 = _inv_unit_lower(D1, BC)
    M22 = _inv_unit_lower(D2, BC)
    M33 = _inv_unit_lower(D3, BC)
    M10 = -tl.dot(M11, tl.dot(A10, M00, input_precision="ieee"), input_precision="ieee")
    M21 = -tl.dot(M22, tl.dot(A21, M11, input_precision="ieee"), input_precision="ieee")
    M32 = -tl.dot(M33, tl.dot(A32, M22, input_precision="ieee"), input_precision="ieee")
    M20 = -tl.dot(
        M22,
        tl.dot(A20, M00, input_precision="ieee") + tl.dot(A21, M10, input_precision="ieee"),
        input_precision="ieee",
    )
    M31 = -tl.dot(
        M33,
        tl.dot(A31, M11, input_precision="ieee") + tl.dot(A32, M21, input_precision="ieee"),
        input_precision="ieee",
    )
    M30 = -tl.dot(
        M33,
        tl.dot(A30, M00, input_precision="ieee")
        + tl.dot(A31, M10, input_precision="ieee")
        + tl.dot(A32, M20, input_precision="ieee"),
        input_precision="ieee",
    )

    # W = M diag(beta) (exp(G) * K), by row blocks.
    for i_k in range(0, tl.cdiv(K, BK)):
        c0 = i_k * BK
        g_last = tl.load(gc + (last * H + i_h) * K + c0 + o_k, mask=c0 + o_k < K, other=0.0)
        x0 = (
            _load_rows(k, t0, eos, i_h, c0, H, K, BC, BK)
            * tl.exp(_load_g(gc, t0, eos, i_h, c0, g_last, H, K, BC, BK))
            * b0
        )
        x1 = (
            _load_rows(k, t1, eos, i_h, c0, H, K, BC, BK)
            * tl.exp(_load_g(gc, t1, eos, i_h, c0, g_last, H, K, BC, BK))
            * b1
        )
        x2 = (
            _load_rows(k, t2, eos, i_h, c0, H, K, BC, BK)
            * tl.exp(_load_g(gc, t2, eos, i_h, c0, g_last, H, K, BC, BK))
            * b2
        )
        x3 = (
            _load_rows(k, t3, eos, i_h, c0, H, K, BC, BK)
            * tl.exp(_load_g(gc, t3, eos, i_h, c0, g_last, H, K, BC, BK))
            * b3
        )
        w0 = tl.dot(M00, x0, input_precision=PREC)
        w1 = tl.dot(M10, x0, input_precision=PREC) + tl.dot(M11, x1, input_precision=PREC)
        w2 = (
            tl.dot(M20, x0, input_precision=PREC)
            + tl.dot(M21, x1, input_precision=PREC)
            + tl.dot(M22, x2, input_precision=PREC)
        )
        w3 = (
            tl.dot(M30, x0, input_precision=PREC)
            + tl.dot(M31, x1, input_precision=PREC)
            + tl.dot(M32, x2, input_precision=PREC)
            + tl.dot(M33, x3, input_precision=PREC)
        )
        _store_rows(W, w0, t0, eos, i_h, c0, H, K, BC, BK)
        _store_rows(W, w1, t1, eos, i_h, c0, H, K, BC, BK)
        _store_rows(W, w2, t2, eos, i_h, c0, H, K, BC, BK)
        _store_rows(W, w3, t3, eos, i_h, c0, H, K, BC, BK)

    # U = M diag(beta) V, by row blocks.
    for i_v in range(0, tl.cdiv(V, BV)):
        c0 = i_v * BV
        y0 = _load_rows(v, t0, eos, i_h, c0, H, V, BC, BV) * b0
        y1 = _load_rows(v, t1, eos, i_h, c0, H, V, BC, BV) * b1
        y2 = _load_rows(v, t2, eos, i_h, c0, H, V, BC, BV) * b2
        y3 = _load_rows(v, t3, eos, i_h, c0, H, V, BC, BV) * b3
        u0 = tl.dot(M00, y0, input_precision=PREC)
        u1 = tl.dot(M10, y0, input_precision=PREC) + tl.dot(M11, y1, input_precision=PREC)
        u2 = (
            tl.dot(M20, y0, input_precision=PREC)
            + tl.dot(M21, y1, input_precision=PREC)
            + tl.dot(M22, y2, input_precision=PREC)
        )
        u3 = (
            tl.dot(M30, y0, input_precision=PREC)
            + tl.dot(M31, y1, input_precision=PREC)
            + tl.dot(M32, y2, input_precision=PREC)
            + tl.dot(M33, y3, input_precision=PREC)
        )
        _store_rows(U, u0, t0, eos, i_h, c0, H, V, BC, BV)
        _store_rows(U, u1, t1, eos, i_h, c0, H, V, BC, BV)
        _store_rows(U, u2, t2, eos, i_h, c0, H, V, BC, BV)
        _store_rows(U, u3, t3, eos, i_h, c0, H, V, BC, BV)


def _state_configs():
    return tune_configs(
        [
            triton.Config({"BV": bv}, num_warps=w, num_stages=s)
            for bv in (64, 32)
            for w in (4, 8)
            for s in (2, 3)
        ]
    )


@triton.autotune(configs=_state_configs(), key=["K", "V", "PREC"])
@triton.jit
def _state_output_kernel(
    q,
    k,
    gc,
    W,
    U,
    Aqk,
    o,
    h0,
    ht,
    cu_seqlens,
    T,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    PREC: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    HAS_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n = tl.cast(i_nh // H, tl.int64)
    i_h = i_nh % H
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        bos = i_n * T
        eos = bos + T
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    o_t = tl.arange(0, BT)
    m_k = o_k < K
    m_v = o_v < V
    s_offs = ((i_n * H + i_h) * K + o_k[:, None]) * V + o_v[None, :]
    s_mask = m_k[:, None] & m_v[None, :]
    if HAS_H0:
        S = tl.load(h0 + s_offs, mask=s_mask, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    n_chunks = tl.cdiv(eos - bos, BT)
    for i_t in range(0, n_chunks):
        t0 = bos + tl.cast(i_t, tl.int64) * BT
        rows = t0 + o_t
        m_t = rows < eos
        last = tl.minimum(t0 + BT, eos) - 1
        mk2 = m_t[:, None] & m_k[None, :]
        mv2 = m_t[:, None] & m_v[None, :]
        offs_k = (rows[:, None] * H + i_h) * K + o_k[None, :]
        offs_v = (rows[:, None] * H + i_h) * V + o_v[None, :]
        w = tl.load(W + offs_k, mask=mk2, other=0.0)
        u = tl.load(U + offs_v, mask=mv2, other=0.0).to(tl.float32)
        Sd = S.to(w.dtype)
        v_new = u - tl.dot(w, Sd, input_precision=PREC)
        g = tl.load(gc + offs_k, mask=mk2, other=0.0)
        g_last = tl.load(gc + (last * H + i_h) * K + o_k, mask=m_k, other=0.0)
        qg = tl.load(q + offs_k, mask=mk2, other=0.0).to(tl.float32) * tl.exp(g) * scale
        a = tl.load(
            Aqk + (rows[:, None] * H + i_h) * BT + o_t[None, :],
            mask=m_t[:, None] & (o_t[None, :] <= o_t[:, None]),
            other=0.0,
        )
        v_new_d = v_new.to(a.dtype)
        out = tl.dot(qg.to(w.dtype), Sd, input_precision=PREC) + tl.dot(
            a, v_new_d, input_precision=PREC
        )
        tl.store(o + offs_v, out.to(o.dtype.element_ty), mask=mv2)
        kg = tl.load(k + offs_k, mask=mk2, other=0.0).to(tl.float32) * tl.exp(g_last[None, :] - g)
        S = S * tl.exp(g_last)[:, None] + tl.dot(
            tl.trans(kg.to(w.dtype)), v_new_d, input_precision=PREC
        )
    if STORE_HT:
        tl.store(ht + s_offs, S, mask=s_mask)


def prepare_chunk_indices(cu_seqlens: torch.Tensor, chunk_size: int = CHUNK) -> torch.Tensor:
    """Table of (sequence index, chunk index within the sequence) for every chunk of a varlen batch.

    Args:
        cu_seqlens: [N + 1] integer cumulative sequence lengths starting at 0.
        chunk_size: tokens per chunk.

    Returns:
        int32 tensor [num_chunks, 2] on cu_seqlens' device. Reads cu_seqlens on the host once.
    """
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    n_chunks = (lens + chunk_size - 1) // chunk_size
    seq = torch.repeat_interleave(torch.arange(len(lens), device=cu_seqlens.device), n_chunks)
    starts = torch.cumsum(n_chunks, 0) - n_chunks
    idx = torch.arange(int(n_chunks.sum()), device=cu_seqlens.device) - starts[seq]
    return torch.stack([seq, idx], 1).to(torch.int32).contiguous()


def _validate(q, k, v, g, beta, initial_state, cu_seqlens):
    if q.dim() != 4:
        raise ValueError(f"q must be [B, T, H, K]; got shape {tuple(q.shape)}")
    B, T, H, K = q.shape
    if k.shape != q.shape or g.shape != q.shape:
        raise ValueError(
            f"q, k, g must share shape [B, T, H, K]; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(g.shape)}"
        )
    if v.dim() != 4 or v.shape[:3] != (B, T, H):
        raise ValueError(
            f"v must be [B, T, H, V] with B, T, H = {B}, {T}, {H}; got {tuple(v.shape)}"
        )
    if beta.shape != (B, T, H):
        raise ValueError(f"beta must be [B, T, H] = [{B}, {T}, {H}]; got {tuple(beta.shape)}")
    if K > 256:
        raise ValueError(f"head dim K = {K} > 256 is not supported")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise ValueError(f"q, k, v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"unsupported dtype {q.dtype}")
    V = v.shape[-1]
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"with cu_seqlens the batch must be flattened to B = 1; got B = {B}")
        if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
            raise ValueError("cu_seqlens must be a 1-D tensor [N + 1]")
        N = cu_seqlens.numel() - 1
    else:
        N = B
    if initial_state is not None:
        if initial_state.shape != (N, H, K, V):
            raise ValueError(
                f"initial_state must be [N, H, K, V] = [{N}, {H}, {K}, {V}]; got {tuple(initial_state.shape)}"
            )
        if initial_state.dtype != torch.float32:
            raise ValueError(f"initial_state must be float32; got {initial_state.dtype}")
    return B, T, H, K, V, N


def chunk_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    *,
    use_gate_in_kernel: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    lower_bound: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA forward with the chunked algorithm in Triton (chunk size 64). Forward only.

    Semantics are those of ``naive_recurrent_kda`` (KERNELS.md section 1.2); the algorithm is
    the chunked WY form of section 1.6 (module docstring).

    Args:
        q: queries [B, T, H, K] (fp32, fp16 or bf16), L2-normalised over K by the caller.
        k: keys [B, T, H, K], same dtype, L2-normalised over K.
        v: values [B, T, H, V], same dtype.
        g: log-decay [B, T, H, K] (natural log, <= 0; any float dtype, used in fp32), or the raw
            gate logits when ``use_gate_in_kernel``.
        beta: [B, T, H] in (0, 1).
        scale: query scale, default ``K ** -0.5``.
        initial_state: fp32 [N, H, K, V] with N = B, or the number of sequences with cu_seqlens.
        output_final_state: return the fp32 state [N, H, K, V] after each sequence's last token.
        cu_seqlens: [N + 1] int cumulative lengths for a variable-length batch flattened into
            B = 1; each sequence has its own state and chunks never cross a boundary.
        use_gate_in_kernel: ``g`` is raw; apply the gate in the cumsum kernel:
            ``-exp(A_log[h]) * softplus(g + dt_bias)``, or with ``lower_bound`` set
            ``lower_bound * sigmoid(exp(A_log[h]) * (g + dt_bias))`` (see ``gate.py``).
        A_log: fp32 [H] (required for the default gate, optional for the lower-bound gate).
        dt_bias: fp32 [H * K] or None.
        lower_bound: in [-5, 0) to select the lower-bound gate.

    Returns:
        ``(o, final_state)``: o [B, T, H, V] in v's dtype; final_state fp32 [N, H, K, V] or None.

    Raises:
        ValueError: on inconsistent shapes or dtypes, K > 256, cu_seqlens that do not rise from
            0 to T, or a gate configuration that is missing A_log.
    """
    B, T, H, K, V, N = _validate(q, k, v, g, beta, initial_state, cu_seqlens)
    scale = K**-0.5 if scale is None else float(scale)
    dev = q.device
    gate = 0
    if use_gate_in_kernel:
        if lower_bound is not None:
            if not -5.0 <= lower_bound < 0.0:
                raise ValueError(f"lower_bound must be in [-5, 0); got {lower_bound}")
            gate = 2
        else:
            if A_log is None:
                raise ValueError("use_gate_in_kernel without lower_bound needs A_log")
            gate = 1
        if A_log is not None and A_log.numel() != H:
            raise ValueError(f"A_log must have H = {H} elements; got {tuple(A_log.shape)}")
        if dt_bias is not None and dt_bias.numel() != H * K:
            raise ValueError(
                f"dt_bias must have H*K = {H * K} elements; got {tuple(dt_bias.shape)}"
            )
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    o = torch.empty_like(v)
    final = torch.empty(N, H, K, V, device=dev, dtype=torch.float32) if output_final_state else None
    if T == 0:
        if final is not None:
            final.copy_(initial_state if initial_state is not None else torch.zeros_like(final))
        return o, final
    if cu_seqlens is not None:
        cu = cu_seqlens.to(device=dev, dtype=torch.int32).contiguous()
        first, last = (int(x) for x in cu[[0, -1]].tolist())
        if first != 0 or last != T or bool((cu[1:] < cu[:-1]).any()):
            raise ValueError(f"cu_seqlens must rise from 0 to T = {T}; got {cu_seqlens.tolist()}")
        chunk_indices = prepare_chunk_indices(cu, CHUNK)
        n_chunks, NT = chunk_indices.shape[0], 0
    else:
        cu, chunk_indices = None, None
        NT = triton.cdiv(T, CHUNK)
        n_chunks = B * NT
    total = B * T
    gc = torch.empty(total, H, K, device=dev, dtype=torch.float32)
    BK_cs = min(64, next_pow2(K))
    dummy = gc  # placeholder for absent optional pointers (never read)
    _cumsum_kernel[(n_chunks, H, triton.cdiv(K, BK_cs))](
        g,
        gc,
        A_log.float().contiguous() if A_log is not None else dummy,
        dt_bias.float().contiguous() if dt_bias is not None else dummy,
        cu,
        chunk_indices,
        T,
        NT,
        float(lower_bound if lower_bound is not None else 0.0),
        H=H,
        K=K,
        BT=CHUNK,
        BK=BK_cs,
        GATE=gate,
        HAS_A_LOG=A_log is not None,
        HAS_DT_BIAS=dt_bias is not None,
        IS_VARLEN=cu is not None,
    )
    if n_chunks == 0:
        if final is not None:
            final.copy_(initial_state if initial_state is not None else torch.zeros_like(final))
        return o, final
    prec = "ieee" if q.dtype == torch.float32 else "tf32"
    Aqk = torch.empty(total, H, CHUNK, device=dev, dtype=q.dtype)
    W = torch.empty(total, H, K, device=dev, dtype=q.dtype)
    U = torch.empty(total, H, V, device=dev, dtype=q.dtype)
    _intra_kernel[(n_chunks, H)](
        k,
        q,
        v,
        gc,
        beta,
        Aqk,
        W,
        U,
        cu,
        chunk_indices,
        T,
        NT,
        scale,
        H=H,
        K=K,
        V=V,
        BT=CHUNK,
        BC=SUB,
        BV=min(64, next_pow2(V)),
        PREC=prec,
        IS_VARLEN=cu is not None,
    )

    def grid(meta):
        return (triton.cdiv(V, meta["BV"]), N * H)

    _state_output_kernel[grid](
        q,
        k,
        gc,
        W,
        U,
        Aqk,
        o,
        initial_state.contiguous() if initial_state is not None else gc,
        final if final is not None else gc,
        cu,
        T,
        scale,
        H=H,
        K=K,
        V=V,
        BT=CHUNK,
        BK=next_pow2(K),
        PREC=prec,
        IS_VARLEN=cu is not None,
        HAS_H0=initial_state is not None,
        STORE_HT=final is not None,
    )
    return o, final
