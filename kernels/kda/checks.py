"""Argument checks shared by the KDA Triton entry points (``chunk_kda``, ``fused_recurrent_kda``).

Every check raises ``ValueError`` with a one-line message naming the argument, the expected
shape or dtype and what was given.
"""

from __future__ import annotations

import torch

from .cumsum import GATE_DEFAULT, GATE_LOWER_BOUND, GATE_NONE


def validate_inputs(q, k, v, g, beta, initial_state, cu_seqlens) -> tuple[int, ...]:
    """Check the shapes and dtypes of a KDA call (KERNELS.md section 0).

    Args:
        q, k, g: [B, T, H, K]; v: [B, T, H, V]; beta: [B, T, H]; initial_state: fp32
            [N, H, K, V] or None; cu_seqlens: [N + 1] or None (then B must be 1).

    Returns:
        ``(B, T, H, K, V, N)`` with N the number of sequences.

    Raises:
        ValueError: on a shape or dtype that does not fit, or K > 256.
    """
    if q.dim() != 4:
        raise ValueError(f"q must be [B, T, H, K]; got shape {tuple(q.shape)}")
    B, T, H, K = q.shape
    if k.shape != q.shape or g.shape != q.shape:
        raise ValueError(
            f"q, k, g must share shape [B, T, H, K]; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(g.shape)}"
        )
    if v.dim() != 4 or v.shape[:3] != (B, T, H):
        raise ValueError(f"v must be [B, T, H, V] with B, T, H = {B}, {T}, {H}; got {tuple(v.shape)}")
    if beta.shape != (B, T, H):
        raise ValueError(f"beta must be [B, T, H] = [{B}, {T}, {H}]; got {tuple(beta.shape)}")
    if K > 256:
        raise ValueError(f"head dim K = {K} > 256 is not supported")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise ValueError(f"q, k, v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"unsupported dtype {q.dtype}")
    V = v.shape[-1]
    N = B
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"with cu_seqlens the batch must be flattened to B = 1; got B = {B}")
        if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
            raise ValueError("cu_seqlens must be a 1-D tensor [N + 1]")
        N = cu_seqlens.numel() - 1
    if initial_state is not None:
        if initial_state.shape != (N, H, K, V):
            raise ValueError(
                f"initial_state must be [N, H, K, V] = [{N}, {H}, {K}, {V}]; got {tuple(initial_state.shape)}"
            )
        if initial_state.dtype != torch.float32:
            raise ValueError(f"initial_state must be float32; got {initial_state.dtype}")
    return B, T, H, K, V, N


def gate_mode(
    use_gate_in_kernel: bool,
    A_log: torch.Tensor | None,
    dt_bias: torch.Tensor | None,
    lower_bound: float | None,
    H: int,
    K: int,
) -> int:
    """Which gate the cumsum stage applies (``cumsum.GATE_*``), after checking its parameters.

    Raises:
        ValueError: lower_bound outside [-5, 0), the default gate without A_log, or A_log /
            dt_bias with the wrong number of elements (H, H * K).
    """
    if not use_gate_in_kernel:
        return GATE_NONE
    if lower_bound is not None:
        if not -5.0 <= lower_bound < 0.0:
            raise ValueError(f"lower_bound must be in [-5, 0); got {lower_bound}")
        mode = GATE_LOWER_BOUND
    else:
        if A_log is None:
            raise ValueError("use_gate_in_kernel without lower_bound needs A_log")
        mode = GATE_DEFAULT
    if A_log is not None and A_log.numel() != H:
        raise ValueError(f"A_log must have H = {H} elements; got {tuple(A_log.shape)}")
    if dt_bias is not None and dt_bias.numel() != H * K:
        raise ValueError(f"dt_bias must have H*K = {H * K} elements; got {tuple(dt_bias.shape)}")
    return mode
