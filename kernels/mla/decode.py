"""Triton MLA decode (absorbed form): split-KV partials with online softmax, then a log-sum-exp combine.

Flash-Decoding (Dao et al., CRFM blog 2023-10-12) applied to MLA's single shared latent KV head
(KERNELS.md sections 2.1-2.3); written from that math:

1. ``_split_kernel``, grid (B, head blocks, splits): each program takes BLOCK_H heads of one
   sequence and one contiguous token range; every KV tile it loads serves all its heads. The
   576-wide dot is done as a 512-wide and a 64-wide part (``tl.arange`` needs powers of two).
   Online softmax in base 2 (``sm_scale * log2(e)`` folded into the logits); the normalised
   partial output (fp32 [512]) and its base-2 log-sum-exp are written per split. An empty split
   writes zeros and ``-inf``.
2. ``_combine_kernel``, grid (B, H): ``M = max_s lse_s``, weights ``2^(lse_s - M)``, output the
   weighted mean; ``lse`` is returned in natural log. All-empty rows give out = 0, lse = -inf
   with no NaN on the way.

The cache is dense ``[B, T, 576]`` or paged ``[num_pages, 64, 576]`` with an int32 block table.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import is_interpreter, tune_configs

from .reference import D_QK, D_V, PAGE

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


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


@triton.jit
def _combine_kernel(
    o_part,
    lse_part,
    out,
    lse,
    num_splits,
    stride_ob,
    stride_oh,
    H: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_S: tl.constexpr,
    NUM_SPLITS_MAX: tl.constexpr,
):
    i_b = tl.cast(tl.program_id(0), tl.int64)
    i_h = tl.program_id(1)
    base = (i_b * H + i_h) * NUM_SPLITS_MAX
    o_s = tl.arange(0, BLOCK_S)
    lses = tl.load(lse_part + base + o_s, mask=o_s < num_splits, other=float("-inf"))
    m = tl.max(lses, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lses - m)
    tot = tl.sum(w, axis=0)
    o_dv = tl.arange(0, DV)
    acc = tl.zeros([DV], dtype=tl.float32)
    for i_s in range(0, num_splits):
        lse_s = tl.load(lse_part + base + i_s)
        w_s = tl.exp2(lse_s - m)
        acc += w_s * tl.load(o_part + (base + i_s) * DV + o_dv)
    has = tot > 0.0
    res = acc / tl.where(has, tot, 1.0)
    tl.store(out + i_b * stride_ob + i_h * stride_oh + o_dv, res.to(out.dtype.element_ty))
    tl.store(
        lse + i_b * H + i_h,
        tl.where(has, (m + tl.log2(tl.where(has, tot, 1.0))) * LN2, float("-inf")),
    )


def default_num_splits(batch: int, heads: int, max_tokens: int, device: torch.device) -> int:
    """Heuristic number of KV splits: enough (batch x split) programs to cover the SMs, >= 256 tokens each.

    Under the interpreter (or on a CPU) at most 4 splits are used, to keep CPU tests fast.

    Args:
        batch: B.
        heads: H.
        max_tokens: longest sequence (tokens).
        device: where the kernels run.
    """
    if device.type == "cuda" and not is_interpreter():
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    else:
        sms = 4
    want = triton.cdiv(sms, batch * triton.cdiv(heads, 64))
    return max(1, min(want, triton.cdiv(max(max_tokens, 1), 256), 64))


def mla_decode(
    q: torch.Tensor,
    kv: torch.Tensor,
    sm_scale: float,
    num_splits: int | None = None,
    kv_lens: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Absorbed-form MLA decode in Triton: split-KV partials, then a log-sum-exp combine.

    Semantics are those of ``mla_decode_reference`` (fp32 accumulation throughout).

    Args:
        q: [B, H, 576] queries (fp32, fp16 or bf16); the last dim must be contiguous.
        kv: dense cache [B, T, 576] in q's dtype, or pages [num_pages, 64, 576] with block_table.
        sm_scale: softmax scale on the 576-dim dot (explicit: the model's scale, e.g.
            1/sqrt(192) for DeepSeek-V3, is not 1/sqrt(576)).
        num_splits: KV splits per sequence (1..1024); default from ``default_num_splits``.
        kv_lens: int [B] valid tokens per sequence (each <= T); required when paged.
        block_table: int32 [B, max_pages] mapping sequence pages to cache pages, or None.

    Returns:
        ``(out, lse)``: out [B, H, 512] in q's dtype; lse fp32 [B, H], natural log
        (``-inf`` and out = 0 for a sequence with no token).

    Raises:
        ValueError: on inconsistent shapes or dtypes, num_splits out of range, or a paged
            cache without kv_lens.
    """
    if q.dim() != 3 or q.shape[-1] != D_QK:
        raise ValueError(f"q must be [B, H, {D_QK}]; got {tuple(q.shape)}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"unsupported dtype {q.dtype}")
    if kv.dtype != q.dtype:
        raise ValueError(f"kv must have q's dtype {q.dtype}; got {kv.dtype}")
    B, H, _ = q.shape
    paged = block_table is not None
    if kv.dim() != 3 or kv.shape[-1] != D_QK:
        raise ValueError(
            f"kv must be [B, T, {D_QK}] or [num_pages, {PAGE}, {D_QK}]; got {tuple(kv.shape)}"
        )
    if paged:
        if kv.shape[1] != PAGE:
            raise ValueError(f"paged kv must have pages of {PAGE} tokens; got {tuple(kv.shape)}")
        if kv_lens is None:
            raise ValueError("a paged cache needs kv_lens")
        if block_table.dim() != 2 or block_table.shape[0] != B:
            raise ValueError(
                f"block_table must be [B = {B}, max_pages]; got {tuple(block_table.shape)}"
            )
        T = block_table.shape[1] * PAGE
        block_table = block_table.to(torch.int32).contiguous()
    else:
        if kv.shape[0] != B:
            raise ValueError(f"batch mismatch: q has B = {B}, kv has {kv.shape[0]}")
        T = kv.shape[1]
    if kv_lens is not None:
        if kv_lens.shape != (B,):
            raise ValueError(f"kv_lens must be [B] = [{B}]; got {tuple(kv_lens.shape)}")
        kv_lens = kv_lens.to(device=q.device, dtype=torch.int32).contiguous()
    if q.stride(-1) != 1:
        q = q.contiguous()
    if kv.stride(-1) != 1 or (paged and not kv.is_contiguous()):
        kv = kv.contiguous()
    if num_splits is None:
        num_splits = default_num_splits(B, H, T, q.device)
    if not 1 <= int(num_splits) <= 1024:
        raise ValueError(f"num_splits must be in 1..1024; got {num_splits}")
    num_splits = int(num_splits)
    o_part = torch.empty(B, H, num_splits, D_V, device=q.device, dtype=torch.float32)
    lse_part = torch.empty(B, H, num_splits, device=q.device, dtype=torch.float32)
    out = torch.empty(B, H, D_V, device=q.device, dtype=q.dtype)
    lse = torch.empty(B, H, device=q.device, dtype=torch.float32)
    prec = "ieee" if q.dtype == torch.float32 else "tf32"

    def grid(meta):
        return (B, triton.cdiv(H, meta["BLOCK_H"]), num_splits)

    _split_kernel[grid](
        q,
        kv,
        block_table,
        kv_lens,
        o_part,
        lse_part,
        T,
        float(sm_scale) * LOG2E,
        num_splits,
        q.stride(0),
        q.stride(1),
        0 if paged else kv.stride(0),
        kv.stride(1) if not paged else D_QK,
        block_table.stride(0) if paged else 0,
        H=H,
        DV=D_V,
        DPE=D_QK - D_V,
        PAGE_SIZE=PAGE,
        PAGED=paged,
        HAS_LENS=kv_lens is not None,
        PREC=prec,
        NUM_SPLITS_MAX=num_splits,
    )
    _combine_kernel[(B, H)](
        o_part,
        lse_part,
        out,
        lse,
        num_splits,
        out.stride(0),
        out.stride(1),
        H=H,
        DV=D_V,
        BLOCK_S=max(2, 1 << (num_splits - 1).bit_length()),
        NUM_SPLITS_MAX=num_splits,
    )
    return out, lse


__all__ = ["default_num_splits", "mla_decode"]
