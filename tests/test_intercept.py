"""triton_gemm.intercept(): torch's GEMM calls inside the block run on triton_gemm's
kernels with torch's results; everything else, and what triton_gemm does not take, runs in
torch unchanged."""

import pytest
import torch
from torch.nn import functional

import triton_gemm as tg
from conftest import CASE_IDS, CASES, DEVICE, randn, requires_kernels
from triton_gemm import launch_cache
from triton_gemm.tolerances import assert_close


@pytest.fixture
def launches(monkeypatch):
    """A list that gets one entry per product triton_gemm launches."""
    seen = []
    real = launch_cache.run

    def counted(*args, **kwargs):
        seen.append(args[0].shape)
        return real(*args, **kwargs)
    monkeypatch.setattr(launch_cache, "run", counted)
    return seen


def f64(*tensors):
    return [t.double().cpu() for t in tensors]


# name: (operand shapes, the torch call).
CALLS = {
    "operator": ([(2, 9, 14), (14, 11)], lambda a, b: a @ b),
    "rmatmul": ([(9, 14), (14, 11)], lambda a, b: b.__rmatmul__(a)),
    "torch.matmul": ([(14,), (3, 14, 11)], torch.matmul),
    "Tensor.matmul": ([(9, 14), (14,)], lambda a, b: a.matmul(b)),
    "torch.mm": ([(9, 14), (14, 11)], torch.mm),
    "Tensor.mm": ([(9, 14), (14, 11)], lambda a, b: a.mm(b)),
    "torch.bmm": ([(3, 9, 14), (3, 14, 11)], torch.bmm),
    "Tensor.bmm": ([(3, 9, 14), (3, 14, 11)], lambda a, b: a.bmm(b)),
    "torch.addmm": ([(11,), (9, 14), (14, 11)],
                    lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2)),
    "Tensor.addmm": ([(9, 11), (9, 14), (14, 11)], lambda c, a, b: c.addmm(a, b, alpha=-1)),
    "torch.baddbmm": ([(3, 1, 11), (3, 9, 14), (3, 14, 11)],
                      lambda c, a, b: torch.baddbmm(c, a, b, beta=2)),
    "Tensor.baddbmm": ([(3, 9, 11), (3, 9, 14), (3, 14, 11)],
                       lambda c, a, b: c.baddbmm(a, b)),
    "F.linear": ([(2, 9, 14), (11, 14), (11,)], functional.linear),
    "nn.Linear": ([(9, 14)], None),
}


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("call", list(CALLS))
def test_torch_calls_run_on_triton_gemm(dtype, precision, call, launches):
    shapes, fn = CALLS[call]
    operands = [randn(*s, dtype=dtype) for s in shapes]
    if fn is None:
        layer = torch.nn.Linear(14, 11, device=DEVICE, dtype=dtype)
        fn = layer.__call__
        ref_fn = lambda x: functional.linear(x, *f64(layer.weight, layer.bias))  # noqa: E731
    else:
        ref_fn = fn
    with torch.no_grad(), tg.intercept(precision=precision) as mode:
        out = fn(*operands)
    assert len(launches) == 1, f"{call}: {len(launches)} triton_gemm launches"
    assert (mode.rerouted, mode.left_to_torch) == (1, 0)
    assert out.dtype == dtype
    assert_close(out, ref_fn(*f64(*operands)), dtype, precision, call)


@requires_kernels
@pytest.mark.parametrize("fn", [torch.matmul, torch.mm, torch.bmm])
def test_out_is_written_and_returned(fn, launches):
    batch = (2,) if fn is torch.bmm else ()
    a, b = randn(*batch, 9, 14), randn(*batch, 14, 11)
    out = torch.full((*batch, 9, 11), float("nan"), device=DEVICE)
    with tg.intercept(precision="ieee"):
        result = fn(a, b, out=out)
    assert result is out and len(launches) == 1
    assert_close(out, f64(a)[0] @ f64(b)[0], torch.float32, "ieee", f"{fn.__name__} out=")


@requires_kernels
def test_precision_follows_torch_when_not_given(launches, monkeypatch):
    """intercept() with no precision resolves float32 calls as torch does, from
    torch.get_float32_matmul_precision(); 16-bit calls take no precision."""
    chosen = []
    real = tg.api.resolve_precision

    def spy(precision, dtype):
        chosen.append(real(precision, dtype))
        return chosen[-1]
    monkeypatch.setattr(tg.api, "resolve_precision", spy)
    a, b = randn(8, 8), randn(8, 8)
    before = torch.get_float32_matmul_precision()
    try:
        for setting, expected in [("highest", "ieee"), ("high", "tf32")]:
            torch.set_float32_matmul_precision(setting)
            with tg.intercept():
                a @ b
            assert chosen[-1] == expected
    finally:
        torch.set_float32_matmul_precision(before)
    with tg.intercept(precision="tf32x3"):
        a.half() @ b.half()
    assert chosen[-1] == "half" and len(launches) == 3


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_inside_the_block(dtype, launches):
    """Under autocast, float32 calls run on triton_gemm in the autocast dtype, also with a
    float32 precision given to intercept() (it applies to products left in float32)."""
    layer = torch.nn.Linear(16, 8, device=DEVICE)
    x, w = randn(4, 16), randn(8, 16)
    with tg.intercept(precision="tf32x3"), torch.autocast(DEVICE, dtype=dtype):
        y, z = layer(x), x @ w.t()
    assert y.dtype == z.dtype == dtype and len(launches) == 2
    ref = functional.linear(*f64(x, layer.weight, layer.bias))
    assert_close(y, ref, dtype, None, "autocast linear", operands=(x, layer.weight.t()))


@requires_kernels
def test_what_triton_gemm_does_not_take_runs_in_torch(launches):
    """float64 and integer operands give torch's exact result; no triton_gemm launch."""
    a, b = torch.randn(6, 5, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    ints = torch.randint(-3, 4, (6, 5)), torch.randint(-3, 4, (5, 4))
    with tg.intercept() as mode:
        outs = [a @ b, torch.mm(*ints), torch.relu(a)]
    assert torch.equal(outs[0], a @ b) and torch.equal(outs[1], torch.mm(*ints))
    assert launches == [] and (mode.rerouted, mode.left_to_torch) == (0, 2)


@requires_kernels
def test_linear_bias_that_torch_broadcasts_runs_here(launches):
    """A linear bias of more than out_features, which torch broadcasts, is taken too: one
    launch, the bias as the epilogue's matrix D."""
    x, w, bias = randn(6, 5), randn(4, 5), randn(6, 4)
    with tg.intercept() as mode:
        out = functional.linear(x, w, bias)
    assert launches == [torch.Size([1, 6, 5])]
    assert (mode.rerouted, mode.left_to_torch) == (1, 0)
    assert_close(out, functional.linear(*f64(x, w, bias)), torch.float32, "ieee",
                 "linear, broadcast bias")


@requires_kernels
def test_bad_arguments_get_torchs_own_error():
    a, b = randn(2, 3), randn(4, 5)
    with pytest.raises(RuntimeError) as expected:
        torch.mm(a, b)
    with tg.intercept(), pytest.raises(RuntimeError) as got:
        torch.mm(a, b)
    assert str(got.value) == str(expected.value)


def _outcome(fn):
    """fn()'s result, or its exception's type and text."""
    try:
        return fn()
    except Exception as error:  # noqa: BLE001 (compared, not handled)
        return type(error), str(error)


@requires_kernels
def test_arguments_outside_the_signature_go_to_torch(launches):
    """torch's out_dtype (not in triton_gemm's signatures) gets exactly torch's outcome: a
    result on the GPU, NotImplementedError on the CPU."""
    a, b = randn(4, 8, dtype=torch.float16), randn(8, 4, dtype=torch.float16)
    expected = _outcome(lambda: torch.mm(a, b, out_dtype=torch.float32))
    with tg.intercept():
        got = _outcome(lambda: torch.mm(a, b, out_dtype=torch.float32))
    if isinstance(expected, tuple):
        assert got == expected
    else:
        assert torch.equal(got, expected)
    assert launches == []


@requires_kernels
@pytest.mark.parametrize("error", [ValueError, TypeError, RuntimeError])
def test_errors_inside_triton_gemm_propagate(error, monkeypatch):
    """An error raised past the argument checks is not hidden by running torch instead."""
    def broken(*args, **kwargs):
        raise error("inside the launch")
    monkeypatch.setattr(launch_cache, "run", broken)
    a, b = randn(4, 4), randn(4, 4)
    with tg.intercept(), pytest.raises(error, match="inside the launch"):
        torch.matmul(a, b)   # (torch turns a TypeError under the @ operator into its own)


@requires_kernels
def test_only_inside_the_block_and_nested(launches):
    a, b = randn(4, 4), randn(4, 4)
    with tg.intercept(precision="ieee"):
        with tg.intercept(precision="ieee"):
            a @ b
        a @ b
    a @ b
    assert len(launches) == 2


@requires_kernels
def test_gradients_through_intercepted_calls():
    """A block of linear, @ and baddbmm under the mode: float64 gradients."""
    x, w, bias, v = randn(2, 5, 8), randn(6, 8), randn(6), randn(2, 6, 3)
    mask = randn(5, 3)

    def block(x, w, bias, v):
        h = torch.tanh(functional.linear(x, w, bias))
        return torch.baddbmm(mask.to(h), h, v, alpha=0.5) @ v.transpose(1, 2)

    leaves = [t.clone().requires_grad_(True) for t in (x, w, bias, v)]
    with tg.intercept(precision="ieee"):
        out = block(*leaves)
    cot = randn(*out.shape)
    grads = torch.autograd.grad(out, leaves, cot)
    ref_leaves = [t.double().cpu().requires_grad_(True) for t in (x, w, bias, v)]
    ref = block(*ref_leaves)
    ref_grads = torch.autograd.grad(ref, ref_leaves, cot.double().cpu())
    assert_close(out, ref, torch.float32, "ieee", "forward")
    for i, (g, rg) in enumerate(zip(grads, ref_grads, strict=True)):
        assert_close(g, rg, torch.float32, "ieee", f"grad {i}")


@requires_kernels
def test_torch_compile_traces_the_rerouted_calls_as_the_operator():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    def block(x, w):
        return torch.relu(x @ w)

    x, w = randn(4, 16), randn(16, 8)
    with tg.intercept(precision="ieee"):
        out = torch.compile(block, fullgraph=True, backend=backend)(x, w)
    assert any("triton_gemm.gemm" in g for g in graphs), graphs
    assert_close(out, torch.relu(x.double() @ w.double()), torch.float32, "ieee", "compiled")


def test_bad_precision_is_a_clear_error():
    with pytest.raises(ValueError, match="precision must be one of"):
        tg.intercept(precision="fp64")
