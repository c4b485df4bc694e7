"""Triton MLA decode (absorbed form): split-KV partials with online softmax, then a log-sum-exp combine.

Flash-Decoding (Dao et al., CRFM blog 2023-10-12) applied to MLA's single shared latent KV head
(KERNELS.md sections 2.1-2.3); written from that math. ``mla_decode`` checks its arguments and
runs the two stages, each in its own module:

1. ``split_kv.py``  per (sequence, head block, split): normalised partial outputs and their
   base-2 log-sum-exps, with an online softmax over the split's tokens;
2. ``combine.py``   per (sequence, head): the log-sum-exp weighted mean of the partials.

The cache is dense ``[B, T, 576]`` or paged ``[num_pages, 64, 576]`` with an int32 block table.
"""

from __future__ import annotations

import torch
import triton
from musec.kernels._runtime import is_interpreter

from .combine import combine_partials
from .reference import D_QK, PAGE
from .split_kv import split_kv_partials


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
    q, kv, T, kv_lens, block_table = _check_args(q, kv, kv_lens, block_table)
    B, H, _ = q.shape
    if num_splits is None:
        num_splits = default_num_splits(B, H, T, q.device)
    if not 1 <= int(num_splits) <= 1024:
        raise ValueError(f"num_splits must be in 1..1024; got {num_splits}")
    o_part, lse_part = split_kv_partials(q, kv, sm_scale, int(num_splits), T, kv_lens, block_table)
    return combine_partials(o_part, lse_part, q.dtype)


def _check_args(q, kv, kv_lens, block_table):
    """Check shapes and dtypes; return ``(q, kv, T, kv_lens, block_table)`` ready for the kernels.

    Raises:
        ValueError: see ``mla_decode``.
    """
    if q.dim() != 3 or q.shape[-1] != D_QK:
        raise ValueError(f"q must be [B, H, {D_QK}]; got {tuple(q.shape)}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"unsupported dtype {q.dtype}")
    if kv.dtype != q.dtype:
        raise ValueError(f"kv must have q's dtype {q.dtype}; got {kv.dtype}")
    B = q.shape[0]
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
    return q, kv, T, kv_lens, block_table


__all__ = ["default_num_splits", "mla_decode"]
