"""MLA decode: Triton split-KV + combine against the fp32 reference.

Awkward shapes of KERNELS.md section 2.6 at CPU-interpreter sizes: T not a multiple of the
tile or split size, T smaller than the number of splits (empty splits), sequences of different
lengths including an empty one, H in {16, 64, 128}, two sm_scale values, a paged cache.
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from musec.kernels.mla import D_QK, D_V, PAGE, mla_decode, mla_decode_reference, paged_to_dense  # noqa: E402
from musec.kernels.testing import assert_close, tolerance  # noqa: E402

needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
    reason="bf16 kernels need a CUDA GPU (the Triton interpreter cannot do bf16 arithmetic)",
)

#: DeepSeek-V3's softmax scale (1/sqrt(192)) and FlashMLA's default (1/sqrt(576)).
SCALES = [
    pytest.param(1 / math.sqrt(192), id="scale192"),
    pytest.param(1 / math.sqrt(576), id="scale576"),
]


def make_inputs(B, H, T, *, dtype=torch.float32, device="cpu", seed=0):
    """FlashMLA's test recipe: randn / 10."""
    gen = torch.Generator().manual_seed(seed)
    q = (torch.randn(B, H, D_QK, generator=gen) / 10).to(device=device, dtype=dtype)
    kv = (torch.randn(B, T, D_QK, generator=gen) / 10).to(device=device, dtype=dtype)
    return q, kv


def check(q, kv, sm_scale, *, num_splits=None, kv_lens=None, block_table=None, dtype=torch.float32):
    out_ref, lse_ref = mla_decode_reference(
        q, kv, sm_scale, kv_lens=kv_lens, block_table=block_table
    )
    out, lse = mla_decode(
        q, kv, sm_scale, num_splits=num_splits, kv_lens=kv_lens, block_table=block_table
    )
    assert out.shape == (q.shape[0], q.shape[1], D_V) and out.dtype == q.dtype
    assert lse.shape == q.shape[:2] and lse.dtype == torch.float32
    assert not out.isnan().any(), "NaN in out (unwritten or 0/0)"
    assert_close("out", out_ref, out, tolerance(dtype))
    assert_close("lse", lse_ref, lse, tolerance(dtype))
    return out, lse


@pytest.mark.parametrize("sm_scale", SCALES)
@pytest.mark.parametrize(
    ("B", "H", "T", "num_splits"),
    [
        pytest.param(1, 64, 512, None, id="case-study-heads"),
        pytest.param(2, 16, 100, 3, id="T-not-multiple"),
        pytest.param(1, 128, 200, 8, id="H128"),
        pytest.param(2, 16, 5, 8, id="T-lt-splits"),
        pytest.param(1, 16, 1, 1, id="T1"),
    ],
)
def test_mla_decode_matches_reference(B, H, T, num_splits, sm_scale, device):
    q, kv = make_inputs(B, H, T, device=device)
    check(q, kv, sm_scale, num_splits=num_splits)


def test_mla_decode_kv_lens_with_empty_sequence(device):
    q, kv = make_inputs(3, 16, 150, device=device)
    kv_lens = torch.tensor([150, 0, 37], dtype=torch.int32, device=device)
    out, lse = check(q, kv, 1 / math.sqrt(192), num_splits=4, kv_lens=kv_lens)
    assert bool((out[1] == 0).all()) and bool((lse[1] == float("-inf")).all())


def test_mla_decode_results_do_not_depend_on_splits(device):
    q, kv = make_inputs(1, 16, 300, device=device)
    kv_lens = torch.tensor([257], dtype=torch.int32, device=device)
    ref, ref_lse = mla_decode(q, kv, 0.1, num_splits=1, kv_lens=kv_lens)
    for s in (2, 5, 16):
        out, lse = mla_decode(q, kv, 0.1, num_splits=s, kv_lens=kv_lens)
        assert_close(f"out splits={s}", ref, out, tolerance(torch.float32))
        assert_close(f"lse splits={s}", ref_lse, lse, tolerance(torch.float32))


@pytest.mark.parametrize("sm_scale", SCALES)
def test_mla_decode_paged(sm_scale, device):
    B, H, num_pages = 3, 16, 9
    gen = torch.Generator().manual_seed(5)
    pages = (torch.randn(num_pages, PAGE, D_QK, generator=gen) / 10).to(device)
    q = (torch.randn(B, H, D_QK, generator=gen) / 10).to(device)
    block_table = torch.tensor([[3, 7, 1], [0, 8, 8], [5, 2, 2]], dtype=torch.int32, device=device)
    kv_lens = torch.tensor([150, 64, 1], dtype=torch.int32, device=device)
    out, lse = check(q, pages, sm_scale, num_splits=3, kv_lens=kv_lens, block_table=block_table)
    dense = paged_to_dense(pages, block_table)
    out_d, lse_d = mla_decode(q, dense, sm_scale, num_splits=3, kv_lens=kv_lens)
    assert_close("paged vs dense", out_d, out, tolerance(torch.float32))


def test_mla_decode_rejects_bad_inputs():
    q, kv = make_inputs(2, 16, 8)
    with pytest.raises(ValueError, match="q must be"):
        mla_decode(q[..., :512], kv, 0.1)
    with pytest.raises(ValueError, match="batch"):
        mla_decode(q, kv[:1], 0.1)
    with pytest.raises(ValueError, match="num_splits"):
        mla_decode(q, kv, 0.1, num_splits=0)
    with pytest.raises(ValueError, match="kv_lens"):
        mla_decode(
            q, torch.zeros(4, PAGE, D_QK), 0.1, block_table=torch.zeros(2, 1, dtype=torch.int32)
        )
    with pytest.raises(ValueError, match="dtype"):
        mla_decode(q, kv.double(), 0.1)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("sm_scale", SCALES)
@pytest.mark.parametrize(("B", "H", "T"), [(1, 64, 8192), (4, 16, 1000), (2, 128, 4097)])
def test_mla_decode_bf16_gpu(B, H, T, sm_scale):
    q, kv = make_inputs(B, H, T, dtype=torch.bfloat16, device="cuda")
    kv_lens = torch.randint(1, T + 1, (B,), dtype=torch.int32, device="cuda")
    check(q, kv, sm_scale, kv_lens=kv_lens, dtype=torch.bfloat16)
