"""torch semantics: validation, broadcasting and batching, precision resolution, dispatch."""

from __future__ import annotations

import math
import numbers
import warnings

import torch

from . import ops
from .kernels import common as _kernel

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
PRECISIONS = ("ieee", "tf32", "tf32x3")


class ArgumentValueError(ValueError):
    """An argument value (shape, device, option) triton_gemm does not take; raised before
    any kernel runs or out= is touched."""


class ArgumentTypeError(TypeError):
    """An argument type or dtype triton_gemm does not take; raised before any kernel runs
    or out= is touched."""


# torch.get_float32_matmul_precision() -> the precision it asks for.
_TORCH_PRECISION = {"highest": "ieee", "high": "tf32", "medium": "tf32"}


def resolve_precision(precision: str | None, dtype: torch.dtype) -> str:
    """The dot precision for float32 operands; for 16-bit operands, 'half'."""
    if precision is not None and precision not in PRECISIONS:
        raise ArgumentValueError(f"precision must be one of {PRECISIONS} or None (None follows "
                                 f"torch.get_float32_matmul_precision()), got {precision!r}")
    if dtype != torch.float32:
        if precision is not None:
            raise ArgumentValueError(f"precision={precision!r} applies to float32 operands only; "
                                     f"{dtype} operands always use tensor cores with fp32 "
                                     "accumulation: pass precision=None")
        return "half"
    if precision is None:
        return _TORCH_PRECISION[torch.get_float32_matmul_precision()]
    return precision


def _check_dtype(fn: str, name: str, t: torch.Tensor) -> None:
    if t.dtype not in SUPPORTED_DTYPES:
        raise ArgumentTypeError(f"{fn}(): argument '{name}' has dtype {t.dtype}; supported dtypes "
                                "are float32, float16 and bfloat16 (convert with .float() or "
                                ".half())")


def _autocast(fn: str, tensors: tuple) -> tuple:
    """Under torch.autocast for the operands' device, cast float32/16 operands to the
    autocast dtype, as torch does for its matmul ops; otherwise return them unchanged."""
    device_type = tensors[0].device.type
    if device_type not in ("cuda", "cpu") or not torch.is_autocast_enabled(device_type):
        return tensors
    dtype = torch.get_autocast_dtype(device_type)
    if dtype not in (torch.float16, torch.bfloat16):
        raise ArgumentTypeError(f"{fn}(): torch.autocast dtype {dtype} is not supported; use "
                                "torch.float16 or torch.bfloat16")
    return tuple(t.to(dtype) if t.dtype in SUPPORTED_DTYPES else t for t in tensors)


def _checked(fn: str, names: tuple[str, ...], tensors: tuple, out=None) -> tuple:
    """Every entry point's operands: type checks, autocast, then dtype and device checks.
    Returns the operands to use (cast under autocast; as torch, not for a call with an
    out= tensor)."""
    for name, t in zip(names, tensors):
        if not isinstance(t, torch.Tensor):
            raise ArgumentTypeError(f"{fn}(): argument '{name}' must be a torch.Tensor, not "
                                    f"{type(t).__name__}")
        if t.layout != torch.strided:
            raise ArgumentTypeError(f"{fn}(): argument '{name}' is a {t.layout} tensor; "
                                    "triton_gemm takes dense (torch.strided) tensors: convert it "
                                    "with .to_dense(), or use torch.sparse.mm")
    if out is None:
        tensors = _autocast(fn, tensors)
    first = tensors[0]
    dtype, device = first.dtype, first.device
    if dtype not in SUPPORTED_DTYPES or any(t.dtype != dtype or t.device != device
                                            for t in tensors[1:]):
        _explain_mismatch(fn, names, tensors)
    # Meta tensors carry shapes only: every function returns the result's meta tensor, as
    # torch does (shape inference, e.g. a pipeline stage's dry run); no kernel runs.
    if device.type not in ("cuda", "meta") and not _kernel.INTERPRETER:
        raise ArgumentValueError(f"{fn}(): tensors are on {device}, but triton_gemm runs on CUDA "
                                 "devices; move them with .cuda(), or set TRITON_INTERPRET=1 "
                                 "before importing triton_gemm to run in Triton's (slow) CPU "
                                 "interpreter")
    return tensors


def _explain_mismatch(fn: str, names: tuple[str, ...], tensors: tuple) -> None:
    """Raise the error for operands of an unsupported dtype or of mixed dtypes/devices."""
    for name, t in zip(names, tensors):
        _check_dtype(fn, name, t)
    first = tensors[0]
    for name, t in zip(names[1:], tensors[1:]):
        if t.dtype != first.dtype:
            raise ArgumentTypeError(f"{fn}(): '{names[0]}' is {first.dtype} but '{name}' is "
                                    f"{t.dtype}; both must have the same dtype (cast one with "
                                    ".to())")
        if t.device != first.device:
            raise ArgumentValueError(f"{fn}(): '{names[0]}' is on {first.device} but '{name}' is "
                                     f"on {t.device}; move both to the same device")


def _check_scalar(fn: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{fn}(): '{name}' must be a real number, not "
                                f"{type(value).__name__}")
    return float(value)


def _shape_str(t: torch.Tensor) -> str:
    return "x".join(str(s) for s in t.shape)


def _destination(fn: str, out, shape: tuple, operands: tuple):
    """Check an out= tensor as torch does and resize it to shape (with torch's warning when
    it held elements). Returns out where the kernels may write it directly (contiguous,
    sharing no memory with an operand, nothing tracing), else None: the product then goes
    to a fresh tensor that is copied into out, so out= may alias an operand."""
    if not isinstance(out, torch.Tensor) or out.layout != torch.strided:
        raise ArgumentTypeError(f"{fn}(): 'out' must be a dense torch.Tensor, not "
                                f"{getattr(out, 'layout', type(out).__name__)}")
    first = operands[0]
    if out.dtype != first.dtype:
        raise ArgumentTypeError(f"{fn}(): 'out' has dtype {out.dtype} but the result is "
                                f"{first.dtype}; pass an out tensor of dtype {first.dtype} (out= "
                                "tensors are not cast, as in torch)")
    if out.device != first.device:
        raise ArgumentValueError(f"{fn}(): 'out' is on {out.device} but the operands are on "
                                 f"{first.device}; pass an out tensor on {first.device}")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (*operands, out)):
        raise RuntimeError(f"{fn}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad; call "
                           f"it without out=, or under torch.no_grad()")
    shape = torch.Size(shape)
    if out.shape != shape:
        if out.numel():
            warnings.warn(f"{fn}(): an output with one or more elements was resized since it "
                          f"had shape {list(out.shape)}, which does not match the required "
                          f"output shape {list(shape)} (as torch, which deprecates this: "
                          f"pass an empty tensor or one of the right shape)", stacklevel=3)
        out.resize_(shape)
    if not (out.is_contiguous() and ops.direct(first, operands[1])):
        return None
    storage = out.untyped_storage().data_ptr()
    if any(t.untyped_storage().data_ptr() == storage for t in operands):
        return None
    return out


def _deliver(c: torch.Tensor, out, dest):
    """The call's result: c without out=; else out, holding c unless dest (out) was
    written directly."""
    if out is None:
        return c
    if dest is None:
        out.copy_(c.reshape(out.shape))
    return out


def _mm3(a, b, *, precision, d=None, alpha=1.0, beta=0.0, activation="none", out=None):
    """(B, M, K) @ (B, K, N) views -> fresh (B, M, N) tensor (ops.apply picks the route),
    or a (B, M, N) view of out (_destination's) holding the product."""
    d = d if beta != 0.0 else None
    if out is not None:
        out = out.view(a.shape[0], a.shape[1], b.shape[2])
    return ops.apply(a, b, d, float(alpha), float(beta), precision, activation, out=out)


def _mm2(a, b, *, precision, out=None):
    """(M, K) @ (K, N) -> fresh (M, N), or an (M, N) view of out (_destination's):
    straight to the implementation on 2-D tensors when nothing records or traces (each
    batch view costs ~1 us of host time), else _mm3."""
    if out is not None:
        return ops.gemm_into(a, b, None, 1.0, 0.0, precision, "none",
                             out.view(a.shape[0], b.shape[1]))
    if ops.direct(a, b):
        return ops.gemm_impl(a, b, None, 1.0, 0.0, precision)
    return _mm3(a.unsqueeze(0), b.unsqueeze(0), precision=precision)[0]


def mm(input, mat2, *, precision=None, out=None):
    """As torch.mm: (n x m) @ (m x p) -> (n x p); out: as torch's out= (see matmul)."""
    input, mat2 = _checked("mm", ("input", "mat2"), (input, mat2), out)
    if input.dim() != 2 or mat2.dim() != 2:
        raise ArgumentValueError(f"mm(): both arguments must be 2-D, got {input.dim()}-D 'input' "
                                 f"and {mat2.dim()}-D 'mat2' (use matmul for other ranks)")
    if input.shape[1] != mat2.shape[0]:
        raise ArgumentValueError("mm(): mat1 and mat2 shapes cannot be multiplied "
                                 f"({_shape_str(input)} and {_shape_str(mat2)})")
    prec = resolve_precision(precision, input.dtype)
    if out is None:
        return _mm2(input, mat2, precision=prec)
    dest = _destination("mm", out, (input.shape[0], mat2.shape[1]), (input, mat2))
    return _deliver(_mm2(input, mat2, precision=prec, out=dest), out, dest)


def bmm(input, mat2, *, precision=None, out=None):
    """As torch.bmm: (b x n x m) @ (b x m x p) -> (b x n x p), no broadcasting; out: as
    torch's out= (see matmul)."""
    input, mat2 = _checked("bmm", ("input", "mat2"), (input, mat2), out)
    _check_batches("bmm", ("input", "mat2"), input, mat2)
    prec = resolve_precision(precision, input.dtype)
    if out is None:
        return _mm3(input, mat2, precision=prec)
    dest = _destination("bmm", out, (*input.shape[:2], mat2.shape[2]), (input, mat2))
    return _deliver(_mm3(input, mat2, precision=prec, out=dest), out, dest)


def _check_batches(fn: str, names: tuple[str, str], x: torch.Tensor, y: torch.Tensor) -> None:
    """x @ y as bmm takes them: 3-D, equal batch sizes, x.shape[2] == y.shape[1]."""
    if x.dim() != 3 or y.dim() != 3:
        raise ArgumentValueError(f"{fn}(): '{names[0]}' and '{names[1]}' must be 3-D, got "
                                 f"{x.dim()}-D and {y.dim()}-D (use matmul to broadcast batch "
                                 "dimensions)")
    if x.shape[0] != y.shape[0] or x.shape[2] != y.shape[1]:
        raise ArgumentValueError(f"{fn}(): batch1 and batch2 shapes cannot be multiplied "
                                 f"({_shape_str(x)} and {_shape_str(y)}): need equal batch sizes "
                                 f"and {names[0]}.shape[2] == {names[1]}.shape[1]")


def _broadcast_input(fn: str, input: torch.Tensor, out_shape: tuple) -> torch.Tensor:
    """addmm's and baddbmm's input expanded to the output's shape."""
    try:
        return input.expand(out_shape)
    except RuntimeError:
        raise ArgumentValueError(f"{fn}(): 'input' of shape {tuple(input.shape)} does not "
                                 f"broadcast to the output shape {out_shape}") from None


def matmul(input, other, *, precision=None, out=None):
    """As torch.matmul: 1-D, 2-D and batched N-D operands with batch broadcasting.

    out: as torch's out=: a tensor of the result's dtype and device, resized to the
    result's shape if it differs (warning if it held elements), returned holding the
    result; no autocast and no autograd for such a call (an error if an operand requires
    grad). Unlike torch, out may alias an operand (the product is then copied in)."""
    input, other = _checked("matmul", ("input", "other"), (input, other), out)
    if (out is None and input.dim() == 2 and other.dim() == 2
            and input.shape[1] == other.shape[0]):
        # The common case first: one product, no reshaping.
        return _mm2(input, other, precision=resolve_precision(precision, input.dtype))
    if input.dim() == 0 or other.dim() == 0:
        raise ArgumentValueError("matmul(): both arguments need at least 1 dimension, got "
                                 f"{input.dim()}-D 'input' and {other.dim()}-D 'other' (use * for "
                                 "scalars)")
    prec = resolve_precision(precision, input.dtype)
    a = input.unsqueeze(0) if input.dim() == 1 else input      # (.., M, K), M = 1 for a vector
    b = other.unsqueeze(-1) if other.dim() == 1 else other     # (.., K, N), N = 1 for a vector
    if a.shape[-1] != b.shape[-2]:
        raise ArgumentValueError(f"matmul(): shapes cannot be multiplied ({_shape_str(input)} and "
                                 f"{_shape_str(other)}): the last dimension of 'input' must equal "
                                 f"the {'only' if other.dim() == 1 else 'second-to-last'} "
                                 "dimension of 'other'")
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if a.dim() == 2 and b.dim() == 2:
        shape = _squeeze_vectors((m, n), input, other)
        dest = None if out is None else _destination("matmul", out, shape, (input, other))
        return _deliver(_mm2(a, b, precision=prec, out=dest).reshape(shape), out, dest)
    if a.shape[:-2] == b.shape[:-2]:
        # The common case (attention's heads): nothing to broadcast. With
        # torch.broadcast_shapes and the expand/reshape below, an eager batched call spent
        # 59 us of host time here before the product against 5 without (the product
        # stubbed, the CI machine's CPU; ~57 us more than bmm on the H100 machine's).
        batch_shape = a.shape[:-2]
    else:
        try:
            batch_shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except RuntimeError:
            raise ArgumentValueError("matmul(): batch dimensions of 'input' "
                                     f"{tuple(input.shape[:-2])} and 'other' "
                                     f"{tuple(other.shape[:-2])} do not broadcast") from None
    shape = _squeeze_vectors((*batch_shape, m, n), input, other)
    dest = None if out is None else _destination("matmul", out, shape, (input, other))
    if b.dim() == 2 and a.dim() > 2:
        # Fold A's batch into M (one big GEMM; reshape copies only if the view can't fold).
        # Sizes spelled out, not -1: a reshape cannot infer a size when K or N is 0.
        c = _mm3(a.reshape(1, math.prod(a.shape[:-1]), k), b.unsqueeze(0), precision=prec,
                 out=dest)
    else:
        batch = math.prod(batch_shape)
        a3 = a if a.dim() == 3 and a.shape[0] == batch else \
            a.expand(*batch_shape, m, k).reshape(batch, m, k)
        b3 = b if b.dim() == 3 and b.shape[0] == batch else \
            b.expand(*batch_shape, k, n).reshape(batch, k, n)
        c = _mm3(a3, b3, precision=prec, out=dest)
    return _deliver(c.reshape(shape), out, dest)


def _squeeze_vectors(shape: tuple, input, other) -> tuple:
    """torch.matmul drops the dimension a 1-D operand was promoted with."""
    if other.dim() == 1:
        shape = shape[:-1]
    if input.dim() == 1:
        shape = shape[:-2] + shape[-1:] if other.dim() != 1 else shape[:-1]
    return shape


def addmm(input, mat1, mat2, *, beta=1, alpha=1, precision=None, out=None):
    """As torch.addmm: beta * input + alpha * (mat1 @ mat2), fused in the kernel epilogue.

    input broadcasts to (n x p); with beta == 0 it is ignored (NaN included), as in torch.
    out: as torch's out= (see matmul); out=input updates input."""
    input, mat1, mat2 = _checked("addmm", ("input", "mat1", "mat2"), (input, mat1, mat2), out)
    beta = _check_scalar("addmm", "beta", beta)
    alpha = _check_scalar("addmm", "alpha", alpha)
    if mat1.dim() != 2 or mat2.dim() != 2:
        raise ArgumentValueError(f"addmm(): 'mat1' and 'mat2' must be 2-D, got {mat1.dim()}-D and "
                                 f"{mat2.dim()}-D")
    if mat1.shape[1] != mat2.shape[0]:
        raise ArgumentValueError("addmm(): mat1 and mat2 shapes cannot be multiplied "
                                 f"({_shape_str(mat1)} and {_shape_str(mat2)})")
    out_shape = (mat1.shape[0], mat2.shape[1])
    d = _broadcast_input("addmm", input, out_shape)
    prec = resolve_precision(precision, mat1.dtype)
    dest = None if out is None else _destination("addmm", out, out_shape, (mat1, mat2, input))
    c = _mm3(mat1.unsqueeze(0), mat2.unsqueeze(0), precision=prec, d=d.unsqueeze(0),
             alpha=alpha, beta=beta, out=dest)[0]
    return _deliver(c, out, dest)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, precision=None, out=None):
    """As torch.baddbmm: beta * input + alpha * (batch1 @ batch2) for 3-D batch1 (b x n x m)
    and batch2 (b x m x p), fused in the kernel epilogue (attention scores with a mask or
    bias added, for one).

    input broadcasts to (b x n x p); with beta == 0 it is ignored (NaN included), as in
    torch. out: as torch's out= (see matmul); out=input updates input."""
    input, batch1, batch2 = _checked("baddbmm", ("input", "batch1", "batch2"),
                                     (input, batch1, batch2), out)
    beta = _check_scalar("baddbmm", "beta", beta)
    alpha = _check_scalar("baddbmm", "alpha", alpha)
    _check_batches("baddbmm", ("batch1", "batch2"), batch1, batch2)
    out_shape = (*batch1.shape[:2], batch2.shape[2])
    d = _broadcast_input("baddbmm", input, out_shape)
    prec = resolve_precision(precision, batch1.dtype)
    dest = (None if out is None
            else _destination("baddbmm", out, out_shape, (batch1, batch2, input)))
    c = _mm3(batch1, batch2, precision=prec, d=d, alpha=alpha, beta=beta, out=dest)
    return _deliver(c, out, dest)


ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu")


def linear(input, weight, bias=None, *, activation=None, precision=None):
    """As torch.nn.functional.linear: input @ weight.T + bias, weight read as stored (N x K);
    a 1-D weight (K,) without bias or activation gives input @ weight, as in torch. bias:
    (N,) or () (read as a row in the epilogue), or any shape broadcasting to the output.

    activation: None, "relu", "gelu" (exact), "gelu_tanh" (approximate="tanh") or "silu",
    applied in the GEMM's epilogue (no extra pass over the output)."""
    if activation not in ACTIVATIONS:
        raise ArgumentValueError(f"linear(): unknown activation {activation!r}; choose one of "
                                 f"{ACTIVATIONS}")
    names, tensors = ("input", "weight"), (input, weight)
    if bias is not None:
        names, tensors = names + ("bias",), tensors + (bias,)
    tensors = _checked("linear", names, tensors)
    input, weight, bias = tensors if bias is not None else (*tensors, None)
    if weight.dim() not in (1, 2) or weight.dim() == 1 and (bias is not None or activation):
        raise ArgumentValueError("linear(): 'weight' must be 2-D (out_features x in_features)"
                                 f"{' with a bias or an activation' * (weight.dim() == 1)}, "
                                 f"got shape {tuple(weight.shape)}")
    if input.dim() == 0:
        raise ArgumentValueError("linear(): 'input' needs at least 1 dimension")
    k = weight.shape[-1]
    if input.shape[-1] != k:
        weight_t = f"{k}x{weight.shape[0]}" if weight.dim() == 2 else f"{k}"
        raise ArgumentValueError("linear(): input and weight.T shapes cannot be multiplied "
                                 f"({math.prod(input.shape[:-1])}x{input.shape[-1]} and "
                                 f"{weight_t})")
    if weight.dim() == 1:
        # As torch: a 1-D weight is one output feature with its dimension dropped,
        # input @ weight.
        return matmul(input, weight, precision=precision)
    n = weight.shape[0]
    prec = resolve_precision(precision, input.dtype)
    if bias is not None and bias.shape not in ((n,), ()):
        # Any bias that broadcasts to the output, as in torch: a matrix D in the epilogue.
        out_shape = (*input.shape[:-1], n)
        try:
            d = bias.expand(out_shape)
        except RuntimeError:
            raise ArgumentValueError(f"linear(): 'bias' of shape {tuple(bias.shape)} does not "
                                     f"broadcast to the output shape {out_shape}; pass a bias "
                                     f"of shape ({n},) for weight's out_features") from None
        rows = math.prod(out_shape[:-1])
        c = _mm3(input.reshape(1, rows, k), weight.t().unsqueeze(0), precision=prec,
                 d=d.reshape(1, rows, n), beta=1.0, activation=activation or "none")
        return c.reshape(out_shape)
    return ops.linear(input, weight, bias, prec, activation or "none")


def tuned_configs() -> dict:
    """The configs the autotuner chose so far: {(family, tuning key): config name}."""
    return _kernel.tuned_configs()


def last_config() -> str | None:
    """Name of the config the most recent triton_gemm launch in this process ran."""
    return _kernel.last_config()
