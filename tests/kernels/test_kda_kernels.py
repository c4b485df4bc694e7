"""KDA: references against each other, Triton chunk_kda and fused_recurrent_kda against the references.

Shapes follow KERNELS.md sections 1.8/1.9 scaled down for the CPU interpreter (section 3.3):
T not a multiple of 64, T = 1, D = 60, strong decay (normaliser 0.1), masked gates, varlen.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from musec.kernels.kda import (  # noqa: E402
    MAX_RECURRENT_T,
    chunk_kda,
    fused_recurrent_kda,
    kda_gate,
    kda_lowerbound_gate,
    naive_chunk_kda,
    naive_recurrent_kda,
)
from musec.kernels.testing import assert_close, tolerance  # noqa: E402

F = torch.nn.functional
needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
    reason="bf16 kernels need a CUDA GPU (the Triton interpreter cannot do bf16 arithmetic)",
)


def make_inputs(
    B, T, H, K, V, *, normalizer=1.0, mask_p=0.0, dtype=torch.float32, device="cpu", seed=0
):
    """FLA's test recipe: uniform q,k,v with q,k L2-normalised, g = logsigmoid(randn)/normalizer."""
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.rand(B, T, H, K, generator=gen), dim=-1)
    k = F.normalize(torch.rand(B, T, H, K, generator=gen), dim=-1)
    v = torch.rand(B, T, H, V, generator=gen)
    g = F.logsigmoid(torch.randn(B, T, H, K, generator=gen)) / normalizer
    if mask_p:
        g = g * (torch.rand(B, T, H, K, generator=gen) > mask_p)
    beta = torch.randn(B, T, H, generator=gen).sigmoid()
    h0 = torch.randn(B, H, K, V, generator=gen)
    cast = [x.to(device=device, dtype=dtype) for x in (q, k, v)]
    return (*cast, g.to(device), beta.to(device=device, dtype=dtype), h0.to(device))


CASES = [
    # B, T, H, K, V, normalizer, mask_p
    pytest.param(1, 1, 1, 32, 32, 1.0, 0.0, id="T1"),
    pytest.param(1, 63, 1, 64, 64, 1.0, 0.0, id="T63"),
    pytest.param(1, 64, 2, 32, 32, 1.0, 0.0, id="T64"),
    pytest.param(2, 130, 2, 60, 60, 0.1, 0.0, id="D60-strong-decay"),
    pytest.param(1, 200, 1, 32, 48, 10.0, 0.5, id="weak-decay-masked-KneV"),
    pytest.param(1, 128, 1, 16, 16, 1.0, 0.9, id="mostly-masked"),
]


@pytest.mark.parametrize(("B", "T", "H", "K", "V", "normalizer", "mask_p"), CASES)
def test_naive_chunk_matches_recurrent(B, T, H, K, V, normalizer, mask_p):
    q, k, v, g, beta, h0 = make_inputs(B, T, H, K, V, normalizer=normalizer, mask_p=mask_p)
    o_ref, s_ref = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = naive_chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert_close("o", o_ref, o, tolerance(torch.float32))
    assert_close("final_state", s_ref, s, tolerance(torch.float32))


@pytest.mark.parametrize(("B", "T", "H", "K", "V", "normalizer", "mask_p"), CASES)
def test_chunk_kda_matches_reference(B, T, H, K, V, normalizer, mask_p, device):
    q, k, v, g, beta, h0 = make_inputs(
        B, T, H, K, V, normalizer=normalizer, mask_p=mask_p, device=device
    )
    o_ref, s_ref = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert o.dtype == v.dtype and s.dtype == torch.float32
    assert_close("o", o_ref, o, tolerance(torch.float32))
    assert_close("final_state", s_ref, s, tolerance(torch.float32))


@pytest.mark.parametrize("scale", [None, 0.3])
def test_chunk_kda_without_states(scale, device):
    q, k, v, g, beta, _ = make_inputs(1, 80, 2, 32, 32, device=device)
    o_ref, _ = naive_recurrent_kda(q, k, v, g, beta, scale=scale)
    o, s = chunk_kda(q, k, v, g, beta, scale=scale)
    assert s is None
    assert_close("o", o_ref, o, tolerance(torch.float32))


def _per_sequence_reference(q, k, v, g, beta, h0, cu):
    outs, states = [], []
    for n in range(len(cu) - 1):
        a, b = cu[n], cu[n + 1]
        o, s = naive_recurrent_kda(
            q[:, a:b],
            k[:, a:b],
            v[:, a:b],
            g[:, a:b],
            beta[:, a:b],
            initial_state=h0[n : n + 1],
            output_final_state=True,
        )
        outs.append(o)
        states.append(s)
    return torch.cat(outs, 1), torch.cat(states, 0)


@pytest.mark.parametrize(
    "lengths", [[15, 85, 64, 36], [1, 130], [64, 64]], ids=["mixed", "short-long", "exact"]
)
def test_chunk_kda_varlen(lengths, device):
    T, H, K, V = sum(lengths), 2, 32, 32
    q, k, v, g, beta, _ = make_inputs(1, T, H, K, V, normalizer=0.5, device=device)
    h0 = torch.randn(len(lengths), H, K, V, generator=torch.Generator().manual_seed(1)).to(device)
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    o_ref, s_ref = _per_sequence_reference(q, k, v, g, beta, h0, cu)
    cu_t = torch.tensor(cu, dtype=torch.long, device=device)
    o, s = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu_t)
    assert_close("o", o_ref, o, tolerance(torch.float32))
    assert_close("final_state", s_ref, s, tolerance(torch.float32))
    if max(lengths) <= MAX_RECURRENT_T:
        o2, s2 = fused_recurrent_kda(
            q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu_t
        )
        assert_close("o (recurrent)", o_ref, o2, tolerance(torch.float32))
        assert_close("final_state (recurrent)", s_ref, s2, tolerance(torch.float32))


def test_chunk_kda_default_gate_in_kernel(device):
    B, T, H, K, V = 1, 70, 2, 32, 32
    q, k, v, _, beta, h0 = make_inputs(B, T, H, K, V, device=device)
    gen = torch.Generator().manual_seed(3)
    g_raw = torch.randn(B, T, H, K, generator=gen).to(device)
    A_log = torch.log(torch.empty(H).uniform_(1, 16, generator=gen)).to(device)
    dt_bias = torch.randn(H * K, generator=gen).to(device)
    g = kda_gate(g_raw, A_log, dt_bias)
    o_ref, s_ref = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = chunk_kda(
        q,
        k,
        v,
        g_raw,
        beta,
        initial_state=h0,
        output_final_state=True,
        use_gate_in_kernel=True,
        A_log=A_log,
        dt_bias=dt_bias,
    )
    assert_close("o", o_ref, o, tolerance(torch.float32))
    assert_close("final_state", s_ref, s, tolerance(torch.float32))


@pytest.mark.parametrize("with_a_log", [True, False])
def test_chunk_kda_lowerbound_gate_in_kernel(with_a_log, device):
    B, T, H, K, V = 1, 70, 2, 32, 32
    q, k, v, _, beta, h0 = make_inputs(B, T, H, K, V, device=device)
    gen = torch.Generator().manual_seed(4)
    g_raw = torch.randn(B, T, H, K, generator=gen).to(device)
    A_log = torch.zeros(H).to(device) if with_a_log else None
    dt_bias = torch.randn(H * K, generator=gen).to(device)
    g = kda_lowerbound_gate(g_raw, A_log, dt_bias, lower_bound=-5.0)
    assert bool((g < 0).all() and (g > -5).all())
    o_ref, _ = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0)
    o, _ = chunk_kda(
        q,
        k,
        v,
        g_raw,
        beta,
        initial_state=h0,
        use_gate_in_kernel=True,
        A_log=A_log,
        dt_bias=dt_bias,
        lower_bound=-5.0,
    )
    assert_close("o", o_ref, o, tolerance(torch.float32))


def test_gate_helpers_formulas():
    g_raw = torch.tensor([[[[-30.0, 0.0, 25.0]]]])  # [1, 1, 1, 3]
    A_log = torch.tensor([0.5])
    dt_bias = torch.tensor([0.1, 0.2, 0.3])
    got = kda_gate(g_raw, A_log, dt_bias)
    x = g_raw + dt_bias
    want = -torch.exp(A_log) * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
    torch.testing.assert_close(got, want)
    got = kda_lowerbound_gate(g_raw, A_log, dt_bias, lower_bound=-2.0)
    torch.testing.assert_close(got, -2.0 * torch.sigmoid(torch.exp(A_log) * x))
    with pytest.raises(ValueError, match="lower_bound"):
        kda_lowerbound_gate(g_raw, None, None, lower_bound=0.5)
    with pytest.raises(ValueError, match="A_log"):
        kda_gate(g_raw, torch.zeros(2), None)


@pytest.mark.parametrize(
    ("B", "T", "H", "K", "V"), [(2, 1, 1, 32, 32), (1, 37, 2, 60, 40), (1, 64, 1, 64, 64)]
)
def test_fused_recurrent_matches_reference(B, T, H, K, V, device):
    q, k, v, g, beta, h0 = make_inputs(B, T, H, K, V, normalizer=0.1, device=device)
    o_ref, s_ref = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert_close("o", o_ref, o, tolerance(torch.float32))
    assert_close("final_state", s_ref, s, tolerance(torch.float32))


def test_fused_recurrent_rejects_long_sequences():
    q, k, v, g, beta, _ = make_inputs(1, MAX_RECURRENT_T + 1, 1, 16, 16)
    with pytest.raises(ValueError, match="at most"):
        fused_recurrent_kda(q, k, v, g, beta)


def test_chunk_kda_rejects_bad_inputs():
    q, k, v, g, beta, h0 = make_inputs(2, 8, 1, 16, 16)
    with pytest.raises(ValueError, match="beta"):
        chunk_kda(q, k, v, g, beta[:, :4])
    with pytest.raises(ValueError, match="float32"):
        chunk_kda(q, k, v, g, beta, initial_state=h0.double())
    with pytest.raises(ValueError, match="initial_state"):
        chunk_kda(q, k, v, g, beta, initial_state=h0[:1])
    with pytest.raises(ValueError, match="B = 1"):
        chunk_kda(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 8]))
    with pytest.raises(ValueError, match="A_log"):
        chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True)
    q1, k1, v1, g1, beta1 = (x[:1] for x in (q, k, v, g, beta))
    with pytest.raises(ValueError, match="cu_seqlens"):
        chunk_kda(q1, k1, v1, g1, beta1, cu_seqlens=torch.tensor([0, 3, 6]))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize(("B", "T", "H", "D"), [(1, 63, 1, 64), (2, 500, 3, 60), (2, 1024, 4, 128)])
@pytest.mark.parametrize("normalizer", [0.1, 1.0])
def test_chunk_kda_bf16_gpu(B, T, H, D, normalizer):
    q, k, v, g, beta, h0 = make_inputs(
        B, T, H, D, D, normalizer=normalizer, dtype=torch.bfloat16, device="cuda"
    )
    o_ref, s_ref = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert o.dtype == torch.bfloat16
    assert_close("o", o_ref, o, tolerance(torch.bfloat16))
    assert_close("final_state", s_ref, s, tolerance(torch.bfloat16))


@pytest.mark.gpu
@needs_gpu
def test_fused_recurrent_bf16_gpu():
    q, k, v, g, beta, h0 = make_inputs(4, 64, 4, 128, 128, dtype=torch.bfloat16, device="cuda")
    o_ref, s_ref = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert_close("o", o_ref, o, tolerance(torch.bfloat16))
    assert_close("final_state", s_ref, s, tolerance(torch.bfloat16))
