"""KDA gate activations (how the log-decay ``g`` is produced from the gate projection).

KERNELS.md section 1.4, after FLA's ``naive_kda_gate`` / ``naive_kda_lowerbound_gate``.
Both are plain PyTorch, computed in fp32, and return ``g`` ready for ``chunk_kda``.
"""

from __future__ import annotations

import torch


def _per_head(A_log: torch.Tensor | None, dt_bias: torch.Tensor | None, H: int, K: int):
    a = None
    if A_log is not None:
        if A_log.numel() != H:
            raise ValueError(f"A_log must have H = {H} elements; got shape {tuple(A_log.shape)}")
        a = A_log.float().reshape(H, 1).exp()
    b = None
    if dt_bias is not None:
        if dt_bias.numel() != H * K:
            raise ValueError(
                f"dt_bias must have H*K = {H * K} elements; got shape {tuple(dt_bias.shape)}"
            )
        b = dt_bias.float().reshape(H, K)
    return a, b


def kda_gate(
    g_raw: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Default KDA gate: ``g = -exp(A_log[h]) * softplus(g_raw + dt_bias[h, :])`` (<= 0).

    softplus is linear above 20, as in the original kernel.

    Args:
        g_raw: gate logits [B, T, H, K], any float dtype.
        A_log: [H] log of the per-head decay rate (fp32 in the model).
        dt_bias: [H * K] or [H, K] bias, or None.

    Returns:
        fp32 log-decay [B, T, H, K].

    Raises:
        ValueError: if A_log or dt_bias do not match H or H*K.
    """
    H, K = g_raw.shape[-2:]
    a, b = _per_head(A_log, dt_bias, H, K)
    x = g_raw.float() if b is None else g_raw.float() + b
    return -a * torch.nn.functional.softplus(x, beta=1.0, threshold=20.0)


def kda_lowerbound_gate(
    g_raw: torch.Tensor,
    A_log: torch.Tensor | None,
    dt_bias: torch.Tensor | None = None,
    lower_bound: float = -5.0,
) -> torch.Tensor:
    """Lower-bound ("safe") KDA gate: ``g = L * sigmoid(exp(A_log[h]) * (g_raw + dt_bias))`` in (L, 0).

    Args:
        g_raw: gate logits [B, T, H, K].
        A_log: [H] or None (then ``g = L * sigmoid(g_raw + dt_bias)``).
        dt_bias: [H * K] or [H, K] bias, or None.
        lower_bound: ``L`` in [-5, 0); per-token decay is at least ``exp(L)``.

    Returns:
        fp32 log-decay [B, T, H, K].

    Raises:
        ValueError: if ``lower_bound`` is outside [-5, 0) or A_log/dt_bias have the wrong size.
    """
    if not -5.0 <= lower_bound < 0.0:
        raise ValueError(f"lower_bound must be in [-5, 0); got {lower_bound}")
    H, K = g_raw.shape[-2:]
    a, b = _per_head(A_log, dt_bias, H, K)
    x = g_raw.float() if b is None else g_raw.float() + b
    if a is not None:
        x = a * x
    return lower_bound * torch.sigmoid(x)
