"""Stage 3 of chunked KDA: the inter-chunk state recurrence, serial over the chunks of a sequence.

For each chunk [t] of a sequence, with S the state entering it (KERNELS.md section 1.6,
stage 3; Kimi Linear tech report eq. 8):

    h[t]  = S                                          (stored for the output stage)
    V_new = U - W S                                    (pseudo-values, [C, V])
    S    <- diag(exp(G_C)) S + (exp(G_C - G) * K)^T V_new

``G_C`` is the cumulative decay at the chunk's last valid row. One program per (sequence,
head, V-tile) keeps its [K, BV] slice of S in fp32 registers; the chunk loop is serial.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from musec.kernels._runtime import next_pow2, tune_configs

from .index import CHUNK, Chunking, dot_precision, load_rows, load_vec, seq_bounds, store_rows


def _state_configs():
    return tune_configs(
        [
            triton.Config({"BV": bv}, num_warps=w, num_stages=s)
            for bv in (64, 32)
            for w in (4, 8)
            for s in (2, 3)
        ]
    )


@triton.autotune(configs=_state_configs(), key=["K", "V", "PREC"])
@triton.jit
def _state_kernel(k, gc, W, U, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, NT,
                  H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                  BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr,
                  IS_VARLEN: tl.constexpr, HAS_H0: tl.constexpr, STORE_HT: tl.constexpr):
    """Grid (V-tiles, N * H): h[chunk, h, :, tile], v_new rows and the final state of one head."""
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n = tl.cast(i_nh // H, tl.int64)
    i_h = i_nh % H
    bos, eos, first = seq_bounds(i_n, cu_seqlens, chunk_offsets, T, NT, IS_VARLEN)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    s_offs = o_k[:, None] * V + o_v[None, :]
    s_mask = (o_k < K)[:, None] & (o_v < V)[None, :]
    if HAS_H0:
        S = tl.load(h0 + (i_n * H + i_h) * K * V + s_offs, mask=s_mask, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(0, tl.cdiv(eos - bos, BT)):
        t0 = bos + tl.cast(i_t, tl.int64) * BT
        last = tl.minimum(t0 + BT, eos) - 1
        Sd = S.to(W.dtype.element_ty)
        tl.store(h + ((first + i_t) * H + i_h) * K * V + s_offs, Sd, mask=s_mask)
        w = load_rows(W, t0, eos, i_h, 0, H, K, BT, BK).to(W.dtype.element_ty)
        u = load_rows(U, t0, eos, i_h, i_v * BV, H, V, BT, BV)
        vn = (u - tl.dot(w, Sd, input_precision=PREC)).to(W.dtype.element_ty)
        store_rows(v_new, vn, t0, eos, i_h, i_v * BV, H, V, BT, BV)
        g = load_rows(gc, t0, eos, i_h, 0, H, K, BT, BK)
        g_last = load_vec(gc, last, i_h, 0, H, K, BK)
        kg = load_rows(k, t0, eos, i_h, 0, H, K, BT, BK) * tl.exp(g_last[None, :] - g)
        kg = kg.to(W.dtype.element_ty)
        S = S * tl.exp(g_last)[:, None] + tl.dot(tl.trans(kg), vn, input_precision=PREC)
    if STORE_HT:
        tl.store(ht + (i_n * H + i_h) * K * V + s_offs, S, mask=s_mask)


def chunk_state(
    k: torch.Tensor,
    gc: torch.Tensor,
    W: torch.Tensor,
    U: torch.Tensor,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    chunking: Chunking,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Inter-chunk state recurrence (stage 3).

    Args:
        k: [B, T, H, K] contiguous keys.
        gc: fp32 [B * T, H, K] chunk-local cumulative log-decay.
        W, U: [B * T, H, K] and [B * T, H, V] WY factors from ``recompute_w_u``, k's dtype.
        initial_state: fp32 [N, H, K, V] or None (zeros).
        output_final_state: also return the state after each sequence's last token.
        chunking: from ``index.prepare_chunking``.

    Returns:
        ``(h, v_new, final)``: h [n_chunks, H, K, V] the state entering each chunk, in k's
        dtype; v_new [B * T, H, V] in k's dtype; final fp32 [N, H, K, V] or None.
    """
    B, T, H, K = k.shape
    V = U.shape[-1]
    N = chunking.n_seqs
    dev = k.device
    h = torch.empty(chunking.n_chunks, H, K, V, device=dev, dtype=k.dtype)
    v_new = torch.empty(B * T, H, V, device=dev, dtype=k.dtype)
    final = torch.empty(N, H, K, V, device=dev, dtype=torch.float32) if output_final_state else None

    def grid(meta):
        return (triton.cdiv(V, meta["BV"]), N * H)

    _state_kernel[grid](
        k, gc, W, U, h, v_new,
        initial_state.contiguous() if initial_state is not None else gc,
        final if final is not None else gc,
        chunking.cu_seqlens, chunking.chunk_offsets, chunking.T, chunking.nt,
        H=H, K=K, V=V, BT=CHUNK, BK=next_pow2(K), PREC=dot_precision(k.dtype),
        IS_VARLEN=chunking.varlen, HAS_H0=initial_state is not None,
        STORE_HT=final is not None,
    )  # fmt: skip
    return h, v_new, final
