"""Paired runs for the benches: baseline and candidate interleaved, a ratio per pair.

Every bench measures its baseline in the same run as its candidate, alternating them
(A B, B A, A B, ...: the order rotates so that neither side always runs on a warmer
machine), and reports the ratio candidate / baseline of each pair with its min, median and
max (STYLE.md habit 18). Usage::

    from _pairs import paired, print_ratios

    pairs = paired(5, baseline=lambda: measure_a(), candidate=lambda: measure_b())
    print_ratios("delivery median ms", [(a.median_ms, b.median_ms) for a, b in pairs])
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")

__all__ = ["paired", "percentile", "print_ratios"]


def paired(n: int, baseline: Callable[[], A], candidate: Callable[[], B]) -> list[tuple[A, B]]:
    """Run ``n`` pairs, baseline first in even pairs and candidate first in odd ones.

    Returns:
        ``[(baseline_result, candidate_result), ...]``, one tuple per pair, in run order.
    """
    out: list[tuple[A, B]] = []
    for i in range(n):
        if i % 2 == 0:
            a = baseline()
            b = candidate()
        else:
            b = candidate()
            a = baseline()
        out.append((a, b))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def print_ratios(name: str, pairs: Sequence[tuple[float, float]], unit: str = "", fmt: str = ".2f") -> None:
    """Print one line: the median baseline and candidate, and the per-pair ratio spread.

    Args:
        name: what was measured.
        pairs: ``(baseline, candidate)`` values of each pair, same unit on both sides.
        unit: printed after the values.
        fmt: format of the values.
    """
    base = statistics.median(a for a, _ in pairs)
    cand = statistics.median(b for _, b in pairs)
    ratios = [b / a for a, b in pairs if a > 0]
    spread = (f"min {min(ratios):.2f}x  median {statistics.median(ratios):.2f}x  max {max(ratios):.2f}x"
              if ratios else "no ratio (zero baseline)")
    print(f"{name:34s} baseline {base:{fmt}}{unit}  candidate {cand:{fmt}}{unit}  "
          f"ratio per pair ({len(pairs)}): {spread}")
