"""musec's own Triton kernels: KDA forward (``musec.kernels.kda``) and MLA decode (``musec.kernels.mla``).

This package imports nothing at import time (no torch, no triton), so the rest of musec works
without the ``kernels`` extra. The subpackages import torch and triton and define the kernels;
set ``TRITON_INTERPRET=1`` before importing them (and before triton is first imported) to run
on a CPU. ``musec.kernels.testing`` holds the one tolerance table; ``python -m
musec.kernels.bench kda|mla`` benchmarks on a GPU. See ``README.md`` in this folder.
"""
