"""Drop-in modules: triton_gemm.nn.Linear and patch(model)."""

from __future__ import annotations

import torch

from .api import linear


class Linear(torch.nn.Linear):
    """torch.nn.Linear computed by triton_gemm.linear: same constructor, parameters and
    state_dict. precision: as triton_gemm.linear (None follows torch's fp32 setting)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None, *, precision: str | None = None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.precision = precision

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return linear(input, self.weight, self.bias, precision=self.precision)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, precision={self.precision}"


def patch(model: torch.nn.Module, *, precision: str | None = None) -> torch.nn.Module:
    """Turn every torch.nn.Linear in model into a triton_gemm.nn.Linear in place, keeping
    its parameters (the same Parameter objects, so optimizers still hold them). Returns
    model; a bare nn.Linear comes back converted."""
    if type(model) is torch.nn.Linear:
        model.__class__ = Linear
        model.precision = precision
        return model
    for module in model.modules():
        if type(module) is torch.nn.Linear:
            module.__class__ = Linear
            module.precision = precision
    return model
