"""Triton chunked KDA forward (``chunk_kda``): chunk 64, WY representation, sequential state scan.

The chunk algorithm of the Kimi Linear tech report (arXiv 2510.26692, eqs. 6-9) as restated in
``shared/KERNELS.md`` section 1.6, written from that math, not from any kernel library. The
host function below is the algorithm's table of contents; each stage lives in its own module:

0. ``cumsum.py``  gate activation (optional) and chunk-local cumulative log-decay ``G``
1. ``intra.py``   intra-chunk scores ``Aqk`` and the triangular inverse ``M = (I + Akk)^-1``
2. ``wy.py``      WY factors ``W = M diag(beta) (exp(G) K)`` and ``U = M diag(beta) V``
3. ``state.py``   inter-chunk recurrence: states ``h`` entering each chunk, pseudo-values
                  ``V_new = U - W h``, the final state
4. ``output.py``  ``O = scale (exp(G) Q) h + Aqk V_new``, in parallel over chunks

``index.py`` holds what the stages share: the chunking of a (varlen) batch, chunk and
sequence bounds, masked tile loads and stores. Chunks never cross a sequence boundary; padded
rows of a partial last chunk are masked (k = v = beta = 0) and their cumulative decay is pinned
to the last valid row, so no decay exponent is ever positive.

Intermediates (rows are flattened tokens): G fp32 [B*T, H, K]; Aqk [B*T, H, 64] in the input
dtype; M fp32 [B*T, H, 64]; W, U [B*T, H, K|V] in the input dtype; h [chunks, H, K, V] in the
input dtype; V_new [B*T, H, V] in the input dtype. Accumulation is fp32 throughout.
"""

from __future__ import annotations

import torch

from .checks import gate_mode, validate_inputs
from .cumsum import chunk_local_cumsum
from .index import prepare_chunk_indices, prepare_chunking
from .intra import chunk_kda_fwd_intra
from .output import chunk_output
from .state import chunk_state
from .wy import recompute_w_u

__all__ = ["chunk_kda", "prepare_chunk_indices"]


def chunk_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    *,
    use_gate_in_kernel: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    lower_bound: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA forward with the chunked algorithm in Triton (chunk size 64). Forward only.

    Semantics are those of ``naive_recurrent_kda`` (KERNELS.md section 1.2); the algorithm is
    the chunked WY form of section 1.6 (module docstring).

    Args:
        q: queries [B, T, H, K] (fp32, fp16 or bf16), L2-normalised over K by the caller.
        k: keys [B, T, H, K], same dtype, L2-normalised over K.
        v: values [B, T, H, V], same dtype.
        g: log-decay [B, T, H, K] (natural log, <= 0; any float dtype, used in fp32), or the raw
            gate logits when ``use_gate_in_kernel``.
        beta: [B, T, H] in (0, 1).
        scale: query scale, default ``K ** -0.5``.
        initial_state: fp32 [N, H, K, V] with N = B, or the number of sequences with cu_seqlens.
        output_final_state: return the fp32 state [N, H, K, V] after each sequence's last token.
        cu_seqlens: [N + 1] int cumulative lengths for a variable-length batch flattened into
            B = 1; each sequence has its own state and chunks never cross a boundary.
        use_gate_in_kernel: ``g`` is raw; apply the gate in the cumsum kernel:
            ``-exp(A_log[h]) * softplus(g + dt_bias)``, or with ``lower_bound`` set
            ``lower_bound * sigmoid(exp(A_log[h]) * (g + dt_bias))`` (see ``gate.py``).
        A_log: fp32 [H] (required for the default gate, optional for the lower-bound gate).
        dt_bias: fp32 [H * K] or None.
        lower_bound: in [-5, 0) to select the lower-bound gate.

    Returns:
        ``(o, final_state)``: o [B, T, H, V] in v's dtype; final_state fp32 [N, H, K, V] or None.

    Raises:
        ValueError: on inconsistent shapes or dtypes, K > 256, cu_seqlens that do not rise from
            0 to T, or a gate configuration that is missing A_log.
    """
    B, T, H, K, V, N = validate_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    gate = gate_mode(use_gate_in_kernel, A_log, dt_bias, lower_bound, H, K)
    scale = K**-0.5 if scale is None else float(scale)
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    chunking = prepare_chunking(B, T, cu_seqlens, q.device)
    if chunking.n_chunks == 0:  # T == 0, or only empty sequences
        return _empty_result(v, N, H, K, V, initial_state, output_final_state)

    gc = chunk_local_cumsum(g, chunking, gate, A_log, dt_bias, lower_bound)
    Aqk, M = chunk_kda_fwd_intra(q, k, gc, beta, scale, chunking)
    W, U = recompute_w_u(k, v, gc, beta, M, chunking)
    h, v_new, final = chunk_state(k, gc, W, U, initial_state, output_final_state, chunking)
    o = chunk_output(q, gc, h, v_new, Aqk, scale, chunking, v.dtype)
    return o, final


def _empty_result(v, N, H, K, V, initial_state, output_final_state):
    """Result of a call with no tokens: an empty o; the final state is the initial one."""
    o = torch.empty_like(v)
    if not output_final_state:
        return o, None
    if initial_state is not None:
        return o, initial_state.clone()
    return o, torch.zeros(N, H, K, V, device=v.device, dtype=torch.float32)
