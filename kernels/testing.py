"""The one tolerance table for musec's kernels and the error metric that goes with it.

Used by the tests in ``tests/kernels`` and by ``musec.kernels.bench``, which refuses to report
a speedup for a kernel that fails these checks at the benchmarked shape.

Metric (FLA's ``assert_close``, KERNELS.md section 1.8): a result passes when its maximum
absolute error is at most ``ABS_FLOOR``, or else when its relative RMS error
``rms(ref - out) / rms(ref)`` is below the tolerance for its dtype.
"""

from __future__ import annotations

from typing import Any

#: Relative RMS error allowed, by the dtype of the kernel's *inputs* (KERNELS.md sections 1.9,
#: 2.6 and 3.3). fp32 runs under the interpreter are exact up to fp32 rounding; on a GPU the
#: kernels use IEEE fp32 dots for fp32 inputs. bf16/fp16 follow FLA's 5e-3 bar (bf16 stores
#: under the interpreter truncate instead of rounding, measured 3.3e-3).
TOLERANCES: dict[str, float] = {
    "float32": 1e-5,
    "float16": 2e-3,
    "bfloat16": 5e-3,
}

#: Below this maximum absolute error a comparison passes whatever its relative error.
ABS_FLOOR = 1e-6


def tolerance(dtype: Any) -> float:
    """Return the relative RMS tolerance for inputs of ``dtype`` (a torch dtype or its name).

    Raises:
        KeyError: if the dtype has no entry in ``TOLERANCES``.
    """
    name = str(dtype).removeprefix("torch.")
    return TOLERANCES[name]


def rel_rms_error(ref: Any, out: Any) -> float:
    """Relative RMS error ``rms(ref - out) / rms(ref)`` computed in float64.

    Args:
        ref: reference torch tensor (any float dtype).
        out: tensor of the same shape to compare.

    Returns:
        The error as a Python float; ``inf`` if ``out`` has a non-finite value where ``ref``
        is finite (so unwritten NaN scratch is caught).
    """
    r = ref.double()
    o = out.double()
    finite = r.isfinite()
    if not bool(((o.isfinite() == finite) | (o == r)).all()):
        return float("inf")
    r = r[finite]
    o = o[finite]
    if r.numel() == 0:
        return 0.0
    err = (r - o).pow(2).mean().sqrt()
    den = r.pow(2).mean().sqrt().clamp_min(1e-30)
    return float(err / den)


def check_close(name: str, ref: Any, out: Any, tol: float) -> str | None:
    """Compare ``out`` with ``ref``; return None when it passes, else a one-line reason.

    Args:
        name: what is compared, used in the message.
        ref: reference tensor.
        out: tensor under test, same shape.
        tol: relative RMS tolerance (usually ``tolerance(dtype)``).
    """
    if tuple(ref.shape) != tuple(out.shape):
        return f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    r = ref.double()
    o = out.double()
    finite = r.isfinite()
    same_inf = bool(((o == r) | finite).all())
    if not same_inf:
        return f"{name}: non-finite reference entries not reproduced"
    if r[finite].numel():
        max_abs = (
            float((r[finite] - o[finite]).abs().max())
            if o[finite].isfinite().all()
            else float("inf")
        )
        if max_abs <= ABS_FLOOR:
            return None
    err = rel_rms_error(ref, out)
    if err < tol:
        return None
    return f"{name}: relative RMS error {err:.3e} >= {tol:.1e}"


def assert_close(name: str, ref: Any, out: Any, tol: float) -> None:
    """Raise AssertionError with a one-line reason unless ``out`` matches ``ref`` (see ``check_close``)."""
    reason = check_close(name, ref, out, tol)
    if reason is not None:
        raise AssertionError(reason)
