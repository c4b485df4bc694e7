"""Stage 1 of MLA decode: split-KV partial outputs with an online softmax (Flash-Decoding).

Grid (B, head blocks, splits): each program takes BLOCK_H heads of one sequence and one
contiguous token range; every KV tile it loads serves all its heads (all heads share MLA's one
latent KV row, KERNELS.md section 2.3). The 576-wide dot is done as a 512-wide and a 64-wide
part (``tl.arange`` needs powers of two). The softmax runs in base 2 (``sm_scale * log2(e)``
folded into the logits); the normalised partial output (fp32 [512]) and its base-2
log-sum-exp are written per split. An empty split writes zeros and ``-inf``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import tune_configs

from .reference import D_QK, D_V, PAGE

LOG2E = 1.4426950408889634


def _split_configs():
    return tune_configs(
        [
            triton.Config({"BLOCK_H": bh, "BLOCK_N": bn}, num_warps=w, num_stages=s)
            for bh in (64, 32, 16)
            for bn in (64, 32)
            for w in (4, 8)
            for s in (1, 2)
        ]
    )


@triton.autotune(configs=_split_configs(), key=["H", "PAGED", "PREC"])
@triton.jit
def _split_kernel(
    q,
    kv,
    block_table,
    kv_lens,
    o_part,
    lse_part,
    T,
    qk_scale,
    num_splits,
    stride_qb,
    stride_qh,
    stride_kvb,
    stride_kvt,
    stride_bt,
    H: tl.constexpr,
    DV: tl.constexpr,
    DPE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    PAGED: tl.constexpr,
    HAS_LENS: tl.constexpr,
    PREC: tl.constexpr,
    NUM_SPLITS_MAX: tl.constexpr,
):
    i_b = tl.cast(tl.program_id(0), tl.int64)
    i_hb, i_s = tl.program_id(1), tl.program_id(2)
    heads = i_hb * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = heads < H
    if HAS_LENS:
        kv_len = tl.load(kv_lens + i_b).to(tl.int64)
    else:
        kv_len = tl.cast(T, tl.int64)
    # Splits are whole BLOCK_N tiles; trailing splits may be empty.
    split_len = tl.cdiv(tl.cdiv(kv_len, num_splits), BLOCK_N) * BLOCK_N
    start = i_s * split_len
    end = tl.minimum(start + split_len, kv_len)

    o_dv = tl.arange(0, DV)
    o_pe = tl.arange(0, DPE)
    q_row = q + i_b * stride_qb + heads[:, None] * stride_qh
    q_c = tl.load(q_row + o_dv[None, :], mask=m_h[:, None], other=0.0)
    q_pe = tl.load(q_row + DV + o_pe[None, :], mask=m_h[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, DV], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        toks = n0 + tl.arange(0, BLOCK_N)
        m_t = toks < end
        if PAGED:
            page = tl.load(block_table + i_b * stride_bt + toks // PAGE_SIZE, mask=m_t, other=0).to(
                tl.int64
            )
            rows = kv + (page * PAGE_SIZE + toks % PAGE_SIZE) * stride_kvt
        else:
            rows = kv + i_b * stride_kvb + toks * stride_kvt
        c = tl.load(rows[:, None] + o_dv[None, :], mask=m_t[:, None], other=0.0)
        pe = tl.load(rows[:, None] + DV + o_pe[None, :], mask=m_t[:, None], other=0.0)
        s = tl.dot(q_c, tl.trans(c), input_precision=PREC)
        s += tl.dot(q_pe, tl.trans(pe), input_precision=PREC)
        s = tl.where(m_t[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c, input_precision=PREC)
        m_i = m_new
    has = l_i > 0.0
    l_safe = tl.where(has, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse2 = tl.where(has, m_i + tl.log2(l_safe), float("-inf"))
    base = (i_b * H + heads) * NUM_SPLITS_MAX + i_s
    tl.store(o_part + base[:, None] * DV + o_dv[None, :], out, mask=m_h[:, None])
    tl.store(lse_part + base, lse2, mask=m_h)


def split_kv_partials(
    q: torch.Tensor,
    kv: torch.Tensor,
    sm_scale: float,
    num_splits: int,
    T: int,
    kv_lens: torch.Tensor | None,
    block_table: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-split normalised outputs and base-2 log-sum-exps (stage 1).

    Args:
        q: [B, H, 576] with a contiguous last dim (fp32, fp16 or bf16).
        kv: dense [B, T, 576] or paged [num_pages, 64, 576], q's dtype, contiguous last dim.
        sm_scale: softmax scale on the 576-dim dot.
        num_splits: KV splits per sequence.
        T: tokens per sequence (dense) or pages x 64 (paged).
        kv_lens: int32 [B] valid tokens per sequence, or None (all T).
        block_table: int32 [B, max_pages] (contiguous) for a paged cache, or None.

    Returns:
        ``(o_part, lse_part)``: fp32 [B, H, num_splits, 512] and fp32 [B, H, num_splits]
        (base 2; ``-inf`` for an empty split).
    """
    B, H, _ = q.shape
    paged = block_table is not None
    o_part = torch.empty(B, H, num_splits, D_V, device=q.device, dtype=torch.float32)
    lse_part = torch.empty(B, H, num_splits, device=q.device, dtype=torch.float32)
    prec = "ieee" if q.dtype == torch.float32 else "tf32"

    def grid(meta):
        return (B, triton.cdiv(H, meta["BLOCK_H"]), num_splits)

    _split_kernel[grid](
        q, kv, block_table, kv_lens, o_part, lse_part, T, float(sm_scale) * LOG2E, num_splits,
        q.stride(0), q.stride(1),
        0 if paged else kv.stride(0),
        kv.stride(1) if not paged else D_QK,
        block_table.stride(0) if paged else 0,
        H=H, DV=D_V, DPE=D_QK - D_V, PAGE_SIZE=PAGE, PAGED=paged,
        HAS_LENS=kv_lens is not None, PREC=prec, NUM_SPLITS_MAX=num_splits,
    )  # fmt: skip
    return o_part, lse_part
