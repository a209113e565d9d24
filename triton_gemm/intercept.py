"""intercept(): torch's own matmul calls run on triton_gemm inside a `with` block.

    with triton_gemm.intercept():
        logits = model(tokens)   # every torch.matmul, @, mm, bmm, addmm, baddbmm and
                                 # F.linear (so nn.Linear) the model makes runs here

A torch.overrides.TorchFunctionMode: torch hands it every torch function call made in the
block (on this thread), and it sends the GEMMs whose arguments triton_gemm takes to the
functions of the same name in triton_gemm.api; every other call, and a GEMM with arguments
triton_gemm does not take (float64, integers, sparse or CPU tensors, tensor subclasses,
torch's out_dtype), runs in torch unchanged. So results follow torch's semantics either
way, and an argument torch would reject gets torch's own error.
"""

from __future__ import annotations

import torch
from torch.nn import functional
from torch.overrides import TorchFunctionMode

from . import api

# Tensor types that carry no __torch_function__ of their own: their calls may be rerouted.
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)


def _fp32_precision(precision, tensor, out=None):
    """precision for a product of float32 operands; None for 16-bit ones, and for float32
    ones that autocast will cast (api autocasts calls without out=, as torch does)."""
    if getattr(tensor, "dtype", None) != torch.float32:
        return None
    if out is None and tensor.device.type in ("cuda", "cpu") and torch.is_autocast_enabled(
            tensor.device.type):
        return None
    return precision


# One handler per torch signature: (precision, *torch's arguments) -> triton_gemm's result.
# A call that does not bind to the signature raises TypeError, which sends it to torch.
def _matmul(precision, input, other, *, out=None):
    return api.matmul(input, other, precision=_fp32_precision(precision, input, out), out=out)


def _rmatmul(precision, self, other):
    return api.matmul(other, self, precision=_fp32_precision(precision, self))


def _mm(precision, input, mat2, *, out=None):
    return api.mm(input, mat2, precision=_fp32_precision(precision, input, out), out=out)


def _bmm(precision, input, mat2, *, out=None):
    return api.bmm(input, mat2, precision=_fp32_precision(precision, input, out), out=out)


def _addmm(precision, input, mat1, mat2, *, beta=1, alpha=1, out=None):
    return api.addmm(input, mat1, mat2, beta=beta, alpha=alpha,
                     precision=_fp32_precision(precision, mat1, out), out=out)


def _baddbmm(precision, input, batch1, batch2, *, beta=1, alpha=1, out=None):
    return api.baddbmm(input, batch1, batch2, beta=beta, alpha=alpha,
                       precision=_fp32_precision(precision, batch1, out), out=out)


def _linear(precision, input, weight, bias=None):
    return api.linear(input, weight, bias, precision=_fp32_precision(precision, input))


_HANDLERS = {
    torch.matmul: _matmul, torch.Tensor.matmul: _matmul, torch.Tensor.__matmul__: _matmul,
    torch.Tensor.__rmatmul__: _rmatmul,
    torch.mm: _mm, torch.Tensor.mm: _mm,
    torch.bmm: _bmm, torch.Tensor.bmm: _bmm,
    torch.addmm: _addmm, torch.Tensor.addmm: _addmm,
    torch.baddbmm: _baddbmm, torch.Tensor.baddbmm: _baddbmm,
    functional.linear: _linear,
}


class intercept(TorchFunctionMode):  # noqa: N801 (used like a function: `with intercept():`)
    """Run torch's GEMM calls on triton_gemm while the block is active.

    precision: for float32 GEMMs, one of triton_gemm.PRECISIONS; None (default) follows
    torch.get_float32_matmul_precision(), as torch's own calls do. The block may nest;
    torch.compile traces the rerouted calls as triton_gemm's operator. After the block,
    `rerouted` and `left_to_torch` count its GEMM calls:

        with triton_gemm.intercept() as mode:
            model(x)
        assert mode.left_to_torch == 0
    """

    def __init__(self, precision: str | None = None):
        super().__init__()
        if precision is not None:
            api.resolve_precision(precision, torch.float32)   # the error for a bad name
        self.precision = precision
        # GEMM calls seen in the block: run on triton_gemm, or left to torch (call the
        # triton_gemm function of the same name on those arguments to see why).
        self.rerouted = 0
        self.left_to_torch = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        if handler is not None and all(t in _PLAIN_TYPES for t in types):
            # Arguments triton_gemm does not take (api's checks raise before any kernel runs
            # or out= is touched), or a call that does not bind to the handler's signature
            # (TypeError raised in this frame, before the handler's own): torch computes
            # the call, or rejects it with its own error. Any other error propagates.
            try:
                result = handler(self.precision, *args, **kwargs)
                self.rerouted += 1
                return result
            except (api.ArgumentValueError, api.ArgumentTypeError):
                pass
            except TypeError as error:
                if error.__traceback__.tb_next is not None:
                    raise
            self.left_to_torch += 1
        elif handler is not None:
            self.left_to_torch += 1
        return func(*args, **kwargs)
