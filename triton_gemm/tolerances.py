"""Expected accuracy per precision: the one table that tests and the report check against.

Error is relative Frobenius, ||C - C64|| / ||C64||.
C64 is the float64 product of the same (already rounded) inputs. Each bound sits a few times
above the largest error measured on fresh N(0,1) data (H100 figures from the committed
report, K up to 28672; interpreter figures from the CPU suite):
- ieee: fp32 rounding, 1e-7 (interpreter) to 3.1e-6 (H100, K = 28672).
- tf32x3: 3.6e-7 at 4096^3, 5.5e-7 at K = 28672 (H100); 6.2e-7 on U(0,1) data, where the
  tensor core's truncations do not cancel (perf/accuracy.py). 1e-5 still fails any lost or
  doubled tile.
- tf32: 7.7e-4 to 9.1e-4 (H100; cuBLAS tf32: 2.9e-4). The tensor core truncates fp32
  operands to tf32 where cuBLAS rounds them (float64 emulation at 2048^3: 7.7e-4 / 2.9e-4).
- float16: 2.1e-4 to 2.2e-4 (output rounding dominates; 2^-11 unit roundoff).
- bfloat16: 1.7e-3 on the H100, 3.4e-3 under the interpreter (its bf16 store truncates);
  2^-8 unit roundoff.
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


# Gradients through a smooth activation (linear's gelu, gelu_tanh, silu): the backward
# multiplies by act'(Z) at its recomputed Z, whose rounding moves act' as well, on top of
# its own product's rounding. H200, tf32 linear backward through gelu / gelu_tanh, relative
# error of the input's gradient (scaled as assert_close): the library 1.6e-3 to 2.4e-3,
# torch's own (cuBLAS tf32) 1.7e-3 to 2.1e-3, over the forward's 2e-3 (fifty-eighth
# session). relu's gradient is not bounded so: its mask flips where Z lies within Z's
# rounding of 0, by estimate about one entry in a million, and each flip moves the
# gradient (fp16 linear 3 x 4096 x 512 -> 65, input's gradient: 2.1e-4 in one layout,
# 1.5e-3 in another; torch's own fp16 relu backward 2.1e-4 to 5.3e-3 over the same ones).
ACTIVATION_GRADIENT_FACTOR = 2


def tolerance(dtype: torch.dtype, precision: str | None = None) -> float:
    """Bound for a float32 product at `precision`, or for a 16-bit dtype."""
    return TOLERANCE[precision] if dtype == torch.float32 else TOLERANCE[dtype]


def random_sign_norm(a: torch.Tensor, b: torch.Tensor) -> float:
    """sqrt(sum_ij sum_k (a_ik b_kj)^2): the Frobenius norm a @ b has on average when the
    terms' signs are random. Rounding error scales with it, not with |a @ b|: a dot of
    few terms can cancel to near zero (K = 9 under tf32 gave 2.7e-3 relative to |a.b|)."""
    a64, b64 = a.detach().double().cpu(), b.detach().double().cpu()
    return torch.matmul(a64 * a64, b64 * b64).sum().sqrt().item()


def rel_error(out: torch.Tensor, ref: torch.Tensor, scale: float = 0.0) -> float:
    """||out - ref|| / max(||ref||, scale) (Frobenius); inf when out has NaN/Inf."""
    out64 = out.detach().double().cpu()
    ref64 = ref.detach().double().cpu()
    if not torch.isfinite(out64).all():
        return float("inf")
    denom = max(ref64.norm().item(), scale)
    diff = (out64 - ref64).norm().item()
    return diff / denom if denom > 0 else diff


def assert_close(out, ref, dtype, precision=None, what="", operands=None):
    """out within the precision's tolerance of ref. operands=(a, b): the reference is
    a @ b (+ terms of the same size), so near-cancelling sums are judged against
    random_sign_norm(a, b); for random matrices of many elements the two norms agree."""
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    err = rel_error(out, ref, random_sign_norm(*operands) if operands else 0.0)
    tol = tolerance(dtype, precision)
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.1e} ({dtype}, {precision})"
