"""Shared setup for the kernel tests.

Without a CUDA device the Triton kernels run under the CPU interpreter: ``TRITON_INTERPRET=1``
is set here, at import time, before any test module imports ``musec.kernels.kda`` or
``musec.kernels.mla`` (the variable must be set before the ``@triton.jit`` decorators run,
KERNELS.md section 3.2). With a CUDA device the kernels are compiled for it.

Every test runs with ``torch.use_deterministic_algorithms(True)``, which makes ``torch.empty``
fill new float tensors with NaN: every scratch and output buffer the kernels allocate starts
as NaN, so an element a kernel forgets to write shows up as a NaN in the result.
"""

from __future__ import annotations

import os

try:
    import torch
except ImportError:  # the test modules skip themselves via pytest.importorskip
    torch = None

if torch is None or not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _nan_filled_empty():
    if torch is None:
        yield
        return
    prev = torch.are_deterministic_algorithms_enabled()
    prev_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    assert torch.empty(4).isnan().all(), "uninitialised-memory NaN fill is not active"
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev)
        torch.utils.deterministic.fill_uninitialized_memory = prev_fill


@pytest.fixture
def device():
    """'cuda' when kernels are compiled for a GPU, 'cpu' under the interpreter."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return "cpu"
    return "cuda"
