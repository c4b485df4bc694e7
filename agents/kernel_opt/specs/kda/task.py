"""The kda campaign's inputs (FLA's test recipe, KERNELS.md section 1.8) and work per call."""

from __future__ import annotations

import torch


def make_inputs(shape: dict, dtype: str, device: str, seed: int):
    """q, k (L2-normalised), v, g = logsigmoid(randn), beta, h0; returns ``(args, kwargs)``.

    q, k, v, beta are in ``dtype``; g and the initial state are fp32 (KERNELS.md section 0).
    """
    F = torch.nn.functional
    B, T, H, D = shape["b"], shape["t"], shape["h"], shape["d"]
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.rand(B, T, H, D, generator=gen), dim=-1)
    k = F.normalize(torch.rand(B, T, H, D, generator=gen), dim=-1)
    v = torch.rand(B, T, H, D, generator=gen)
    g = F.logsigmoid(torch.randn(B, T, H, D, generator=gen))
    beta = torch.randn(B, T, H, generator=gen).sigmoid()
    h0 = torch.randn(B, H, D, D, generator=gen) * 0.1
    args = tuple(x.to(device=device, dtype=dt) for x in (q, k, v)) + (
        g.to(device),
        beta.to(device=device, dtype=dt),
    )
    return args, {"initial_state": h0.to(device), "output_final_state": True}


def work(shape: dict, dtype: str) -> tuple[int, int]:
    """(bytes, FLOPs) of one call: q, k, v, o in dtype, g fp32, beta, the two fp32 states;
    FLOPs by the tech report's eq. 13 with C = 64."""
    B, T, H, D = shape["b"], shape["t"], shape["h"], shape["d"]
    size = torch.finfo(getattr(torch, dtype)).bits // 8
    th = B * T * H
    return th * (4 * D * size + D * 4 + size) + 2 * B * H * D * D * 4, th * (6 * D * D + 3 * 64 * D + 64 * 64)
