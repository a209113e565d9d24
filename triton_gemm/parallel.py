"""Tensor-parallel linear layers over torch.distributed, local products by triton_gemm.

Megatron-style pair: ColumnParallelLinear splits the weight's output features across ranks
(each rank computes its slice of Y), RowParallelLinear splits the input features (each rank
computes a partial Y, summed by all-reduce). Column then row needs one all-reduce per pair:

    h = ColumnParallelLinear.from_linear(fc1, gather_output=False)(x)    # local slice
    y = RowParallelLinear.from_linear(fc2, input_is_parallel=True)(act(h))

The collectives carry Megatron's autograd rules, so each rank's gradients equal the
single-process model's: the all-reduce after a row-parallel product passes gradients
through unchanged (the output is replicated), the input of a column-parallel product
all-reduces its gradient, a gather hands each rank its slice of the gradient back.

One process per rank; any backend torch supports (gloo on CPU tensors under
TRITON_INTERPRET=1, NCCL on GPUs; keep NCCL_NVLS_ENABLE=0 where NVLink multicast must stay
off).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from .api import linear


class _Reduce(torch.autograd.Function):
    """Forward: sum over ranks. Backward: identity (every rank holds the same output)."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _CopyToParallel(torch.autograd.Function):
    """Forward: identity. Backward: sum the gradient over ranks (each used part of x)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


def _all_gather_last(x, group, world):
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=-1)


class _Gather(torch.autograd.Function):
    """Forward: concatenate every rank's last-dimension slice. Backward: this rank's slice."""

    @staticmethod
    def forward(ctx, x, group, rank, world):
        ctx.rank, ctx.width = rank, x.shape[-1]
        return _all_gather_last(x, group, world)

    @staticmethod
    def backward(ctx, grad):
        return grad[..., ctx.rank * ctx.width:(ctx.rank + 1) * ctx.width], None, None, None


class _Scatter(torch.autograd.Function):
    """Forward: this rank's last-dimension slice. Backward: gather every rank's slice."""

    @staticmethod
    def forward(ctx, x, group, rank, world):
        ctx.group, ctx.world = group, world
        width = x.shape[-1] // world
        return x[..., rank * width:(rank + 1) * width]

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_last(grad, ctx.group, ctx.world), None, None, None


def _load_shard(layer: nn.Module, weight: torch.Tensor, bias) -> nn.Module:
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


def _world(group) -> tuple[int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("tensor-parallel layers need torch.distributed.init_process_group() "
                           "first (one process per rank)")
    return dist.get_rank(group), dist.get_world_size(group)


def _split(features: int, world: int, what: str) -> int:
    if features % world:
        raise ValueError(f"{what}={features} must be divisible by the world size {world}")
    return features // world


def _init_parameters(layer: nn.Module, weight_shape: tuple, bias_features: int, bias: bool,
                     device, dtype) -> None:
    """weight and bias as nn.Linear creates them (kaiming-uniform weight, zero bias)."""
    layer.weight = nn.Parameter(torch.empty(weight_shape, device=device, dtype=dtype))
    layer.bias = (nn.Parameter(torch.zeros(bias_features, device=device, dtype=dtype))
                  if bias else None)
    nn.init.kaiming_uniform_(layer.weight, a=5 ** 0.5)


class ColumnParallelLinear(nn.Module):
    """Y = X W^T + b with W's rows (output features) split across ranks.

    gather_output=True all-gathers the full Y on every rank; False returns this rank's
    slice of the features (the input of a RowParallelLinear)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 gather_output: bool = True, group=None, precision: str | None = None,
                 device=None, dtype=None):
        super().__init__()
        self.rank, self.world = _world(group)
        self.group, self.gather_output, self.precision = group, gather_output, precision
        local = _split(out_features, self.world, "out_features")
        _init_parameters(self, (local, in_features), local, bias, device, dtype)

    @classmethod
    def from_linear(cls, full: nn.Linear, *, gather_output: bool = True, group=None,
                    precision: str | None = None) -> "ColumnParallelLinear":
        """This rank's shard of an existing (identical on every rank) nn.Linear."""
        layer = cls(full.in_features, full.out_features, full.bias is not None,
                    gather_output=gather_output, group=group, precision=precision,
                    device=full.weight.device, dtype=full.weight.dtype)
        rows = slice(layer.rank * layer.weight.shape[0], (layer.rank + 1) * layer.weight.shape[0])
        return _load_shard(layer, full.weight[rows], None if full.bias is None else full.bias[rows])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _CopyToParallel.apply(x, self.group)
        y = linear(x, self.weight, self.bias, precision=self.precision)
        if not self.gather_output:
            return y
        return _Gather.apply(y, self.group, self.rank, self.world)


class RowParallelLinear(nn.Module):
    """Y = X W^T + b with W's columns (input features) split across ranks; partial products
    are summed with all-reduce and the bias is added once, after it.

    input_is_parallel=True takes this rank's slice of X's features (a ColumnParallelLinear's
    output); False takes the full X and slices it."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 input_is_parallel: bool = True, group=None, precision: str | None = None,
                 device=None, dtype=None):
        super().__init__()
        self.rank, self.world = _world(group)
        self.group, self.input_is_parallel, self.precision = group, input_is_parallel, precision
        local = _split(in_features, self.world, "in_features")
        _init_parameters(self, (out_features, local), out_features, bias, device, dtype)

    @classmethod
    def from_linear(cls, full: nn.Linear, *, input_is_parallel: bool = True, group=None,
                    precision: str | None = None) -> "RowParallelLinear":
        layer = cls(full.in_features, full.out_features, full.bias is not None,
                    input_is_parallel=input_is_parallel, group=group, precision=precision,
                    device=full.weight.device, dtype=full.weight.dtype)
        cols = slice(layer.rank * layer.weight.shape[1], (layer.rank + 1) * layer.weight.shape[1])
        return _load_shard(layer, full.weight[:, cols], full.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = _Scatter.apply(x, self.group, self.rank, self.world)
        y = _Reduce.apply(linear(x, self.weight, precision=self.precision), self.group)
        return y if self.bias is None else y + self.bias
