"""PyTorch references for KDA (Kimi Delta Attention): the exact recurrence and the chunked form.

Both compute in fp32 whatever the input dtype. They are the correctness oracles for the Triton
kernels in ``chunk.py`` and ``fused_recurrent.py``. Math: Kimi Linear tech report
(arXiv 2510.26692, eqs. 1 and 6-9); ``shared/KERNELS.md`` sections 1.2 and 1.6.
"""

from __future__ import annotations

import torch


def _check_inputs(q, k, v, g, beta, initial_state, n_seqs):
    B, T, H, K = q.shape
    V = v.shape[-1]
    if k.shape != q.shape or g.shape != q.shape:
        raise ValueError(
            f"q, k, g must share shape [B, T, H, K]; got {q.shape}, {k.shape}, {g.shape}"
        )
    if v.shape[:3] != (B, T, H):
        raise ValueError(f"v must be [B, T, H, V] = [{B}, {T}, {H}, V]; got {tuple(v.shape)}")
    if beta.shape != (B, T, H):
        raise ValueError(f"beta must be [B, T, H] = [{B}, {T}, {H}]; got {tuple(beta.shape)}")
    if initial_state is not None and initial_state.shape != (n_seqs, H, K, V):
        raise ValueError(
            f"initial_state must be [N, H, K, V] = [{n_seqs}, {H}, {K}, {V}]; got {tuple(initial_state.shape)}"
        )


def naive_recurrent_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA forward, token by token, in fp32 (the exact recurrence of KERNELS.md section 1.2).

    Per batch b, head h and token t, with state ``S`` of shape [K, V]::

        S  <- Diag(exp(g_t)) S
        u  =  beta_t * (v_t - S^T k_t)
        S  <- S + k_t u^T
        o_t = S^T (scale * q_t)

    Args:
        q: queries [B, T, H, K], any float dtype, expected L2-normalised over K.
        k: keys [B, T, H, K], expected L2-normalised over K.
        v: values [B, T, H, V].
        g: per-channel log-decay [B, T, H, K] (natural log, <= 0), already activated.
        beta: delta-rule strength [B, T, H], in (0, 1).
        scale: query scale; defaults to ``K ** -0.5``.
        initial_state: fp32 [B, H, K, V] state entering token 0, or None for zeros.
        output_final_state: whether to return the state after the last token.

    Returns:
        ``(o, final_state)``: o [B, T, H, V] in v's dtype; final_state fp32 [B, H, K, V] or None.

    Raises:
        ValueError: on inconsistent shapes.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    _check_inputs(q, k, v, g, beta, initial_state, B)
    scale = K**-0.5 if scale is None else scale
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.float().clone()
    o = q.new_zeros(B, T, H, V)
    for t in range(T):
        S = S * g[:, t].exp()[..., None]
        kt = k[:, t]
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhk,bhkv->bhv", kt, S))
        S = S + kt[..., None] * u[..., None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, S)
    return o.to(v.dtype), (S if output_final_state else None)


def naive_chunk_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA forward by the chunked (WY / UT-transform) algorithm, in plain fp32 PyTorch.

    Follows KERNELS.md section 1.6 stage by stage: chunk-local cumsum of g, the intra-chunk
    matrices Akk and Aqk (evaluated exactly per channel, no reference points), the triangular
    inverse ``M = (I + Akk)^-1``, the WY factors ``W = M diag(beta) (Gamma * K)`` and
    ``U = M diag(beta) V``, the sequential state scan ``V_new = U - W S``,
    ``S <- diag(Gamma_C) S + Kg^T V_new`` and the output ``O = scale (Gamma * Q) S + Aqk V_new``.
    Any T is accepted: the sequence is zero-padded to a multiple of ``chunk_size`` (padding
    with k = v = beta = 0 and g = 0 leaves the state unchanged).

    Args:
        q, k, v, g, beta, scale, initial_state, output_final_state: as ``naive_recurrent_kda``.
        chunk_size: tokens per chunk C.

    Returns:
        ``(o, final_state)`` as ``naive_recurrent_kda``.

    Raises:
        ValueError: on inconsistent shapes.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    _check_inputs(q, k, v, g, beta, initial_state, B)
    scale = K**-0.5 if scale is None else scale
    out_dtype = v.dtype
    C = chunk_size
    NT = -(-T // C)
    pad = NT * C - T

    def prep(x):  # [B, T, H, ...] -> [B, H, NT, C, ...] fp32, zero padded
        x = x.float().transpose(1, 2)
        if pad:
            x = torch.nn.functional.pad(x, (0, 0) * (x.dim() - 3) + (0, pad))
        return x.reshape(B, H, NT, C, *x.shape[3:])

    q, k, v, g, beta = (prep(x) for x in (q, k, v, g, beta))
    q = q * scale
    G = g.cumsum(-2)  # [B, H, NT, C, K]
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = causal.clone().fill_diagonal_(False)
    # exp(G_r - G_i) for i <= r, evaluated exactly per channel (masked above the diagonal).
    diff = G[..., :, None, :] - G[..., None, :, :]  # [B, H, NT, C(r), C(i), K]
    decay = torch.where(causal[..., None], diff, torch.zeros((), device=q.device)).exp()
    decay = decay * causal[..., None]
    Akk = torch.einsum("...rd,...id,...rid->...ri", k, k, decay) * beta[..., None]
    Akk = Akk * strict
    Aqk = torch.einsum("...rd,...id,...rid->...ri", q, k, decay) * causal
    eye = torch.eye(C, device=q.device)
    M = torch.linalg.solve_triangular(
        eye + Akk, eye.expand_as(Akk), upper=False, unitriangular=True
    )
    Gam = G.exp()
    W = M @ (beta[..., None] * Gam * k)
    U = M @ (beta[..., None] * v)
    G_last = G[..., -1:, :]  # [B, H, NT, 1, K]
    Kg = k * (G_last - G).exp()
    Qg = q * Gam
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.float().clone()
    o = torch.empty(B, H, NT, C, V, device=q.device)
    for n in range(NT):
        v_new = U[:, :, n] - W[:, :, n] @ S
        o[:, :, n] = Qg[:, :, n] @ S + Aqk[:, :, n] @ v_new
        S = S * G_last[:, :, n, 0, :, None].exp() + Kg[:, :, n].transpose(-1, -2) @ v_new
    o = o.reshape(B, H, NT * C, V)[:, :, :T].transpose(1, 2)
    return o.to(out_dtype), (S if output_final_state else None)
