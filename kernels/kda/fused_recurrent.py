"""Triton fused recurrent KDA forward for short sequences (T <= 64 per sequence; decode).

One program per (sequence, head, V-tile) keeps its [K, BV] slice of the state in registers and
runs the exact recurrence of KERNELS.md section 1.2 token by token (no chunking), the way
``fused_recurrent_kda`` is used for short prompts and decode steps. Written from that math.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import next_pow2, tune_configs

from .checks import validate_inputs

#: Longest sequence the recurrent kernel accepts; longer ones belong to ``chunk_kda``.
MAX_RECURRENT_T = 64


def _configs():
    return tune_configs(
        [triton.Config({"BV": bv}, num_warps=w) for bv in (32, 16, 64) for w in (1, 2, 4)]
    )


@triton.autotune(configs=_configs(), key=["K", "V"])
@triton.jit
def _fused_recurrent_kernel(
    q,
    k,
    v,
    g,
    beta,
    o,
    h0,
    ht,
    cu_seqlens,
    T,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    HAS_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n = tl.cast(i_nh // H, tl.int64)
    i_h = i_nh % H
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        bos = i_n * T
        eos = bos + T
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    s_offs = ((i_n * H + i_h) * K + o_k[:, None]) * V + o_v[None, :]
    s_mask = m_k[:, None] & m_v[None, :]
    if HAS_H0:
        S = tl.load(h0 + s_offs, mask=s_mask, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    for i in range(0, eos - bos):
        t = bos + tl.cast(i, tl.int64)
        b_q = tl.load(q + (t * H + i_h) * K + o_k, mask=m_k, other=0.0).to(tl.float32) * scale
        b_k = tl.load(k + (t * H + i_h) * K + o_k, mask=m_k, other=0.0).to(tl.float32)
        b_g = tl.load(g + (t * H + i_h) * K + o_k, mask=m_k, other=0.0).to(tl.float32)
        b_v = tl.load(v + (t * H + i_h) * V + o_v, mask=m_v, other=0.0).to(tl.float32)
        b_b = tl.load(beta + t * H + i_h).to(tl.float32)
        S = S * tl.exp(b_g)[:, None]
        u = b_b * (b_v - tl.sum(S * b_k[:, None], axis=0))
        S = S + b_k[:, None] * u[None, :]
        b_o = tl.sum(S * b_q[:, None], axis=0)
        tl.store(o + (t * H + i_h) * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if STORE_HT:
        tl.store(ht + s_offs, S, mask=s_mask)


def fused_recurrent_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA forward by the token-by-token recurrence in one Triton kernel, for sequences of <= 64 tokens.

    Args:
        q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens: exactly as
            ``chunk_kda`` (g is the activated log-decay; no in-kernel gate here).

    Returns:
        ``(o, final_state)``: o [B, T, H, V] in v's dtype; final_state fp32 [N, H, K, V] or None.

    Raises:
        ValueError: on inconsistent shapes/dtypes, K > 256, or a sequence longer than
            ``MAX_RECURRENT_T`` tokens (use ``chunk_kda``).
    """
    B, T, H, K, V, N = validate_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    if cu_seqlens is not None:
        longest = int((cu_seqlens[1:] - cu_seqlens[:-1]).max()) if N else 0
    else:
        longest = T
    if longest > MAX_RECURRENT_T:
        raise ValueError(
            f"fused_recurrent_kda takes sequences of at most {MAX_RECURRENT_T} tokens; got {longest}"
        )
    scale = K**-0.5 if scale is None else float(scale)
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    o = torch.empty_like(v)
    final = (
        torch.empty(N, H, K, V, device=q.device, dtype=torch.float32)
        if output_final_state
        else None
    )
    cu = (
        cu_seqlens.to(device=q.device, dtype=torch.int32).contiguous()
        if cu_seqlens is not None
        else None
    )

    def grid(meta):
        return (triton.cdiv(V, meta["BV"]), N * H)

    _fused_recurrent_kernel[grid](
        q,
        k,
        v,
        g,
        beta,
        o,
        initial_state.contiguous() if initial_state is not None else o,
        final if final is not None else o,
        cu,
        T,
        scale,
        H=H,
        K=K,
        V=V,
        BK=next_pow2(K),
        IS_VARLEN=cu is not None,
        HAS_H0=initial_state is not None,
        STORE_HT=final is not None,
    )
    return o, final
