"""Candidate MLA decode for the mla-decode campaign: one pass over the cache per head block.

One program per (sequence, block of BLOCK_H heads) walks the cache in tiles of BLOCK_N tokens
with an online softmax in base 2 (KERNELS.md section 2.3 without the split): every tile it
loads serves all its heads. Correct, but at B = 1 it runs only H / BLOCK_H programs; the
campaign's job is to make it fast (e.g. split-KV and a combine).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _decode_kernel(q, kv, out, lse, T, qk_scale, H: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_N: tl.constexpr, PREC: tl.constexpr):
    i_b = tl.cast(tl.program_id(0), tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = heads < H
    o_c, o_pe = tl.arange(0, 512), tl.arange(0, 64)
    q_row = q + (i_b * H + heads[:, None]) * 576
    q_c = tl.load(q_row + o_c[None, :], mask=m_h[:, None], other=0.0)
    q_pe = tl.load(q_row + 512 + o_pe[None, :], mask=m_h[:, None], other=0.0)
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, 512], dtype=tl.float32)
    for i_n in range(0, tl.cdiv(T, BLOCK_N)):
        toks = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
        m_t = toks < T
        rows = kv + (i_b * T + toks) * 576
        c = tl.load(rows[:, None] + o_c[None, :], mask=m_t[:, None], other=0.0)
        pe = tl.load(rows[:, None] + 512 + o_pe[None, :], mask=m_t[:, None], other=0.0)
        s = tl.dot(q_c, tl.trans(c), input_precision=PREC) + tl.dot(q_pe, tl.trans(pe), input_precision=PREC)
        s = tl.where(m_t[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c, input_precision=PREC)
        m_i = m_new
    res = acc / l_i[:, None]
    tl.store(out + (i_b * H + heads[:, None]) * 512 + o_c[None, :], res.to(out.dtype.element_ty), mask=m_h[:, None])
    tl.store(lse + i_b * H + heads, (m_i + tl.log2(l_i)) * LN2, mask=m_h)


def kernel(q, kv, sm_scale):
    """MLA decode: q [B, H, 576], kv [B, T, 576] (T >= 1) -> (out [B, H, 512] in q's dtype, lse [B, H] fp32)."""
    B, H, _ = q.shape
    T = kv.shape[1]
    q, kv = q.contiguous(), kv.contiguous()
    out = torch.empty(B, H, 512, device=q.device, dtype=q.dtype)
    lse = torch.empty(B, H, device=q.device, dtype=torch.float32)
    block_h = 16
    prec = "ieee" if q.dtype == torch.float32 else "tf32"
    grid = (B, triton.cdiv(H, block_h))
    _decode_kernel[grid](q, kv, out, lse, T, sm_scale * LOG2E, H=H, BLOCK_H=block_h, BLOCK_N=32, PREC=prec)
    return out, lse
