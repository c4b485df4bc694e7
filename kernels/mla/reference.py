"""fp32 PyTorch reference for absorbed-form MLA decode (DeepSeek-V2/V3 multi-head latent attention).

Math (KERNELS.md section 2.1): every head attends over one shared latent row per token,
``kv_t = [c_t ; k^R_t]`` of 576 = 512 + 64 values. Scores use all 576 dims, values are the
first 512::

    s[h, t] = sm_scale * (q[h] . kv[t]),  p = softmax_t(s),  out[h] = sum_t p[h, t] kv[t, :512]
    lse[h]  = log sum_t exp(s[h, t])      (natural log)

A sequence with no valid token gets ``out = 0`` and ``lse = -inf`` (the log of an empty sum).
"""

from __future__ import annotations

import torch

D_QK = 576  #: score dimension (512 latent + 64 rope)
D_V = 512  #: value dimension (the latent part of the row)
PAGE = 64  #: tokens per page of the paged cache (FlashMLA's fixed page size)


def paged_to_dense(kv_pages: torch.Tensor, block_table: torch.Tensor) -> torch.Tensor:
    """Gather a paged cache into a dense one.

    Args:
        kv_pages: [num_pages, 64, 576] cache pages.
        block_table: int32 [B, max_pages]; page ``block_table[b, i]`` holds tokens
            ``64 i .. 64 i + 63`` of sequence b.

    Returns:
        [B, max_pages * 64, 576] dense cache (rows past a sequence's length hold whatever the
        referenced pages hold; mask them with ``kv_lens``).

    Raises:
        ValueError: if the page size is not 64 or the shapes do not fit.
    """
    if kv_pages.dim() != 3 or kv_pages.shape[1] != PAGE:
        raise ValueError(
            f"paged kv must be [num_pages, {PAGE}, {D_QK}]; got {tuple(kv_pages.shape)}"
        )
    if block_table.dim() != 2:
        raise ValueError(f"block_table must be [B, max_pages]; got {tuple(block_table.shape)}")
    B, P = block_table.shape
    return kv_pages[block_table.long()].reshape(B, P * PAGE, kv_pages.shape[-1])


def mla_decode_reference(
    q: torch.Tensor,
    kv: torch.Tensor,
    sm_scale: float,
    kv_lens: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Absorbed-form MLA decode in fp32 PyTorch (one query token per sequence).

    Args:
        q: [B, H, 576] absorbed queries (``[W_UK^T q^C ; q^R]``), any float dtype.
        kv: dense cache [B, T, 576], or pages [num_pages, 64, 576] with ``block_table``.
        sm_scale: softmax scale applied to the 576-dim dot (the model's, e.g. 1/sqrt(192);
            not necessarily 1/sqrt(576)).
        kv_lens: int [B] valid tokens per sequence (default: all T); required when paged.
        block_table: int32 [B, max_pages] for a paged cache, or None.

    Returns:
        ``(out, lse)``: out [B, H, 512] in q's dtype, lse fp32 [B, H] (natural log).

    Raises:
        ValueError: on inconsistent shapes, or a paged cache without kv_lens.
    """
    if block_table is not None:
        if kv_lens is None:
            raise ValueError("a paged cache needs kv_lens")
        kv = paged_to_dense(kv, block_table)
    if q.dim() != 3 or q.shape[-1] != D_QK or kv.dim() != 3 or kv.shape[-1] != D_QK:
        raise ValueError(
            f"q must be [B, H, {D_QK}] and kv [B, T, {D_QK}]; got {tuple(q.shape)}, {tuple(kv.shape)}"
        )
    if kv.shape[0] != q.shape[0]:
        raise ValueError(f"batch mismatch: q has B = {q.shape[0]}, kv has {kv.shape[0]}")
    B, T = kv.shape[:2]
    qf, kvf = q.float(), kv.float()
    scores = torch.einsum("bhd,btd->bht", qf, kvf) * sm_scale
    if kv_lens is not None:
        valid = torch.arange(T, device=q.device)[None, :] < kv_lens.to(q.device).long()[:, None]
        scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.exp(scores - torch.where(lse.isfinite(), lse, 0.0)[..., None])
    out = torch.einsum("bht,btd->bhd", p, kvf[..., :D_V])
    return out.to(q.dtype), lse
