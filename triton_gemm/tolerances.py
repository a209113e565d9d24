"""Expected accuracy per precision: the one table that tests and the report check against.

Error is relative Frobenius, ||C - C64|| / ||C64||.
C64 is the float64 product of the same (already rounded) inputs. Each bound sits a few times
above the largest error measured on fresh N(0,1) data at the suite's shapes (K up to 4096):
- ieee, tf32x3: fp32 rounding, ~1e-7 (CPU interpreter), 2.5e-7 (H100, tf32x3 at 4096^3);
  1e-5 still fails any lost or doubled tile.
- tf32: 10-bit mantissa products, ~3e-4 expected (MMA of fp32 inputs).
- float16: 2e-4 measured (output rounding dominates; 2^-11 unit roundoff).
- bfloat16: 1.6e-3 when rounding to nearest, 3.4e-3 measured under the interpreter
  (its bf16 store truncates); 2^-8 unit roundoff.
"""

from __future__ import annotations

import torch

TOLERANCE = {
    "ieee": 1e-5,
    "tf32x3": 1e-5,
    "tf32": 2e-3,
    torch.float16: 1e-3,
    torch.bfloat16: 1e-2,
}


def tolerance(dtype: torch.dtype, precision: str | None = None) -> float:
    """Bound for a float32 product at `precision`, or for a 16-bit dtype."""
    return TOLERANCE[precision] if dtype == torch.float32 else TOLERANCE[dtype]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius error; inf when out has any NaN/Inf the reference lacks."""
    out64 = out.detach().double().cpu()
    ref64 = ref.detach().double().cpu()
    if not torch.isfinite(out64).all():
        return float("inf")
    denom = ref64.norm().item()
    diff = (out64 - ref64).norm().item()
    return diff / denom if denom > 0 else diff


def assert_close(out, ref, dtype, precision=None, what=""):
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    err = rel_error(out, ref)
    tol = tolerance(dtype, precision)
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.1e} ({dtype}, {precision})"
