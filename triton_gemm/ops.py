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

from typing import Optional

import torch

from . import launch_cache
from .kernels.epilogue import ACTIVATIONS, derivative


def gemm_impl(a: torch.Tensor, b: torch.Tensor, d: Optional[torch.Tensor], alpha: float,
              beta: float, precision: str, activation: str = "none") -> torch.Tensor:
    """The operator's implementation, callable directly where neither autograd nor
    torch.compile needs the operator (custom_op dispatch costs 10-40 us per call)."""
    if a.is_cuda and a.device.index != torch.cuda.current_device():
        # Triton launches on the current device: run where the operands live.
        with torch.cuda.device(a.device):
            return gemm_impl(a, b, d, alpha, beta, precision, activation)
    out = torch.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype, device=a.device)
    if alpha == 0.0:
        # torch ignores the product (NaN included) when alpha is 0: run with K = 0.
        a, b = a[:, :, :0], b[:, :0, :]
    return launch_cache.run(a, b, out, d, alpha=alpha, beta=beta, precision=precision,
                            activation=ACTIVATIONS[activation])


gemm = torch.library.custom_op("triton_gemm::gemm", mutates_args=())(gemm_impl)


def apply(a: torch.Tensor, b: torch.Tensor, d: Optional[torch.Tensor], alpha: float,
          beta: float, precision: str, activation: str = "none") -> torch.Tensor:
    """The product through the cheapest route that gives the caller what it needs: the
    operator while torch.compile traces, an autograd.Function with the operator's gradients
    when autograd records in eager mode (the operator's own autograd adds dispatcher and
    wrapper cost on every call), else the implementation itself."""
    if torch.compiler.is_compiling():
        return gemm(a, b, d, alpha, beta, precision, activation)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad
                                    or (d is not None and d.requires_grad)):
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
    Function again when the backward itself is recorded (create_graph=True)."""

    @staticmethod
    def forward(a, b, d, alpha, beta, precision, activation):
        return gemm_impl(a, b, d, alpha, beta, precision, activation)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _setup_context(ctx, inputs, output)

    @staticmethod
    def backward(ctx, grad):
        return _backward(ctx, grad, product=apply)
