"""The GEMM as a torch custom operator: one op, traced by torch.compile without graph breaks,
with a fake (meta) implementation and autograd through triton_gemm's own kernels.

    triton_gemm::gemm(a, b, d, alpha, beta, precision, activation)
        = act(alpha * a @ b + beta * d)

a: (B, M, K), b: (B, K, N), d: None or (B, M, N) (an expanded view is fine); activation one
of epilogue.ACTIVATIONS. Gradients are the same op on strided views, no transposed copies:
with dZ = dC * act'(Z), dA = alpha * dZ @ B^T, dB = alpha * A^T @ dZ, dD = beta * dZ. With an
activation the backward recomputes the pre-activation Z with one more GEMM instead of
keeping it from the forward (no extra memory for activations).
"""

from __future__ import annotations

import functools
import math
from typing import Optional

import torch

from . import launch_cache
from .kernels.epilogue import ACTIVATIONS, derivative


@functools.lru_cache(maxsize=None)
def _several_gpus() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 1


def gemm_impl(a: torch.Tensor, b: torch.Tensor, d: Optional[torch.Tensor], alpha: float,
              beta: float, precision: str, activation: str = "none") -> torch.Tensor:
    """The operator's implementation, callable directly where neither autograd nor
    torch.compile needs the operator (custom_op dispatch costs 10-40 us per call).
    Also takes a single product as 2-D a (M, K), b (K, N) and d broadcasting to (M, N)
    (direct())."""
    out = torch.empty((*a.shape[:-1], b.shape[-1]), dtype=a.dtype, device=a.device)
    return gemm_into(a, b, d, alpha, beta, precision, activation, out)


def gemm_into(a: torch.Tensor, b: torch.Tensor, d: Optional[torch.Tensor], alpha: float,
              beta: float, precision: str, activation: str, out: torch.Tensor) -> torch.Tensor:
    """gemm_impl writing into out (shape a.shape[:-1] + b.shape[-1:], a's dtype and device,
    sharing no memory with a, b or d: every kernel writes each output tile once, but reads
    its operands throughout). Returns out."""
    if out.is_meta:
        return out  # shapes only (api._checked): nothing to compute
    if a.is_cuda and _several_gpus() and a.get_device() != torch.cuda.current_device():
        # Triton launches on the current device: run where the operands live.
        with torch.cuda.device(a.device):
            return gemm_into(a, b, d, alpha, beta, precision, activation, out)
    if alpha == 0.0:
        # torch ignores the product (NaN included) when alpha is 0: run with K = 0.
        a, b = a[..., :0], b[..., :0, :]
    return launch_cache.run(a, b, out, d, alpha=alpha, beta=beta, precision=precision,
                            activation=ACTIVATIONS[activation])


gemm = torch.library.custom_op("triton_gemm::gemm", mutates_args=())(gemm_impl)


def _operator_only() -> bool:
    """torch.compile is tracing or torch.func transforms run: only the operator will do."""
    return torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()


def direct(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a product of a and b (no D) may run on gemm_impl itself: torch.compile is
    not tracing, no torch.func transform runs and autograd records nothing."""
    return not (_operator_only() or _records(a, b))


def _records(*tensors) -> bool:
    """Autograd will record an op on these tensors (None entries allowed). A plain loop:
    it runs on every call, and a generator under any() costs more than the checks."""
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False


def apply(a: torch.Tensor, b: torch.Tensor, d: Optional[torch.Tensor], alpha: float,
          beta: float, precision: str, activation: str = "none",
          out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The product through the cheapest route that gives the caller what it needs: the
    operator while torch.compile traces or torch.func transforms run, an autograd.Function
    with the operator's gradients when autograd records in eager mode (the operator's own
    autograd adds dispatcher and wrapper cost on every call), else the implementation.
    out: None, or a tensor gemm_into may write (the caller checked it, and that nothing
    traces or records): the product goes there and out is returned."""
    if out is not None:
        return gemm_into(a, b, d, alpha, beta, precision, activation, out)
    if _operator_only():
        return gemm(a, b, d, alpha, beta, precision, activation)
    if _records(a, b, d):
        return _EagerGemm.apply(a, b, d, alpha, beta, precision, activation)
    return gemm_impl(a, b, d, alpha, beta, precision, activation)


@gemm.register_fake
def _gemm_fake(a, b, d, alpha, beta, precision, activation="none"):
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))


def _setup_context(ctx, inputs, output):
    a, b, d, alpha, beta, precision, activation = inputs
    ctx.has_d = d is not None
    ctx.save_for_backward(a, b, d if ctx.has_d and activation != "none" else None)
    ctx.alpha, ctx.beta, ctx.precision, ctx.activation = alpha, beta, precision, activation


def _backward(ctx, grad, product=gemm):
    """Gradients of act(alpha * a @ b + beta * d); product computes each GEMM (the operator,
    or apply() in eager mode)."""
    a, b, d = ctx.saved_tensors
    if ctx.activation != "none":
        z = product(a, b, d, ctx.alpha, ctx.beta, ctx.precision, "none")
        grad = (grad.float() * derivative(ctx.activation, z)).to(grad.dtype)
    grad_a = grad_b = grad_d = None
    if ctx.needs_input_grad[0]:
        grad_a = product(grad, b.transpose(1, 2), None, ctx.alpha, 0.0, ctx.precision)
    if ctx.needs_input_grad[1]:
        grad_b = product(a.transpose(1, 2), grad, None, ctx.alpha, 0.0, ctx.precision)
    if ctx.has_d and ctx.needs_input_grad[2]:
        grad_d = grad if ctx.beta == 1.0 else grad * ctx.beta
    return grad_a, grad_b, grad_d, None, None, None, None


gemm.register_autograd(_backward, setup_context=_setup_context)


class _EagerGemm(torch.autograd.Function):
    """The operator's forward and gradients as a plain autograd.Function, for eager mode.
    Its backward runs each GEMM through apply(): the implementation directly, or this
    Function again when the backward itself is recorded (create_graph=True).

    forward takes ctx itself: with a separate setup_context, Function.apply binds the
    arguments through inspect.signature on every call (42 us against 8 us per apply on a
    CPU where torch's own linear costs 5 us)."""

    @staticmethod
    def forward(ctx, a, b, d, alpha, beta, precision, activation):
        _setup_context(ctx, (a, b, d, alpha, beta, precision, activation), None)
        return gemm_impl(a, b, d, alpha, beta, precision, activation)

    @staticmethod
    def backward(ctx, grad):
        return _backward(ctx, grad, product=apply)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
           precision: str, activation: str = "none") -> torch.Tensor:
    """act(x @ weight^T + bias) for checked operands (x: (..., K), weight: (N, K), bias:
    None or (N,) / ()). Where autograd records in eager mode, one autograd node
    (_EagerLinear) instead of the operator's node plus a node per reshape, transpose and
    expand: each node costs the autograd engine several microseconds per step."""
    if _operator_only():
        return _linear(x, weight, bias, precision, activation, gemm)
    if _records(x, weight, bias):
        return _EagerLinear.apply(x, weight, bias, precision, activation)
    return _linear(x, weight, bias, precision, activation, gemm_impl)


def _linear(x, weight, bias, precision, activation, product):
    n, k = weight.shape
    rows = math.prod(x.shape[:-1])  # not -1 in the reshapes: no size is inferred when K is 0
    if product is gemm_impl:
        # One product on 2-D views: no batch views to make (~1 us of host time each).
        c = gemm_impl(x.reshape(rows, k), weight.t(), bias, 1.0,
                      1.0 if bias is not None else 0.0, precision, activation)
        return c.reshape(*x.shape[:-1], n)
    a = x.reshape(1, rows, k)
    d = None if bias is None else bias.expand(1, rows, n)
    c = product(a, weight.t().unsqueeze(0), d, 1.0, 1.0 if bias is not None else 0.0,
                precision, activation)
    return c.reshape(*x.shape[:-1], n)


class _EagerLinear(torch.autograd.Function):
    """linear() as one autograd node for eager mode; the GEMMs of its backward go through
    apply() (so create_graph=True records them)."""

    @staticmethod
    def forward(ctx, x, weight, bias, precision, activation):
        ctx.save_for_backward(x, weight, bias if activation != "none" else None)
        ctx.bias_dims = None if bias is None else bias.dim()  # (N,) or a scalar ()
        ctx.precision, ctx.activation = precision, activation
        return _linear(x, weight, bias, precision, activation, gemm_impl)

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias = ctx.saved_tensors
        n, k = weight.shape
        rows = math.prod(x.shape[:-1])
        a = x.reshape(1, rows, k)
        grad = grad.reshape(1, rows, n)
        if ctx.activation != "none":
            z = _linear(x, weight, bias, ctx.precision, "none", apply).reshape(grad.shape)
            grad = (grad.float() * derivative(ctx.activation, z)).to(grad.dtype)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:   # dX = dZ @ W
            grad_x = apply(grad, weight.unsqueeze(0), None, 1.0, 0.0,
                           ctx.precision).reshape(x.shape)
        if ctx.needs_input_grad[1]:   # dW = dZ^T @ X, (N, K) like the weight
            grad_w = apply(grad.transpose(1, 2), a, None, 1.0, 0.0, ctx.precision)[0]
        if ctx.bias_dims is not None and ctx.needs_input_grad[2]:
            grad_b = grad.sum((0, 1)) if ctx.bias_dims else grad.sum()
        return grad_x, grad_w, grad_b, None, None
