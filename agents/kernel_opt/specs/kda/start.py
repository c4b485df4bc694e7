"""Candidate KDA forward for the kda campaign: the exact recurrence, chunk by chunk, in Triton.

One program per (sequence, head, V-tile) keeps its [K, BV] slice of the fp32 state in
registers and walks the tokens in chunks of ``BT``, applying per token (KERNELS.md 1.2):
``S = diag(exp(g_t)) S; u = beta_t (v_t - S^T k_t); S += k_t u^T; o_t = S^T (scale q_t)``.
Correct but serial in T: the campaign's job is to make it fast (e.g. the chunked WY form).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BT = 16  # tokens per chunk of the walk


@triton.jit
def _kda_kernel(q, k, v, g, beta, o, h0, ht, T, scale, H: tl.constexpr, K: tl.constexpr,
                V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, BT: tl.constexpr,
                HAS_H0: tl.constexpr, STORE_HT: tl.constexpr):
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n = tl.cast(i_nh // H, tl.int64)
    i_h = i_nh % H
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    s_offs = ((i_n * H + i_h) * K + o_k[:, None]) * V + o_v[None, :]
    s_mask = m_k[:, None] & m_v[None, :]
    if HAS_H0:
        S = tl.load(h0 + s_offs, mask=s_mask, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    for i_c in range(0, tl.cdiv(T, BT)):
        for j in range(0, tl.minimum(BT, T - i_c * BT)):
            t = i_n * T + tl.cast(i_c * BT + j, tl.int64)
            b_q = tl.load(q + (t * H + i_h) * K + o_k, mask=m_k, other=0.0).to(tl.float32) * scale
            b_k = tl.load(k + (t * H + i_h) * K + o_k, mask=m_k, other=0.0).to(tl.float32)
            b_g = tl.load(g + (t * H + i_h) * K + o_k, mask=m_k, other=0.0).to(tl.float32)
            b_v = tl.load(v + (t * H + i_h) * V + o_v, mask=m_v, other=0.0).to(tl.float32)
            b_b = tl.load(beta + t * H + i_h).to(tl.float32)
            S = S * tl.exp(b_g)[:, None]
            u = b_b * (b_v - tl.sum(S * b_k[:, None], axis=0))
            S = S + b_k[:, None] * u[None, :]
            b_o = tl.sum(S * b_q[:, None], axis=0)
            tl.store(o + (t * H + i_h) * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if STORE_HT:
        tl.store(ht + s_offs, S, mask=s_mask)


def kernel(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False):
    """KDA forward. q, k, g [B, T, H, K]; v [B, T, H, V]; beta [B, T, H]; initial_state fp32
    [B, H, K, V] or None. Returns (o [B, T, H, V] in v's dtype, final state fp32 or None)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K**-0.5 if scale is None else scale
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    o = torch.empty_like(v)
    final = torch.empty(B, H, K, V, device=q.device, dtype=torch.float32) if output_final_state else None
    BV = min(32, triton.next_power_of_2(V))
    grid = (triton.cdiv(V, BV), B * H)
    _kda_kernel[grid](
        q, k, v, g, beta, o,
        initial_state.contiguous() if initial_state is not None else o,
        final if final is not None else o,
        T, scale, H=H, K=K, V=V, BK=triton.next_power_of_2(K), BV=BV, BT=BT,
        HAS_H0=initial_state is not None, STORE_HT=final is not None,
    )  # fmt: skip
    return o, final
