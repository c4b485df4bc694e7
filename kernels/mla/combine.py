"""Stage 2 of MLA decode: combine the split-KV partials by their log-sum-exps.

Grid (B, H): ``M = max_s lse_s`` (0 if all are ``-inf``), weights ``2^(lse_s - M)``, the output
is the weighted mean of the partial outputs; ``lse`` is returned in natural log. A row with no
token gets out = 0 and lse = ``-inf`` with no NaN on the way (KERNELS.md section 2.3).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .reference import D_V

LN2 = 0.6931471805599453


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


def combine_partials(
    o_part: torch.Tensor, lse_part: torch.Tensor, out_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge the split partials of ``split_kv_partials`` (stage 2).

    Args:
        o_part: fp32 [B, H, S, 512] normalised partial outputs.
        lse_part: fp32 [B, H, S] base-2 log-sum-exps.
        out_dtype: dtype of the output (q's dtype).

    Returns:
        ``(out, lse)``: out [B, H, 512] in ``out_dtype``; lse fp32 [B, H], natural log.
    """
    B, H, S, _ = o_part.shape
    out = torch.empty(B, H, D_V, device=o_part.device, dtype=out_dtype)
    lse = torch.empty(B, H, device=o_part.device, dtype=torch.float32)
    _combine_kernel[(B, H)](
        o_part, lse_part, out, lse, S, out.stride(0), out.stride(1), H=H, DV=D_V,
        BLOCK_S=max(2, 1 << (S - 1).bit_length()), NUM_SPLITS_MAX=S,
    )
    return out, lse
