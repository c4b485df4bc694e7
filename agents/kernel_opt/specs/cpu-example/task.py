"""The CPU example's task: inputs, the fp64 reference, and the slow baseline."""

from __future__ import annotations

import torch


def make_inputs(shape: dict, dtype: str, device: str, seed: int):
    """x [n, d] and w [d, m] in ``dtype`` on ``device``; returns ``((x, w), {})``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["n"], shape["d"], generator=gen).to(device=device, dtype=getattr(torch, dtype))
    w = torch.randn(shape["d"], shape["m"], generator=gen).to(device=device, dtype=getattr(torch, dtype))
    return (x, w), {}


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """softmax(x @ w) over the last dim, computed in fp64, returned in x's dtype."""
    return torch.softmax(x.double() @ w.double(), dim=-1).to(x.dtype)


def baseline(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The slow version the campaign starts from: one row at a time."""
    out = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype)
    for i in range(x.shape[0]):
        row = x[i] @ w
        row = row - row.max()
        e = row.exp()
        out[i] = e / e.sum()
    return out


def work(shape: dict, dtype: str) -> tuple[int, int]:
    """(bytes moved, FLOPs) of one call: read x and w, write the output; matmul + softmax."""
    n, d, m = shape["n"], shape["d"], shape["m"]
    size = torch.finfo(getattr(torch, dtype)).bits // 8
    return size * (n * d + d * m + n * m), 2 * n * d * m + 4 * n * m
