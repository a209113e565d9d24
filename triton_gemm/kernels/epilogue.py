"""The GEMM epilogue every kernel shares (beta * D, fused activation; finish), and the
activations' derivatives for autograd.

Names follow torch: "relu", "gelu" (exact, erf), "gelu_tanh" (approximate="tanh"),
"silu". The kernels take the activation as a constexpr code."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

ACTIVATIONS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715


@triton.jit
def apply_activation(x, ACTIVATION: tl.constexpr):
    """x (fp32 tile) through the activation with code ACTIVATION (see ACTIVATIONS)."""
    if ACTIVATION == 1:
        x = tl.where(x < 0.0, 0.0, x)  # NaN stays NaN, as torch.relu
    elif ACTIVATION == 2:
        x = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif ACTIVATION == 3:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = 0.5 * x * (1.0 + (2.0 * tl.sigmoid(2.0 * inner) - 1.0))  # tanh via sigmoid
    elif ACTIVATION == 4:
        x = x * tl.sigmoid(x)
    return x


@triton.jit
def finish(acc, d_ptrs, mask, beta, HAS_D: tl.constexpr, ACTIVATION: tl.constexpr):
    """The epilogue every kernel shares: act(acc + beta * D) for an fp32 tile acc (alpha
    already applied), D read at d_ptrs under mask when HAS_D."""
    if HAS_D:
        acc += beta * tl.load(d_ptrs, mask=mask, other=0.0).to(tl.float32)
    return apply_activation(acc, ACTIVATION)


def derivative(name: str, z: torch.Tensor) -> torch.Tensor:
    """d activation / dz at the pre-activation z (computed in fp32)."""
    z = z.float()
    if name == "relu":
        return (z > 0).float()
    if name == "gelu":
        return 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0))) + z * torch.exp(-0.5 * z * z) / \
            math.sqrt(2.0 * math.pi)
    if name == "gelu_tanh":
        t = torch.tanh(_SQRT_2_OVER_PI * (z + _GELU_TANH_CUBIC * z ** 3))
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _SQRT_2_OVER_PI * (
            1.0 + 3.0 * _GELU_TANH_CUBIC * z * z)
    if name == "silu":
        s = torch.sigmoid(z)
        return s * (1.0 + z * (1.0 - s))
    raise ValueError(f"no derivative for activation {name!r}")
