"""KDA (Kimi Delta Attention) forward: PyTorch references and Triton kernels.

Public names:
    naive_recurrent_kda, naive_chunk_kda -- fp32 PyTorch references (``naive.py``).
    chunk_kda -- chunked Triton forward, chunk 64, varlen (``chunk.py``).
    fused_recurrent_kda -- token-by-token Triton forward for T <= 64 (``fused_recurrent.py``).
    kda_gate, kda_lowerbound_gate -- gate activations producing ``g`` (``gate.py``).

Importing this package imports torch and triton and defines the kernels (no device work).
Set ``TRITON_INTERPRET=1`` before importing it to run the kernels on a CPU.
"""

from .chunk import chunk_kda, prepare_chunk_indices
from .fused_recurrent import MAX_RECURRENT_T, fused_recurrent_kda
from .gate import kda_gate, kda_lowerbound_gate
from .naive import naive_chunk_kda, naive_recurrent_kda

__all__ = [
    "MAX_RECURRENT_T",
    "chunk_kda",
    "fused_recurrent_kda",
    "kda_gate",
    "kda_lowerbound_gate",
    "naive_chunk_kda",
    "naive_recurrent_kda",
    "prepare_chunk_indices",
]
