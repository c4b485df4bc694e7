"""Small runtime helpers shared by the Triton kernels: interpreter detection and autotune configs.

Nothing here touches a device at import time; the helpers only read ``TRITON_INTERPRET``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def is_interpreter() -> bool:
    """Return True when Triton kernels run under the CPU interpreter (``TRITON_INTERPRET=1``).

    The variable must be set before the ``@triton.jit`` decorators run (see
    ``shared/KERNELS.md`` section 3.2), so the answer is only meaningful if it has not changed
    since the kernel modules were imported.
    """
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def tune_configs(configs: Sequence[T]) -> list[T]:
    """Return the autotune configs to use: all of them on a GPU, only the first under the interpreter.

    Triton's autotuner benchmarks every config through the GPU driver; with two or more
    configs it raises ``RuntimeError: 0 active drivers`` on a CPU-only machine, while a single
    config is launched directly (KERNELS.md section 3.2). The first config in each list is
    therefore the one the CPU tests exercise.
    """
    configs = list(configs)
    return configs[:1] if is_interpreter() else configs


def next_pow2(n: int) -> int:
    """Smallest power of two >= ``n`` (and >= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())
