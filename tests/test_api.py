"""torch semantics of the public API, checked against float64 torch on the same inputs."""

import os
import subprocess
import sys
import warnings

import pytest
import torch

import triton_gemm as tg
from conftest import CASE_IDS, CASES, DEVICE, poisoned, randn, requires_kernels
from triton_gemm.tolerances import assert_close

# (M, N, K): ones, primes, tall, skinny, not multiples of any tile.
SHAPES = [(1, 1, 1), (1, 7, 5), (17, 13, 31), (64, 32, 48), (33, 1, 70), (5, 67, 3),
          (97, 41, 129)]
if DEVICE == "cuda":
    # ... and the dispatcher's thresholds: padding from M, N >= 64, K-major staging of fp32
    # tensor-core operands from M >= 512.
    SHAPES += [(257, 383, 511), (1024, 1024, 1024), (1, 4096, 4096), (4096, 3, 1000),
               (1000, 1000, 4096), (63, 1025, 1027), (64, 1025, 1027), (511, 256, 256),
               (512, 256, 256), (2048, 1152, 256), (2049, 2050, 136)]
    # The last two take the persistent TMA kernel on Hopper (>= one 128x128 tile per SM),
    # the second through padded copies and an aligned output buffer.
    # Split-K at its thresholds (64x64 tiles <= SMs / 2 or M <= 64; K >= 1024) and beyond:
    SHAPES += [(16, 8192, 1024), (16, 8192, 1023), (128, 2112, 2048), (128, 2176, 2048),
               (65, 8448, 2048), (128, 128, 65536), (3, 200, 20000)]


def ref_matmul(a, b):
    return torch.matmul(a.double().cpu(), b.double().cpu())


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("m,n,k", SHAPES, ids=lambda v: str(v))
def test_mm_shapes(dtype, precision, m, n, k):
    a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
    out = tg.mm(a, b, precision=precision)
    assert out.dtype == dtype and out.device == a.device
    assert_close(out, ref_matmul(a, b), dtype, precision, f"mm {m}x{n}x{k}", operands=(a, b))


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("shape_a,shape_b", [
    ((9,), (9,)),                  # dot -> 0-d
    ((9,), (9, 5)),                # vector-matrix
    ((6, 9), (9,)),                # matrix-vector
    ((2, 3, 6, 9), (9,)),          # batched matrix-vector
    ((9,), (4, 9, 5)),             # vector-batched matrix
    ((2, 1, 6, 9), (3, 9, 5)),     # batch broadcasting both ways
    ((6, 9), (2, 9, 5)),           # 2-D against batched
    ((2, 3, 6, 9), (9, 5)),        # batched against 2-D (folds into one GEMM)
    ((1, 6, 9), (4, 9, 5)),
], ids=lambda v: "x".join(map(str, v)))
def test_matmul_ranks_and_broadcasting(dtype, precision, shape_a, shape_b):
    a, b = randn(*shape_a, dtype=dtype), randn(*shape_b, dtype=dtype)
    out = tg.matmul(a, b, precision=precision)
    ref = ref_matmul(a, b)
    assert out.shape == torch.matmul(a, b).shape
    assert_close(out, ref, dtype, precision, f"matmul {shape_a} @ {shape_b}", operands=(a, b))


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
def test_bmm(dtype, precision):
    a, b = randn(3, 19, 23, dtype=dtype), randn(3, 23, 11, dtype=dtype)
    assert_close(tg.bmm(a, b, precision=precision), ref_matmul(a, b), dtype, precision, "bmm")


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("view", ["a_t", "b_t", "both_t", "sliced", "batch_t", "expanded"])
def test_strided_views(dtype, precision, view):
    m, n, k = 37, 29, 45
    if view == "a_t":
        a, b = randn(k, m, dtype=dtype).t(), randn(k, n, dtype=dtype)
    elif view == "b_t":
        a, b = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype).t()
    elif view == "both_t":
        a, b = randn(k, m, dtype=dtype).t(), randn(n, k, dtype=dtype).t()
    elif view == "sliced":
        a = randn(2 * m, 3 * k, dtype=dtype)[::2, 1::3]
        b = randn(k + 5, 2 * n, dtype=dtype)[3:3 + k, ::2]
    elif view == "batch_t":
        a, b = randn(k, 2, m, dtype=dtype).permute(1, 2, 0), randn(2, n, k, dtype=dtype).mT
    else:
        a, b = randn(1, m, k, dtype=dtype).expand(3, m, k), randn(3, k, n, dtype=dtype)
    assert not (a.is_contiguous() and b.is_contiguous())
    out = tg.matmul(a, b, precision=precision)
    assert_close(out, ref_matmul(a, b), dtype, precision, f"view {view}")


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("input_shape", [(21, 17), (17,), (1, 17), (21, 1), ()],
                         ids=lambda v: "x".join(map(str, v)) or "scalar")
@pytest.mark.parametrize("alpha,beta", [(1, 1), (2.0, 0.5), (-1.5, 3), (0.25, 0)])
def test_addmm(dtype, precision, input_shape, alpha, beta):
    c = randn(*input_shape, dtype=dtype)
    a, b = randn(21, 30, dtype=dtype), randn(30, 17, dtype=dtype)
    out = tg.addmm(c, a, b, beta=beta, alpha=alpha, precision=precision)
    ref = beta * c.double().cpu() + alpha * ref_matmul(a, b)
    assert_close(out, ref, dtype, precision, f"addmm {input_shape} a={alpha} b={beta}")


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("input_shape", [(3, 21, 17), (21, 17), (17,), (3, 1, 17), (1, 21, 1),
                                         ()],
                         ids=lambda v: "x".join(map(str, v)) or "scalar")
@pytest.mark.parametrize("alpha,beta", [(1, 1), (-1.5, 3), (0.25, 0)])
def test_baddbmm(dtype, precision, input_shape, alpha, beta):
    c = randn(*input_shape, dtype=dtype)
    a, b = randn(3, 21, 30, dtype=dtype), randn(3, 30, 17, dtype=dtype)
    out = tg.baddbmm(c, a, b, beta=beta, alpha=alpha, precision=precision)
    assert out.shape == (3, 21, 17)
    ref = beta * c.double().cpu() + alpha * ref_matmul(a, b)
    assert_close(out, ref, dtype, precision, f"baddbmm {input_shape} a={alpha} b={beta}")


@requires_kernels
def test_addmm_beta_zero_ignores_nan_and_alpha_zero_ignores_product():
    c = torch.full((8, 6), float("nan"), device=DEVICE)
    a, b = randn(8, 5), randn(5, 6)
    out = tg.addmm(c, a, b, beta=0, precision="ieee")
    assert torch.isfinite(out).all()
    assert_close(out, ref_matmul(a, b), torch.float32, "ieee", "beta=0")
    a_nan = a.clone()
    a_nan[0, 0] = float("nan")
    c = randn(8, 6)
    out = tg.addmm(c, a_nan, b, beta=2, alpha=0, precision="ieee")
    assert torch.equal(out.cpu(), torch.addmm(c.cpu(), a_nan.cpu(), b.cpu(), beta=2, alpha=0))


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("input_shape", [(13, 24), (2, 5, 24), (24,)],
                         ids=lambda v: "x".join(map(str, v)))
def test_linear(dtype, precision, with_bias, input_shape):
    x, w = randn(*input_shape, dtype=dtype), randn(19, 24, dtype=dtype)
    bias = randn(19, dtype=dtype) if with_bias else None
    out = tg.linear(x, w, bias, precision=precision)
    ref = torch.nn.functional.linear(x.double().cpu(), w.double().cpu(),
                                     None if bias is None else bias.double().cpu())
    assert_close(out, ref, dtype, precision, f"linear {input_shape} bias={with_bias}")


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("input_shape", [(24,), (13, 24), (2, 5, 24)])
def test_linear_with_a_1d_weight_is_input_at_weight(dtype, precision, input_shape):
    """As torch: a 1-D weight is one output feature, its dimension dropped."""
    x, w = randn(*input_shape, dtype=dtype), randn(24, dtype=dtype)
    out = tg.linear(x, w, precision=precision)
    ref = torch.nn.functional.linear(x.double().cpu(), w.double().cpu())
    assert out.shape == ref.shape == input_shape[:-1]
    assert_close(out, ref, dtype, precision, f"linear {input_shape} 1-D weight")


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_empty_dimensions(dtype):
    a, b = randn(7, 0, dtype=dtype), randn(0, 5, dtype=dtype)
    out = tg.mm(a, b)
    assert out.shape == (7, 5) and torch.equal(out.cpu(), torch.zeros(7, 5, dtype=dtype))
    c = randn(7, 5, dtype=dtype)
    out = tg.addmm(c, a, b, beta=0.5)
    assert torch.equal(out.cpu(), (0.5 * c).cpu())
    assert tg.mm(randn(0, 4, dtype=dtype), randn(4, 6, dtype=dtype)).shape == (0, 6)
    assert tg.mm(randn(3, 4, dtype=dtype), randn(4, 0, dtype=dtype)).shape == (3, 0)
    assert tg.matmul(randn(0, 3, 4, dtype=dtype), randn(4, 2, dtype=dtype)).shape == (0, 3, 2)


# Outputs large enough for the GPU's planned paths (the persistent TMA kernel, rows_2d,
# batched TMA tiles) over K = 0, which alpha = 0 runs too: no TMA descriptor of an empty
# dimension (one failed to build for addmm(alpha=0) of 11008x144 tf32 before).
EMPTY_K = [(1, 7, 5)] + ([(1, 11008, 144), (1, 4096, 4096), (1, 128, 16896), (8, 1024, 1024)]
                         if DEVICE == "cuda" else [(3, 40, 24)])


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("batch,m,n", EMPTY_K, ids=str)
def test_no_product_at_any_output_size(dtype, precision, batch, m, n):
    """K = 0 gives zeros (mm, matmul into a NaN-poisoned out=), beta * input (addmm), and
    alpha = 0 ignores the product, NaN included, at every size the dispatcher plans for."""
    lead = (batch, ) if batch > 1 else ()
    a, b = randn(*lead, m, 0, dtype=dtype), randn(*lead, 0, n, dtype=dtype)
    zeros = torch.zeros(*lead, m, n, dtype=dtype)
    assert torch.equal(tg.matmul(a, b, precision=precision).cpu(), zeros)
    out = torch.full(zeros.shape, float("nan"), dtype=dtype, device=DEVICE)
    assert tg.matmul(a, b, precision=precision, out=out) is out
    assert torch.equal(out.cpu(), zeros)
    add = tg.addmm if batch == 1 else tg.baddbmm
    c = randn(*zeros.shape, dtype=dtype)
    expected = (0.5 * c.double()).to(dtype).cpu()
    assert torch.equal(add(c, a, b, beta=0.5, precision=precision).cpu(), expected)
    a_nan = randn(*lead, m, 64, dtype=dtype)
    a_nan.view(-1)[0] = float("nan")
    got = add(c, a_nan, randn(*lead, 64, n, dtype=dtype), beta=0.5, alpha=0,
              precision=precision)
    assert torch.equal(got.cpu(), expected)


# Operand shapes with a zero-sized dimension on the batched and folded paths, where a
# reshape cannot infer a size (K or N of 0 made reshape(-1, ...) raise).
EMPTY_BATCHED = [((2, 3, 0), (0, 4)), ((2, 3, 4), (4, 0)), ((3,), (2, 3, 0)),
                 ((2, 1, 3, 0), (4, 0, 5)), ((2, 0, 3), (2, 3, 4)), ((0,), (0,))]


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shapes", EMPTY_BATCHED, ids=str)
def test_empty_dimensions_on_batched_operands(dtype, shapes):
    """As torch.matmul: the result's shape, zeros where K is 0, and out= filled."""
    a, b = randn(*shapes[0], dtype=dtype), randn(*shapes[1], dtype=dtype)
    ref = torch.matmul(a.double().cpu(), b.double().cpu()).to(dtype)
    assert torch.equal(tg.matmul(a, b).cpu(), ref)
    out = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE)
    assert tg.matmul(a, b, out=out) is out and torch.equal(out.cpu(), ref)


@requires_kernels
@pytest.mark.parametrize("lead,k,n", [((3,), 0, 5), ((2, 3), 0, 5), ((2, 0), 4, 5),
                                      ((3,), 4, 0)], ids=str)
def test_linear_with_empty_dimensions(lead, k, n):
    """As F.linear: zero in_features gives the bias alone, zero rows or outputs an empty
    result."""
    x, w, bias = randn(*lead, k), randn(n, k), randn(n)
    ref = torch.nn.functional.linear(x.double().cpu(), w.double().cpu(), bias.double().cpu())
    out = tg.linear(x, w, bias)
    assert out.shape == ref.shape and torch.equal(out.cpu().double(), ref)


def test_linear_mismatch_with_an_empty_input_names_both_shapes():
    with pytest.raises(ValueError, match=r"shapes cannot be multiplied \(6x0 and 3x5\)"):
        tg.linear(randn(2, 3, 0), randn(5, 3))


@requires_kernels
def test_nan_and_inf_propagate_like_torch():
    a, b = randn(6, 8), randn(8, 5)
    a[2, 3] = float("nan")
    b[1, 4] = float("inf")
    out = tg.mm(a, b, precision="ieee").cpu()
    ref = torch.mm(a.cpu(), b.cpu())
    assert torch.equal(out.isnan(), ref.isnan())
    assert torch.equal(out.isinf(), ref.isinf())


def test_precision_follows_torch_setting():
    before = torch.get_float32_matmul_precision()
    try:
        for setting, expected in [("highest", "ieee"), ("high", "tf32"), ("medium", "tf32")]:
            torch.set_float32_matmul_precision(setting)
            assert tg.resolve_precision(None, torch.float32) == expected
        assert tg.resolve_precision("tf32x3", torch.float32) == "tf32x3"
        assert tg.resolve_precision(None, torch.float16) == "half"
    finally:
        torch.set_float32_matmul_precision(before)


def ones(*shape, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype, device=DEVICE)


@pytest.mark.parametrize("call,exc,words", [
    (lambda: tg.mm(ones(2, 3), ones(4, 5)), ValueError, "(2x3 and 4x5)"),
    (lambda: tg.matmul(ones(3), ones(4)), ValueError, "cannot be multiplied"),
    (lambda: tg.matmul(ones(2, 2, 3), ones(3, 3, 4)), ValueError, "broadcast"),
    (lambda: tg.bmm(ones(2, 2, 3), ones(3, 3, 4)), ValueError, "batch"),
    (lambda: tg.mm(ones(2, 3), ones(3, 4, dtype=torch.float16)), TypeError,
     "same dtype"),
    (lambda: tg.mm(ones(2, 3, dtype=torch.int32), ones(3, 4, dtype=torch.int32)),
     TypeError, "torch.int32"),
    (lambda: tg.mm(ones(2, 3, dtype=torch.float64), ones(3, 4, dtype=torch.float64)),
     TypeError, "float64"),
    (lambda: tg.mm(ones(2, 3, dtype=torch.complex64),
                   ones(3, 4, dtype=torch.complex64)), TypeError, "complex64"),
    (lambda: tg.mm([[1.0]], ones(1, 1)), TypeError, "'input' must be a torch.Tensor"),
    (lambda: tg.mm(ones(2, 3), ones(3, 4), precision="fp64"), ValueError,
     "precision must be one of"),
    (lambda: tg.mm(ones(2, 3, dtype=torch.float16), ones(3, 4, dtype=torch.float16),
                   precision="tf32"), ValueError, "float32 operands only"),
    (lambda: tg.mm(ones(2, 3), torch.ones(3, 4, device="meta")), ValueError,
     "same device"),
    (lambda: tg.addmm(ones(3, 3), ones(2, 3), ones(3, 5)), ValueError,
     "does not broadcast"),
    (lambda: tg.addmm(ones(2, 5), ones(2, 3), ones(3, 5), beta="1"),
     TypeError, "'beta' must be a real number"),
    (lambda: tg.baddbmm(ones(2, 3, 5), ones(2, 3, 4), ones(3, 4, 5)), ValueError,
     "(2x3x4 and 3x4x5)"),
    (lambda: tg.baddbmm(ones(4, 5), ones(3, 4), ones(4, 5)), ValueError,
     "'batch1' and 'batch2' must be 3-D"),
    (lambda: tg.baddbmm(ones(2, 2, 5), ones(3, 2, 4), ones(3, 4, 5)), ValueError,
     "'input' of shape (2, 2, 5) does not broadcast"),
    (lambda: tg.baddbmm(ones(1, 3, 5), ones(1, 3, 4), ones(1, 4, 5), alpha=None), TypeError,
     "'alpha' must be a real number"),
    (lambda: tg.linear(ones(2, 3), ones(4, 3), ones(5)), ValueError,
     "'bias' of shape (5,) does not broadcast to the output shape (2, 4)"),
    (lambda: tg.linear(ones(2, 3), ones(4, 3), ones(3, 2, 4)), ValueError,
     "pass a bias of shape (4,)"),
    (lambda: tg.linear(ones(2, 3), ones(4, 5)), ValueError, "cannot be multiplied"),
    (lambda: tg.linear(ones(2, 3), ones(4)), ValueError, "(2x3 and 4)"),
    (lambda: tg.linear(ones(2, 3), ones(3), ones(())), ValueError,
     "must be 2-D (out_features x in_features) with a bias or an activation"),
    (lambda: tg.linear(ones(2, 3), ones(1, 4, 3)), ValueError, "got shape (1, 4, 3)"),
    (lambda: tg.mm(ones(2, 3, 4), ones(4, 5)), ValueError, "must be 2-D"),
    (lambda: tg.bmm(ones(3, 4), ones(4, 5)), ValueError, "'input' and 'mat2' must be 3-D"),
    (lambda: tg.mm(ones(4, 3).to_sparse(), ones(3, 5)), TypeError,
     "'input' is a torch.sparse_coo tensor"),
    (lambda: tg.matmul(ones(4, 3), ones(3, 5).to_sparse_csr()), TypeError, ".to_dense()"),
])
def test_bad_input_gets_a_clear_error(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)
    assert isinstance(info.value, (tg.ArgumentValueError, tg.ArgumentTypeError))


def _without_interpreter(code: str) -> str:
    """What code prints, run in a fresh process without TRITON_INTERPRET."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_cpu_tensors_without_interpreter_say_how_to_fix():
    out = _without_interpreter("import torch, triton_gemm as tg\n"
                               "try:\n    tg.mm(torch.ones(2, 3), torch.ones(3, 4))\n"
                               "except ValueError as e:\n    print('ERR', e)\n")
    assert "ERR" in out and "TRITON_INTERPRET=1" in out and "cuda" in out


# Calls on meta tensors: torch's function and triton_gemm's, on the same (shapes, dtype).
META_CALLS = {
    "mm": (((9, 14), (14, 11)), torch.mm, tg.mm),
    "bmm": (((3, 9, 14), (3, 14, 11)), torch.bmm, tg.bmm),
    "matmul_broadcast": (((3, 1, 9, 14), (2, 14, 11)), torch.matmul, tg.matmul),
    "matmul_vectors": (((14,), (14,)), torch.matmul, tg.matmul),
    "addmm": (((11,), (9, 14), (14, 11)), torch.addmm, tg.addmm),
    "baddbmm": (((3, 9, 11), (3, 9, 14), (3, 14, 11)), torch.baddbmm, tg.baddbmm),
    "linear_bias": (((2, 9, 14), (11, 14), (11,)), torch.nn.functional.linear, tg.linear),
    "linear_1d_weight": (((9, 14), (14,)), torch.nn.functional.linear, tg.linear),
}


@pytest.mark.parametrize("name", list(META_CALLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_meta_tensors_give_the_result_shape_like_torch(name, dtype):
    """Meta tensors (shape inference, a pipeline stage's dry run) get the meta tensor torch
    gives, and gradients of the operands' shapes; no kernel runs."""
    shapes, torch_fn, tg_fn = META_CALLS[name]
    args = [torch.empty(s, dtype=dtype, device="meta", requires_grad=True) for s in shapes]
    ref, got = torch_fn(*args), tg_fn(*args)
    assert (got.shape, got.dtype, got.device) == (ref.shape, ref.dtype, ref.device)
    grads = torch.autograd.grad(got.sum(), args)
    assert [(g.shape, g.device) for g in grads] == [(a.shape, a.device) for a in args]
    if name in ("mm", "bmm", "addmm", "baddbmm"):
        out = torch.empty(0, dtype=dtype, device="meta")
        with torch.no_grad():
            assert tg_fn(*args, out=out) is out and out.shape == ref.shape


def test_meta_tensors_without_interpreter_give_shapes():
    """The device check lets meta tensors through where no interpreter runs either."""
    out = _without_interpreter(
        "import torch, triton_gemm as tg\n"
        "a = torch.empty(5, 7, device='meta', dtype=torch.float16)\n"
        "print(tuple(tg.linear(a, torch.empty(3, 7, device='meta', dtype=torch.float16))"
        ".shape), tg.mm(a, a.t()).device)\n")
    assert out.split() == ["(5,", "3)", "meta"]


# name: (shape of input, shape of other, the call, shape of its result).
OUT_CALLS = {
    "mm": ((9, 14), (14, 11), lambda a, b, **kw: tg.mm(a, b, **kw), (9, 11)),
    "matmul_2d": ((9, 14), (14, 11), lambda a, b, **kw: tg.matmul(a, b, **kw), (9, 11)),
    "matmul_vector": ((14,), (14, 11), lambda a, b, **kw: tg.matmul(a, b, **kw), (11,)),
    "matmul_matrix_vector": ((9, 14), (14,), lambda a, b, **kw: tg.matmul(a, b, **kw), (9,)),
    "matmul_folded_batch": ((2, 3, 9, 14), (14, 11),
                            lambda a, b, **kw: tg.matmul(a, b, **kw), (2, 3, 9, 11)),
    "matmul_broadcast": ((3, 1, 9, 14), (2, 14, 11),
                         lambda a, b, **kw: tg.matmul(a, b, **kw), (3, 2, 9, 11)),
    "bmm": ((3, 9, 14), (3, 14, 11), lambda a, b, **kw: tg.bmm(a, b, **kw), (3, 9, 11)),
}
if DEVICE == "cuda":
    # The persistent TMA kernel's paths on Hopper: a TMA store of C (or a pointer store,
    # out one element in), TMA on 16-byte rows unpadded, and a cut-off column fringe.
    OUT_CALLS.update({
        "mm_persistent": ((2048, 1024), (1024, 2048), lambda a, b, **kw: tg.mm(a, b, **kw),
                          (2048, 2048)),
        "mm_tma_rows": ((1000, 1000), (1000, 1000), lambda a, b, **kw: tg.mm(a, b, **kw),
                        (1000, 1000)),
        "mm_fringe": ((2049, 520), (520, 4097), lambda a, b, **kw: tg.mm(a, b, **kw),
                      (2049, 4097)),
    })


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("call", sorted(OUT_CALLS))
@pytest.mark.parametrize("layout", ["contiguous", "offset", "transposed"])
def test_out_receives_the_product(dtype, precision, call, layout, monkeypatch):
    """out= is written (contiguous: by the kernel, with no fresh output tensor, also one
    element into its storage, so not 16-byte aligned; another layout: through a copy,
    keeping its strides as torch does) and returned."""
    shape_a, shape_b, fn, shape = OUT_CALLS[call]
    if layout == "transposed" and len(shape) < 2:
        pytest.skip("a 1-D out has one layout")
    a, b = randn(*shape_a, dtype=dtype), randn(*shape_b, dtype=dtype)
    out = poisoned(*shape, dtype=dtype)
    if layout == "transposed":
        out = poisoned(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-1, -2)
    elif layout == "offset":
        out = poisoned(1 + out.numel(), dtype=dtype)[1:].view(shape)
    strides = out.stride()
    if layout != "transposed":
        def fresh_output(*args, **kwargs):
            raise AssertionError("a contiguous out= got a fresh output tensor")
        monkeypatch.setattr(tg.ops, "gemm_impl", fresh_output)
    result = fn(a, b, precision=precision, out=out)
    assert result is out and out.stride() == strides
    # As matrices, so the error is judged against random_sign_norm (few-term dots cancel).
    matrices = (a if a.dim() > 1 else a[None], b if b.dim() > 1 else b[:, None])
    assert_close(out, ref_matmul(a, b), dtype, precision, f"{call} out={layout}",
                 operands=matrices)


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("fn,batch", [(tg.addmm, ()), (tg.baddbmm, (2,))],
                         ids=["addmm", "baddbmm"])
def test_add_out_and_in_place_update(dtype, precision, fn, batch):
    """addmm(c, a, b, out=c) updates c in place from its old values (torch's addmm_), and a
    separate out receives beta * c + alpha * a @ b with c untouched; baddbmm likewise."""
    c, a = randn(*batch, 12, 10, dtype=dtype), randn(*batch, 12, 20, dtype=dtype)
    b = randn(*batch, 20, 10, dtype=dtype)
    ref = 0.5 * c.double().cpu() + 2.0 * ref_matmul(a, b)
    before = c.clone()
    out = poisoned(*batch, 12, 10, dtype=dtype)
    assert fn(c, a, b, beta=0.5, alpha=2.0, precision=precision, out=out) is out
    assert_close(out, ref, dtype, precision, f"{fn.__name__} out=")
    assert torch.equal(c, before)
    assert fn(c, a, b, beta=0.5, alpha=2.0, precision=precision, out=c) is c
    assert_close(c, ref, dtype, precision, f"{fn.__name__} out=input")


@requires_kernels
@pytest.mark.parametrize("operand", ["input", "other"])
def test_out_may_alias_an_operand(operand):
    """torch.mm(x, y, out=x) overwrites x while reading it (a wrong product on the CPU, torch
    2.13); here the product goes to a fresh tensor first, so the result is right."""
    x, y = randn(16, 16), randn(16, 16)
    ref = ref_matmul(x, y)
    target = x if operand == "input" else y
    assert tg.mm(x, y, precision="ieee", out=target) is target
    assert_close(target, ref, torch.float32, "ieee", f"mm out={operand}")


@requires_kernels
@pytest.mark.parametrize("start", [(0,), (5, 3)], ids=["empty", "wrong-shape"])
def test_out_is_resized_like_torch(start):
    """An out of another shape is resized to the result's, with torch's warning only when
    it held elements."""
    a, b = randn(6, 8), randn(8, 4)
    out = torch.empty(start, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tg.matmul(a, b, precision="ieee", out=out)
    assert out.shape == (6, 4)
    assert_close(out, ref_matmul(a, b), torch.float32, "ieee", "resized out")
    resized = [w for w in caught if "was resized" in str(w.message)]
    assert len(resized) == (0 if start == (0,) else 1)


@requires_kernels
def test_out_skips_autocast_like_torch():
    """torch does not autocast a call with out=: the product stays in the out's float32."""
    a, b = randn(6, 8), randn(8, 4)
    out = poisoned(6, 4)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        tg.mm(a, b, precision="ieee", out=out)
    assert out.dtype == torch.float32
    assert_close(out, ref_matmul(a, b), torch.float32, "ieee", "out under autocast")


@pytest.mark.parametrize("call,exc,words", [
    (lambda: tg.mm(ones(2, 3), ones(3, 4), out=ones(2, 4, dtype=torch.float16)), TypeError,
     "'out' has dtype torch.float16 but the result is torch.float32"),
    (lambda: tg.mm(ones(2, 3), ones(3, 4), out=torch.ones(2, 4, device="meta")), ValueError,
     "'out' is on meta"),
    (lambda: tg.mm(ones(2, 3), ones(3, 4), out=[[0.0] * 4] * 2), TypeError,
     "'out' must be a dense torch.Tensor, not list"),
    (lambda: tg.mm(ones(2, 3), ones(3, 4), out=ones(2, 4).to_sparse()), TypeError,
     "not torch.sparse_coo"),
    (lambda: tg.mm(ones(2, 3).requires_grad_(), ones(3, 4), out=ones(2, 4)), RuntimeError,
     "don't support automatic differentiation"),
    (lambda: tg.addmm(ones(2, 4), ones(2, 3), ones(3, 4), out=ones(2, 4).requires_grad_()),
     RuntimeError, "call it without out="),
])
def test_bad_out_gets_a_clear_error(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)
