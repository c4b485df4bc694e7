"""MLA decode (DeepSeek multi-head latent attention, absorbed form): fp32 reference and Triton kernels.

Public names:
    mla_decode_reference, paged_to_dense -- fp32 PyTorch reference (``reference.py``).
    mla_decode, default_num_splits -- split-KV + combine Triton kernels (``decode.py``).
    D_QK, D_V, PAGE -- 576, 512 and the paged cache's 64-token page.

Importing this package imports torch and triton and defines the kernels (no device work).
Set ``TRITON_INTERPRET=1`` before importing it to run the kernels on a CPU.
"""

from .decode import default_num_splits, mla_decode
from .reference import D_QK, D_V, PAGE, mla_decode_reference, paged_to_dense

__all__ = [
    "D_QK",
    "D_V",
    "PAGE",
    "default_num_splits",
    "mla_decode",
    "mla_decode_reference",
    "paged_to_dense",
]
