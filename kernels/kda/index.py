"""Index helpers shared by the chunked KDA stages: which tokens a chunk covers, and tile I/O.

Host side: ``Chunking`` describes how a (possibly variable-length) batch is cut into 64-token
chunks that never cross a sequence boundary; ``prepare_chunking`` builds it once per call and
every stage takes it.

Device side (``@triton.jit`` helpers): ``chunk_bounds`` maps a global chunk id to its sequence
and token range, ``seq_bounds`` does the same for a sequence id, and the load/store helpers
move ``[rows, cols]`` tiles of ``[tokens, H, D]`` tensors with the masks every stage needs
(rows past the sequence end and columns past D are neither read nor written).

Layout convention for every ``[tokens, H, D]`` tensor: the batch is flattened, so token t of
sequence b (fixed length) is row ``b * T + t``; with ``cu_seqlens`` the rows are already flat.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

CHUNK = 64  #: tokens per chunk (BT)
SUB = 16  #: rows per sub-block (BC); CHUNK == 4 * SUB is assumed by the intra-chunk stage


@dataclass(frozen=True)
class Chunking:
    """How a batch is cut into chunks; built by ``prepare_chunking``.

    Attributes:
        T: tokens per sequence (fixed length) or the flattened length (varlen).
        nt: chunks per sequence for a fixed-length batch; 0 with ``cu_seqlens``.
        n_chunks: total number of chunks (the grid size of the per-chunk stages).
        n_seqs: number of sequences N (B, or ``len(cu_seqlens) - 1``).
        cu_seqlens: int32 [N + 1] on the inputs' device, or None for a fixed-length batch.
        chunk_indices: int32 [n_chunks, 2] (sequence, chunk within it), or None.
        chunk_offsets: int32 [N + 1] first global chunk id of each sequence, or None.
    """

    T: int
    nt: int
    n_chunks: int
    n_seqs: int
    cu_seqlens: torch.Tensor | None
    chunk_indices: torch.Tensor | None
    chunk_offsets: torch.Tensor | None

    @property
    def varlen(self) -> bool:
        """True when the batch has ``cu_seqlens``."""
        return self.cu_seqlens is not None


def prepare_chunk_indices(cu_seqlens: torch.Tensor, chunk_size: int = CHUNK) -> torch.Tensor:
    """Table of (sequence index, chunk index within the sequence) for every chunk of a varlen batch.

    Args:
        cu_seqlens: [N + 1] integer cumulative sequence lengths starting at 0.
        chunk_size: tokens per chunk.

    Returns:
        int32 tensor [num_chunks, 2] on cu_seqlens' device. Reads cu_seqlens on the host once.
    """
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    n_chunks = (lens + chunk_size - 1) // chunk_size
    seq = torch.repeat_interleave(torch.arange(len(lens), device=cu_seqlens.device), n_chunks)
    starts = torch.cumsum(n_chunks, 0) - n_chunks
    idx = torch.arange(int(n_chunks.sum()), device=cu_seqlens.device) - starts[seq]
    return torch.stack([seq, idx], 1).to(torch.int32).contiguous()


def prepare_chunk_offsets(cu_seqlens: torch.Tensor, chunk_size: int = CHUNK) -> torch.Tensor:
    """First global chunk id of each sequence (and the total at the end).

    Args:
        cu_seqlens: [N + 1] integer cumulative sequence lengths starting at 0.
        chunk_size: tokens per chunk.

    Returns:
        int32 tensor [N + 1]: ``offsets[n]`` is the global id of sequence n's first chunk.
    """
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    n_chunks = (lens + chunk_size - 1) // chunk_size
    zero = torch.zeros(1, dtype=torch.long, device=cu_seqlens.device)
    return torch.cat([zero, torch.cumsum(n_chunks, 0)]).to(torch.int32).contiguous()


def prepare_chunking(B: int, T: int, cu_seqlens: torch.Tensor | None, device) -> Chunking:
    """Cut a batch into chunks of ``CHUNK`` tokens that never cross a sequence boundary.

    Args:
        B: batch size (1 with cu_seqlens).
        T: tokens per sequence, or the flattened length with cu_seqlens.
        cu_seqlens: [N + 1] int cumulative lengths, or None for a fixed-length batch.
        device: the inputs' device.

    Returns:
        The ``Chunking`` every stage takes.

    Raises:
        ValueError: if cu_seqlens does not rise from 0 to T.
    """
    if cu_seqlens is None:
        nt = triton.cdiv(T, CHUNK)
        return Chunking(T, nt, B * nt, B, None, None, None)
    cu = cu_seqlens.to(device=device, dtype=torch.int32).contiguous()
    first, last = (int(x) for x in cu[[0, -1]].tolist())
    if first != 0 or last != T or bool((cu[1:] < cu[:-1]).any()):
        raise ValueError(f"cu_seqlens must rise from 0 to T = {T}; got {cu_seqlens.tolist()}")
    indices = prepare_chunk_indices(cu, CHUNK)
    offsets = prepare_chunk_offsets(cu, CHUNK)
    return Chunking(T, 0, indices.shape[0], cu.numel() - 1, cu, indices, offsets)


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot`` input precision for inputs of ``dtype``: IEEE fp32 for fp32, tf32 otherwise."""
    return "ieee" if dtype == torch.float32 else "tf32"


@triton.jit
def chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, IS_VARLEN: tl.constexpr):
    """Map a global chunk id to (sequence n, chunk-in-sequence i_t, bos, eos), all int64."""
    if IS_VARLEN:
        i_n = tl.load(chunk_indices + i_c * 2).to(tl.int64)
        i_t = tl.load(chunk_indices + i_c * 2 + 1).to(tl.int64)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        i_c = tl.cast(i_c, tl.int64)
        i_n = i_c // NT
        i_t = i_c % NT
        bos = i_n * T
        eos = bos + T
    return i_n, i_t, bos, eos


@triton.jit
def seq_bounds(i_n, cu_seqlens, chunk_offsets, T, NT, IS_VARLEN: tl.constexpr):
    """Map a sequence id to (bos, eos, first global chunk id), all int64."""
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
        c0 = tl.load(chunk_offsets + i_n).to(tl.int64)
    else:
        bos = i_n * T
        eos = bos + T
        c0 = i_n * NT
    return bos, eos, c0


@triton.jit
def load_rows(ptr, t0, eos, i_h, col0, H: tl.constexpr, D: tl.constexpr, BR: tl.constexpr,
              BD: tl.constexpr):
    """Load a [BR, BD] fp32 tile of a [tokens, H, D] tensor (rows t0.., cols col0..), 0 outside."""
    rows = t0 + tl.arange(0, BR)
    cols = col0 + tl.arange(0, BD)
    mask = (rows < eos)[:, None] & (cols < D)[None, :]
    offs = (rows[:, None] * H + i_h) * D + cols[None, :]
    return tl.load(ptr + offs, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def store_rows(ptr, x, t0, eos, i_h, col0, H: tl.constexpr, D: tl.constexpr, BR: tl.constexpr,
               BD: tl.constexpr):
    """Store a [BR, BD] tile into a [tokens, H, D] tensor in its dtype; rows >= eos are skipped."""
    rows = t0 + tl.arange(0, BR)
    cols = col0 + tl.arange(0, BD)
    mask = (rows < eos)[:, None] & (cols < D)[None, :]
    offs = (rows[:, None] * H + i_h) * D + cols[None, :]
    tl.store(ptr + offs, x.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def load_vec(ptr, t, i_h, col0, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr):
    """Load row ``t`` (cols col0..col0+BD) of a [tokens, H, D] tensor as fp32, 0 past D."""
    cols = col0 + tl.arange(0, BD)
    return tl.load(ptr + (t * H + i_h) * D + cols, mask=cols < D, other=0.0).to(tl.float32)


@triton.jit
def load_g(gc, t0, eos, i_h, col0, g_last, H: tl.constexpr, K: tl.constexpr, BR: tl.constexpr,
           BK: tl.constexpr):
    """Cumulative-decay tile; rows past the sequence end take the last valid row ``g_last``.

    Pinning padded rows to the last valid value keeps every decay exponent ``G_r - G_i`` <= 0.
    """
    rows = t0 + tl.arange(0, BR)
    x = load_rows(gc, t0, eos, i_h, col0, H, K, BR, BK)
    return tl.where((rows < eos)[:, None], x, g_last[None, :])


@triton.jit
def load_scalars(ptr, t0, eos, i_h, H: tl.constexpr, BR: tl.constexpr):
    """Load a [BR] fp32 vector of a [tokens, H] tensor (rows t0..), 0 past eos."""
    rows = t0 + tl.arange(0, BR)
    return tl.load(ptr + rows * H + i_h, mask=rows < eos, other=0.0).to(tl.float32)
