"""Autograd through triton_gemm's own kernels, the custom operator's registration
(torch.library.opcheck) and tracing by torch.compile without graph breaks."""

import pytest
import torch

import triton_gemm as tg
from conftest import DEVICE, TORCH_ACTIVATIONS, randn, requires_kernels
from triton_gemm import ops
from triton_gemm.tolerances import assert_close, rel_error, tolerance

# fp32 precisions whose gradients are checked against float64 torch (16-bit gradients
# follow the same code path; their forward accuracy is covered by test_api).
GRAD_CASES = [(torch.float32, "ieee"), (torch.float32, "tf32x3"), (torch.float16, None)]
GRAD_IDS = ["fp32-ieee", "fp32-tf32x3", "fp16"]


def _grads(fn, tensors, cotangent):
    out = fn(*tensors)
    (out * cotangent).sum().backward()
    return out, [t.grad for t in tensors]


def _leaf(t, dtype):
    return t.detach().to(dtype).requires_grad_(True)


@requires_kernels
@pytest.mark.parametrize("dtype,precision", GRAD_CASES, ids=GRAD_IDS)
@pytest.mark.parametrize("name", ["matmul_broadcast", "bmm", "addmm", "baddbmm",
                                  "linear_bias", "linear_broadcast_bias"])
def test_gradients_match_float64_torch(dtype, precision, name):
    if name == "matmul_broadcast":
        shapes = [(2, 1, 13, 21), (3, 21, 9)]
        ours = lambda a, b: tg.matmul(a, b, precision=precision)  # noqa: E731
        ref = torch.matmul
    elif name == "bmm":
        shapes = [(3, 13, 21), (3, 21, 9)]
        ours = lambda a, b: tg.bmm(a, b, precision=precision)  # noqa: E731
        ref = torch.bmm
    elif name == "addmm":
        shapes = [(9,), (13, 21), (21, 9)]
        ours = lambda c, a, b: tg.addmm(c, a, b, beta=0.5, alpha=-2.0,  # noqa: E731
                                        precision=precision)
        ref = lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2.0)  # noqa: E731
    elif name == "baddbmm":
        shapes = [(3, 1, 9), (3, 13, 21), (3, 21, 9)]
        ours = lambda c, a, b: tg.baddbmm(c, a, b, beta=1.5, alpha=0.5,  # noqa: E731
                                          precision=precision)
        ref = lambda c, a, b: torch.baddbmm(c, a, b, beta=1.5, alpha=0.5)  # noqa: E731
    elif name == "linear_broadcast_bias":  # a bias of more than out_features, as torch's
        shapes = [(2, 13, 21), (9, 21), (13, 9)]
        ours = lambda x, w, bias: tg.linear(x, w, bias, precision=precision)  # noqa: E731
        ref = torch.nn.functional.linear
    else:
        shapes = [(2, 13, 21), (9, 21), (9,)]
        ours = lambda x, w, bias: tg.linear(x, w, bias, precision=precision)  # noqa: E731
        ref = torch.nn.functional.linear
    base = [randn(*s) for s in shapes]
    cot = randn(*ref(*base).shape)
    out, grads = _grads(ours, [_leaf(t, dtype) for t in base], cot.to(dtype))
    ref_out, ref_grads = _grads(ref, [_leaf(t, dtype).double().cpu().detach().requires_grad_()
                                      for t in base], cot.double().cpu())
    assert_close(out, ref_out, dtype, precision, f"{name} forward")
    for i, (g, rg) in enumerate(zip(grads, ref_grads)):
        assert g is not None and g.shape == rg.shape, f"{name}: grad {i}"
        assert g.dtype == dtype
        assert_close(g, rg, dtype, precision, f"{name} grad of input {i}")


@requires_kernels
def test_no_grad_for_inputs_that_do_not_need_it():
    a = randn(5, 7).requires_grad_(True)
    b = randn(7, 3)
    tg.mm(a, b, precision="ieee").sum().backward()
    assert a.grad is not None and b.grad is None


@requires_kernels
def test_opcheck():
    a, b, d = randn(2, 5, 7), randn(2, 7, 3), randn(2, 5, 3)
    for args in [(a, b, d, 1.5, 0.5, "ieee"), (a, b, None, 1.0, 0.0, "tf32x3"),
                 (a.requires_grad_(True), b, d, 2.0, -1.0, "ieee")]:
        torch.library.opcheck(ops.gemm, args)


@requires_kernels
def test_torch_compile_traces_without_graph_breaks():
    def block(x, w1, b1, w2):
        h = torch.relu(tg.linear(x, w1, b1, precision="ieee"))
        return tg.matmul(h, w2, precision="ieee")

    x, w1, b1, w2 = randn(4, 16), randn(32, 16), randn(32), randn(32, 8)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    out = compiled(x, w1, b1, w2)
    ref = torch.relu(x.double() @ w1.double().t() + b1.double()) @ w2.double()
    assert_close(out, ref, torch.float32, "ieee", "compiled block")


@requires_kernels
def test_torch_compile_traces_attention_with_baddbmm():
    """Attention as some models write it: scores = baddbmm(mask, q, k^T, alpha=scale)."""
    def attend(q, k, v, mask):
        scores = tg.baddbmm(mask, q, k.transpose(1, 2), alpha=0.25, precision="ieee")
        return tg.bmm(torch.softmax(scores, -1), v, precision="ieee")

    q, k, v = randn(2, 6, 16), randn(2, 6, 16), randn(2, 6, 8)
    mask = torch.full((6, 6), float("-inf"), device=q.device).triu(1)
    out = torch.compile(attend, fullgraph=True, backend="aot_eager")(q, k, v, mask)
    scores = torch.baddbmm(mask.double(), q.double(), k.double().transpose(1, 2), alpha=0.25)
    ref = torch.softmax(scores, -1) @ v.double()
    assert_close(out, ref, torch.float32, "ieee", "compiled attention")


@requires_kernels
def test_torch_compile_traces_out_without_graph_breaks():
    """A call with out= inside a compiled function: the operator's product copied into out
    (a mutation the graph records), visible to the caller."""
    def block(a, b, out):
        tg.mm(a, b, precision="ieee", out=out)
        return out * 2

    a, b = randn(8, 16), randn(16, 4)
    out = torch.full((8, 4), float("nan"), device=a.device)
    doubled = torch.compile(block, fullgraph=True, backend="aot_eager")(a, b, out)
    ref = a.double() @ b.double()
    assert_close(out, ref, torch.float32, "ieee", "compiled out=")
    assert_close(doubled, 2 * ref, torch.float32, "ieee", "compiled out= read back")


@requires_kernels
def test_torch_compile_backward_through_the_operator():
    """The compiled backward (traced by AOTAutograd from the operator's registered autograd)
    gives float64 gradients."""
    def block(x, w1, w2):
        return tg.matmul(tg.linear(x, w1, activation="gelu_tanh", precision="ieee"), w2,
                         precision="ieee")

    x, w1, w2 = randn(4, 16), randn(32, 16).requires_grad_(True), randn(32, 8)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    compiled(x, w1, w2).sum().backward()
    w64 = w1.detach().double().requires_grad_(True)
    h = torch.nn.functional.gelu(x.double() @ w64.t(), approximate="tanh")
    (h @ w2.double()).sum().backward()
    assert_close(w1.grad, w64.grad, torch.float32, "ieee", "compiled weight gradient")


@requires_kernels
def test_nn_linear_is_a_drop_in():
    torch.manual_seed(0)
    ref = torch.nn.Linear(24, 10)
    ours = tg.nn.Linear(24, 10, precision="ieee")
    assert set(ours.state_dict()) == set(ref.state_dict())
    ours.load_state_dict(ref.state_dict())
    ref, ours = ref.to(DEVICE), ours.to(DEVICE)
    x = randn(3, 24)
    assert_close(ours(x), ref(x).double(), torch.float32,
                 "ieee", "nn.Linear")
    assert "precision=ieee" in repr(ours)


@requires_kernels
def test_patch_swaps_every_linear_in_place_and_trains():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                torch.nn.Sequential(torch.nn.Linear(16, 4, bias=False)))
    model = model.to(DEVICE)
    params_before = [id(p) for p in model.parameters()]
    x = randn(5, 8)
    expected = model(x).detach()
    assert tg.patch(model, precision="ieee") is model
    assert [type(m) for m in model.modules() if isinstance(m, torch.nn.Linear)] == \
        [tg.nn.Linear, tg.nn.Linear]
    assert [id(p) for p in model.parameters()] == params_before
    out = model(x)
    assert_close(out, expected.double(), torch.float32, "ieee", "patched model")
    out.square().sum().backward()
    assert all(p.grad is not None for p in model.parameters())


@requires_kernels
@pytest.mark.parametrize("activation", list(TORCH_ACTIVATIONS))
@pytest.mark.parametrize("bias_shape", [(19,), (2, 1, 19), None])
@pytest.mark.parametrize("dtype,precision", [(torch.float32, "ieee"), (torch.bfloat16, None)],
                         ids=["fp32-ieee", "bf16"])
def test_fused_activation_forward_and_gradients(activation, bias_shape, dtype, precision):
    base = [randn(2, 11, 24), randn(19, 24)] + ([randn(*bias_shape)] if bias_shape else [])
    cot = randn(2, 11, 19)

    def ours(x, w, b=None):
        return tg.linear(x, w, b, activation=activation, precision=precision)

    def ref(x, w, b=None):
        return TORCH_ACTIVATIONS[activation](torch.nn.functional.linear(x, w, b))

    out, grads = _grads(ours, [_leaf(t, dtype) for t in base], cot.to(dtype))
    ref_out, ref_grads = _grads(ref, [_leaf(t, dtype).double().cpu().detach().requires_grad_()
                                      for t in base], cot.double().cpu())
    assert_close(out, ref_out, dtype, precision, f"{activation} forward")
    for i, (g, rg) in enumerate(zip(grads, ref_grads)):
        assert_close(g, rg, dtype, precision, f"{activation} grad of input {i}")


@requires_kernels
def test_relu_epilogue_keeps_nan_like_torch():
    x, w = randn(3, 8), randn(5, 8)
    x[1, 2] = float("nan")
    out = tg.linear(x, w, activation="relu", precision="ieee")
    assert torch.equal(out.isnan().cpu(), torch.relu(x.cpu() @ w.cpu().t()).isnan())


def test_unknown_activation_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown activation 'gelu_fast'"):
        tg.linear(torch.ones(2, 3), torch.ones(4, 3), activation="gelu_fast")


@requires_kernels
def test_opcheck_with_activation():
    a, b, d = randn(1, 5, 7), randn(1, 7, 3), randn(1, 5, 3)
    torch.library.opcheck(ops.gemm, (a.requires_grad_(True), b, d, 1.0, 1.0, "ieee", "gelu"))


@requires_kernels
def test_eager_calls_skip_the_operator_and_keep_second_derivatives():
    """Eager: no autograd node without grad, the plain autograd.Function with it (the
    operator's dispatch is only for torch.compile); create_graph=True records the backward's
    GEMMs too, so second derivatives match float64 as closely as torch's own fp32 ones.
    (The second derivative sums fp32 products and silu terms that can cancel: over 3000
    seeds torch's fp32 one measured median 2.7e-7, max 1.8e-5 against float64, past the
    ieee GEMM tolerance; triton_gemm's the same, and within twice torch's error or the
    tolerance on every seed.)"""
    a, b = randn(1, 5, 8), randn(1, 8, 3)
    assert ops.apply(a, b, None, 1.0, 0.0, "ieee").grad_fn is None
    a.requires_grad_(True)
    out = ops.apply(a, b, None, 1.0, 0.0, "ieee", "silu")
    assert type(out.grad_fn).__name__ == "_EagerGemmBackward"
    (grad_a,) = torch.autograd.grad(out.sum(), a, create_graph=True)
    (grad2_a,) = torch.autograd.grad((grad_a ** 2).sum(), a)
    a64 = a.detach().double().requires_grad_(True)
    out64 = torch.nn.functional.silu(a64 @ b.double())
    (ref_a,) = torch.autograd.grad(out64.sum(), a64, create_graph=True)
    (ref2_a,) = torch.autograd.grad((ref_a ** 2).sum(), a64)
    a32 = a.detach().clone().requires_grad_(True)
    (torch_a,) = torch.autograd.grad(torch.nn.functional.silu(a32 @ b).sum(), a32,
                                     create_graph=True)
    (torch2_a,) = torch.autograd.grad((torch_a ** 2).sum(), a32)
    assert_close(grad_a, ref_a, torch.float32, "ieee", "first derivative")
    err, torch_err = rel_error(grad2_a, ref2_a), rel_error(torch2_a, ref2_a)
    bound = max(tolerance(torch.float32, "ieee"), 2 * torch_err)
    assert err <= bound, f"second derivative: relative error {err:.2e} > {bound:.1e} " \
                         f"(torch's fp32: {torch_err:.2e})"


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_runs_in_the_autocast_dtype(dtype):
    x, w, bias = randn(6, 16), randn(8, 16), randn(8)
    with torch.autocast(DEVICE, dtype=dtype):
        out = tg.linear(x, w, bias)
        ref = torch.nn.functional.linear(x, w, bias)
        mm = tg.matmul(x, w.t())
    assert out.dtype == ref.dtype == mm.dtype == dtype
    expected = torch.nn.functional.linear(*(t.to(dtype).double() for t in (x, w, bias)))
    assert_close(out, expected, dtype, what="autocast linear")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_operands_on_a_second_gpu():
    a = torch.randn(64, 32, device="cuda:1")
    b = torch.randn(32, 16, device="cuda:1")
    out = tg.matmul(a, b, precision="ieee")
    assert out.device == a.device
    assert_close(out, a.double() @ b.double(), torch.float32, "ieee", "cuda:1")


@requires_kernels
@pytest.mark.parametrize("bias_shape", [(6,), ()], ids=["vector-bias", "scalar-bias"])
def test_linear_is_one_autograd_node_with_float64_gradients(bias_shape):
    """Eager linear records a single node (no view/expand nodes around the GEMM) and gives
    float64 gradients for a 3-D input, a vector or scalar bias, a fused activation, and
    through create_graph=True a second derivative."""
    x = randn(2, 3, 8).requires_grad_(True)
    w, bias = randn(6, 8).requires_grad_(True), randn(*bias_shape).requires_grad_(True)
    out = tg.linear(x, w, bias, activation="gelu", precision="ieee")
    assert type(out.grad_fn).__name__ == "_EagerLinearBackward"
    cotangent = randn(2, 3, 6)
    grads = torch.autograd.grad((out * cotangent).sum(), (x, w, bias), create_graph=True)
    (second,) = torch.autograd.grad(grads[0].square().sum(), w)
    leaves = [t.detach().double().requires_grad_(True) for t in (x, w, bias)]
    pre_activation = torch.nn.functional.linear(*leaves)
    ref = torch.nn.functional.gelu(pre_activation)
    ref_grads = torch.autograd.grad((ref * cotangent.double()).sum(), leaves, create_graph=True)
    (ref_second,) = torch.autograd.grad(ref_grads[0].square().sum(), leaves[1])
    # Each gradient is a sum of products with dZ; a sum of few terms can cancel (CI saw a
    # scalar bias gradient of 36 terms come to 0.011), so errors are judged against the
    # random-sign norm of those products, as for any GEMM.
    (grad_z,) = torch.autograd.grad((ref * cotangent.double()).sum(), pre_activation)
    rows = grad_z.reshape(-1, 6)
    bias_terms = rows.reshape(-1, 1) if bias.dim() == 0 else rows
    operands = {
        "x": (rows, leaves[1]),
        "weight": (rows.T, leaves[0].reshape(-1, 8)),
        "bias": (torch.ones(1, bias_terms.shape[0], dtype=torch.float64), bias_terms),
    }
    for name, got, expected in zip(("x", "weight", "bias"), grads, ref_grads):
        assert got.shape == expected.shape
        assert_close(got, expected, torch.float32, "ieee", f"grad {name}", operands[name])
    assert_close(second, ref_second, torch.float32, "ieee", "second derivative")


def test_unsupported_autocast_dtype_is_a_clear_error(monkeypatch):
    """torch itself disables autocast for most unsupported dtypes; any other autocast dtype
    than fp16/bf16 reaching triton_gemm is refused by name."""
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device_type=None: True)
    monkeypatch.setattr(torch, "get_autocast_dtype", lambda device_type: torch.float64)
    with pytest.raises(TypeError, match="autocast dtype torch.float64 is not supported"):
        tg.linear(torch.ones(2, 3, device=DEVICE), torch.ones(4, 3, device=DEVICE))


@requires_kernels
@pytest.mark.parametrize("lead,k,n", [((3,), 0, 5), ((2, 0), 4, 5), ((2, 3), 4, 0)], ids=str)
def test_linear_gradients_with_empty_dimensions(lead, k, n):
    """Zero in_features, rows or out_features: gradients of every argument as torch's
    (zeros, or the summed output gradient for the bias)."""
    x, w, bias = (randn(*shape).requires_grad_() for shape in ((*lead, k), (n, k), (n,)))
    out = tg.linear(x, w, bias, precision="ieee")
    grad = randn(*out.shape)
    got = torch.autograd.grad(out, (x, w, bias), grad)
    leaves = [t.detach().double().cpu().requires_grad_() for t in (x, w, bias)]
    ref = torch.nn.functional.linear(*leaves)
    want = torch.autograd.grad(ref, leaves, grad.double().cpu())
    for g, r in zip(got, want, strict=True):
        assert_close(g, r, torch.float32, "ieee", f"linear gradient {tuple(r.shape)}")
