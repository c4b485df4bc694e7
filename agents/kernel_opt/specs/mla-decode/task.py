"""The mla-decode campaign's inputs (``randn / 10``, KERNELS.md section 2.4), oracle and baseline."""

from __future__ import annotations

import math

import torch

SM_SCALE = 1 / math.sqrt(192)  # DeepSeek-V3's softmax scale on the absorbed 576-dim dot


def make_inputs(shape: dict, dtype: str, device: str, seed: int):
    """q [B, H, 576], kv [B, T, 576] in ``dtype``; returns ``((q, kv, SM_SCALE), {})``."""
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(seed)
    q = (torch.randn(shape["b"], shape["h"], 576, generator=gen) / 10).to(device=device, dtype=dt)
    kv = (torch.randn(shape["b"], shape["t"], 576, generator=gen) / 10).to(device=device, dtype=dt)
    return (q, kv, SM_SCALE), {}


def reference(q, kv, sm_scale):
    """fp32 oracle: ``(out [B, H, 512] in q's dtype, lse [B, H] fp32)``."""
    s = torch.einsum("bhd,btd->bht", q.float(), kv.float()) * sm_scale
    lse = torch.logsumexp(s, dim=-1)
    out = torch.einsum("bht,btd->bhd", torch.softmax(s, dim=-1), kv[..., :512].float())
    return out.to(q.dtype), lse


def baseline(q, kv, sm_scale):
    """The PyTorch baseline the campaign is timed against (same math as the oracle)."""
    return reference(q, kv, sm_scale)


def work(shape: dict, dtype: str) -> tuple[int, int]:
    """(bytes, FLOPs) of one call: the cache once, q and out; ``2 H T (576 + 512)`` FLOPs per sequence."""
    b, h, t = shape["b"], shape["h"], shape["t"]
    size = torch.finfo(getattr(torch, dtype)).bits // 8
    return size * (b * t * 576 + b * h * (576 + 512)), 2 * b * h * t * (576 + 512)
