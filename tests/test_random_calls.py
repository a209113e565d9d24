"""Random calls of the public API against float64 torch: the dispatcher picks among many
kernels, copies and plans by shape, layout, alignment, dtype and precision, and fixed test
shapes sit on a few of its thresholds only. Each case draws its call from the session seed
(TRITON_GEMM_TEST_SEED replays a session): the function (mm, matmul, bmm, addmm, baddbmm,
linear), sizes around the dispatcher's thresholds, each operand stored contiguous,
transposed or as a view into a larger tensor (an offset base, a pitch off 16 bytes),
alpha / beta / bias / activation, vector operands, and an out= tensor (contiguous or a
transposed view) poisoned with NaN; the data is fresh.
"""

import random

import pytest
import torch

import triton_gemm as tg
from conftest import (CASES, DEVICE, SESSION_SEED, TORCH_ACTIVATIONS, randn,
                      requires_kernels)
from triton_gemm.tolerances import (ACTIVATION_GRADIENT_FACTOR, random_sign_norm, rel_error,
                                    tolerance)

# Sizes on and beside the dispatcher's thresholds: GEMV and skinny rows (1-8, up to 64),
# mid rows (65-256: tall tiles at 80-96 and 129-192, rows_2d at 96-128), 16-byte runs
# (multiples of 8 and their neighbours), and on the GPU whole 128x128 tiles per SM, waves,
# weights wide enough for rows_2d (dispatch.FED_ROWS: a wave of 128-row tiles, 16896) and
# long K slices.
SIZES = [1, 2, 3, 5, 8, 9, 16, 17, 31, 33, 48, 63, 64, 65]
if DEVICE == "cuda":
    SIZES += [80, 96, 100, 127, 128, 129, 144, 160, 192, 255, 256, 257, 384, 511, 512, 1000,
              1024, 1025, 2048, 2050, 4096, 4104, 11008, 16896]
    LONG_K = [8192, 16384, 65536]
    MAX_MACS = 2 ** 34  # a product's multiply-adds: the case's float64 reference runs on CPU
    MAX_ELEMENTS = 2 ** 26  # an operand's or the output's
    CASE_COUNT = 128
else:  # the interpreter runs every program on the CPU
    LONG_K = [300, 1000]
    MAX_MACS = 2 ** 18
    MAX_ELEMENTS = 2 ** 14
    CASE_COUNT = 48
FUNCTIONS = ["mm", "matmul", "bmm", "addmm", "baddbmm", "linear"]
ACTIVATIONS = [None, *TORCH_ACTIVATIONS]  # linear()'s
STORAGE = ["contiguous", "transposed", "view"]


def _stored(rows: int, cols: int, dtype, storage: str, lead: tuple = ()) -> torch.Tensor:
    """A fresh (*lead, rows, cols) operand: contiguous, the transpose of a contiguous one,
    or a view into a larger tensor from row 1 and column 1 (its base one element past
    16-byte alignment, its pitch cols + 3)."""
    if storage == "transposed":
        return randn(*lead, cols, rows, dtype=dtype).transpose(-1, -2)
    if storage == "view":
        return randn(*lead, rows + 1, cols + 3, dtype=dtype)[..., 1:, 1:cols + 1]
    return randn(*lead, rows, cols, dtype=dtype)


def _sizes(rng: random.Random, batch: int, products: int = 1, ks: list = SIZES + LONG_K) -> tuple:
    """(m, n, k), k from ks, within MAX_MACS for `products` products of them and within
    MAX_ELEMENTS an operand, a batch of `batch`."""
    while True:
        m, n, k = rng.choice(SIZES), rng.choice(SIZES), rng.choice(ks)
        if (products * batch * m * n * k <= MAX_MACS
                and max(batch * m * k, batch * k * n, batch * m * n) <= MAX_ELEMENTS):
            return m, n, k


def _draw(index: int) -> dict:
    """Case `index` of this session: the call's function, sizes, dtype, storage and the
    extras its function takes."""
    rng = random.Random(SESSION_SEED * 1009 + index)
    dtype, precision = rng.choice(CASES)
    fn = rng.choice(FUNCTIONS)
    batch = rng.choice([1, 2, 3, 8]) if fn not in ("mm", "addmm") else 1
    m, n, k = _sizes(rng, batch)
    case = {"fn": fn, "dtype": dtype, "precision": precision, "batch": batch, "m": m,
            "n": n, "k": k, "a": rng.choice(STORAGE), "b": rng.choice(STORAGE)}
    if fn in ("addmm", "baddbmm"):
        case.update(alpha=rng.choice([1.0, 1.0, 0.5, -2.0, 0.0]),
                    beta=rng.choice([1.0, 1.0, 0.0, 0.25]),
                    input=rng.choice(["row", "matrix", "column", "scalar"]))
    if fn == "matmul" and batch > 1:
        case["b_2d"] = rng.random() < 0.5  # broadcast against a 2-D b
    if fn == "linear":
        case.update(bias=rng.random() < 0.7, activation=rng.choice(ACTIVATIONS))
    else:  # out= (poisoned with NaN) where drawn: contiguous, or a transposed view
        case["out"] = rng.random() < 0.3 and rng.choice(["contiguous", "transposed"])
    if fn == "matmul" and batch == 1:
        case["vector"] = rng.choice([None, None, "a", "b"])  # that operand's first row / column
    return case


def _inject_nonfinite(t: torch.Tensor, seed) -> torch.Tensor:
    """t with, where seed is not None, a NaN at a random element and (t having two rows or
    more) an infinity of random sign in another row; the scale of its product's rounding is
    taken with them zeroed (_finite)."""
    if seed is not None:
        rng = random.Random(seed)
        at = [rng.randrange(size) for size in t.shape]
        t[tuple(at)] = float("nan")
        if t.dim() >= 2 and t.shape[-2] > 1:
            at[-2] = (at[-2] + 1 + rng.randrange(t.shape[-2] - 1)) % t.shape[-2]
            t[tuple(at)] = rng.choice([float("inf"), float("-inf")])
    return t


def _finite(t: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)


def _activation(z: torch.Tensor, name) -> torch.Tensor:
    return z if name is None else TORCH_ACTIVATIONS[name](z)


def _input(case: dict) -> torch.Tensor:
    """addmm's / baddbmm's input, broadcast as torch allows: a row, a column, a scalar, or
    the whole output."""
    lead = (case["batch"], ) if case["fn"] == "baddbmm" else ()
    shape = {"row": (case["n"], ), "column": (case["m"], 1), "scalar": (),
             "matrix": lead + (case["m"], case["n"])}[case["input"]]
    return randn(*shape, dtype=case["dtype"])


def _call(case: dict):
    """(result, float64 reference, the scale of the product's rounding, out= or None)."""
    dtype, fn, batch, m, n, k = (case[key] for key in ("dtype", "fn", "batch", "m", "n", "k"))
    kw = {"precision": case["precision"]}
    if fn == "linear":  # the weight (N, K) stored as case["b"] says; x (batch, M, K) if batched
        x = _stored(m, k, dtype, case["a"], (batch, ) if batch > 1 else ())
        x = _inject_nonfinite(x, case.get("nonfinite"))
        w = _stored(n, k, dtype, case["b"])
        bias = randn(n, dtype=dtype) if case["bias"] else None
        ref = torch.matmul(x.double().cpu(), w.double().cpu().T)
        if bias is not None:
            ref = ref + bias.double().cpu()
        got = tg.linear(x, w, bias, activation=case["activation"], **kw)
        return (got, _activation(ref, case["activation"]), random_sign_norm(_finite(x), w.T),
                None)
    lead = (batch, ) if batch > 1 or fn in ("bmm", "baddbmm") else ()
    a = _stored(m, k, dtype, case["a"], lead)
    b = _stored(k, n, dtype, case["b"], () if case.get("b_2d") else lead)
    a, b = (a[0] if case.get("vector") == "a" else a), (b[:, 0] if case.get("vector") == "b"
                                                        else b)
    a = _inject_nonfinite(a, case.get("nonfinite"))
    product = torch.matmul(a.double().cpu(), b.double().cpu())
    scale = random_sign_norm(_finite(a).reshape(-1, k) if a.dim() == 1 else _finite(a),
                             b.reshape(k, -1) if b.dim() == 1 else b)
    out = None
    if case["out"]:
        transposed = case["out"] == "transposed" and product.dim() >= 2  # not a vector
        shape = product.mT.shape if transposed else product.shape
        out = torch.full(shape, float("nan"), dtype=dtype, device=a.device)
        out = out.mT if transposed else out
    if fn in ("addmm", "baddbmm"):
        alpha, beta, c = case["alpha"], case["beta"], _input(case)
        # alpha = 0 ignores the product (NaN in it too), beta = 0 the input, as documented.
        ref = ((alpha * product if alpha != 0 else torch.zeros_like(product))
               + (beta * c.double().cpu() if beta != 0 else 0))
        call = tg.addmm if fn == "addmm" else tg.baddbmm
        return call(c, a, b, alpha=alpha, beta=beta, out=out, **kw), ref, abs(alpha) * scale, out
    call = {"mm": tg.mm, "bmm": tg.bmm, "matmul": tg.matmul}[fn]
    return call(a, b, out=out, **kw), product, scale, out


@requires_kernels
@pytest.mark.parametrize("index", range(CASE_COUNT))
def test_random_call_matches_float64(index):
    """Case `index` of this session's draw, within its precision's tolerance of float64
    (scaled to its product's rounding, as assert_close), of the dtype and shape torch gives,
    written into out= where one was passed."""
    case = _draw(index)
    what = f"{case} (TRITON_GEMM_TEST_SEED={SESSION_SEED})"
    got, ref, scale, out = _call(case)
    assert got.dtype == case["dtype"] and got.device.type == DEVICE, what
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    if out is not None:
        assert got is out, f"{what}: out= not returned"
    err = rel_error(got, ref, scale)
    bound = tolerance(case["dtype"], case["precision"])
    assert err <= bound, f"{what}: relative error {err:.3e} > {bound:.1e}"


@requires_kernels
@pytest.mark.parametrize("index", range(CASE_COUNT // 4))
def test_random_call_propagates_nan_and_inf_like_float64(index):
    """A call drawn as above (another draw; no activation: torch's CPU gelu(inf) is NaN)
    with a NaN and an infinity in its first operand: NaN where float64 has NaN, the same
    infinities, and the finite elements within tolerance."""
    case = {**_draw(CASE_COUNT + index), "nonfinite": SESSION_SEED * 1019 + index}
    if case["fn"] == "linear":
        case["activation"] = None
    what = f"{case} (TRITON_GEMM_TEST_SEED={SESSION_SEED})"
    got, ref, scale, _ = _call(case)
    got = got.detach().double().cpu()
    assert ref.isnan().any() or case.get("alpha") == 0, f"{what}: no NaN to propagate"
    assert torch.equal(got.isnan(), ref.isnan()), f"{what}: NaN elsewhere than float64's"
    infinite = ref.isinf()
    assert torch.equal(got.isinf(), infinite) and torch.equal(got[infinite], ref[infinite]), \
        f"{what}: infinities differ from float64's"
    finite = ~(infinite | ref.isnan())
    err = rel_error(got[finite], ref[finite], scale)
    bound = tolerance(case["dtype"], case["precision"])
    assert err <= bound, f"{what}: finite elements' relative error {err:.3e} > {bound:.1e}"


def _leaf(rows: int, cols: int, dtype, storage: str, lead: tuple = ()) -> torch.Tensor:
    """A fresh operand as _stored gives it, made a leaf that takes a gradient."""
    return _stored(rows, cols, dtype, storage, lead).detach().requires_grad_(True)


def _grad_error(got: torch.Tensor, ref: torch.Tensor, scale: float) -> float:
    assert got is not None and got.shape == ref.shape, (None if got is None else got.shape)
    return rel_error(got, ref, scale)


@requires_kernels
@pytest.mark.parametrize("index", range(CASE_COUNT // 4))
def test_random_backward_matches_float64(index):
    """Gradients of a random linear (bias, a smooth activation or none) or matmul (batched,
    broadcast) call, each operand stored as _stored draws it, against float64 autograd,
    each within its precision's tolerance scaled to its own product's rounding (through an
    activation ACTIVATION_GRADIENT_FACTOR times it; relu, whose mask flips with Z's
    rounding near 0, is left to test_autograd's fixed cases)."""
    rng = random.Random(SESSION_SEED * 1013 + index)
    dtype, precision = rng.choice(CASES)
    fn = rng.choice(["linear", "matmul"])
    batch = rng.choice([1, 1, 2, 3])
    m, n, k = _sizes(rng, batch, products=3, ks=SIZES)  # the forward and two gradients
    storage = (rng.choice(STORAGE), rng.choice(STORAGE))
    case = {"fn": fn, "dtype": dtype, "precision": precision, "batch": batch, "m": m, "n": n,
            "k": k, "storage": storage}
    lead = (batch, ) if batch > 1 else ()
    if fn == "linear":
        activation = rng.choice([a for a in ACTIVATIONS if a != "relu"])
        case.update(activation=activation)
        x, w = _leaf(m, k, dtype, storage[0], lead), _leaf(n, k, dtype, storage[1])
        bias = randn(n, dtype=dtype).requires_grad_(True)
        leaves = (x, w, bias)
        got = tg.linear(x, w, bias, activation=activation, precision=precision)
    else:
        b_lead = lead if rng.random() < 0.5 else ()  # a 2-D b broadcast over a's batch
        case.update(b_batched=bool(b_lead))
        leaves = (_leaf(m, k, dtype, storage[0], lead), _leaf(k, n, dtype, storage[1], b_lead))
        got = tg.matmul(*leaves, precision=precision)
    cotangent = randn(*got.shape, dtype=dtype)
    got.backward(cotangent)
    refs = [t.detach().double().cpu().requires_grad_(True) for t in leaves]
    # Errors scale with the cotangent, not with act'(Z) times it: the recomputed Z's
    # rounding moves act' by act''(Z) dZ, also where act' is near 0 (gelu's, silu's
    # derivatives stay within 1.13 of it; gelu at m = 3, n = 1 under the interpreter's tf32
    # erred 2e-2 against the scale of act'(Z) times the cotangent).
    g = cotangent.double().cpu()
    if fn == "linear":
        z = torch.nn.functional.linear(refs[0], refs[1], refs[2])
        _activation(z, case["activation"]).backward(g)
        scales = (random_sign_norm(g, refs[1]), random_sign_norm(g.reshape(-1, n).T,
                  refs[0].detach().reshape(-1, k)), g.norm().item())
    else:
        torch.matmul(*refs).backward(g)
        scales = (random_sign_norm(g, refs[1].detach().mT),
                  random_sign_norm(refs[0].detach().mT, g))
    bound = tolerance(dtype, precision)
    if case.get("activation") is not None:
        bound *= ACTIVATION_GRADIENT_FACTOR
    what = f"{case} (TRITON_GEMM_TEST_SEED={SESSION_SEED})"
    for name, leaf, ref, scale in zip(("first", "second", "bias"), leaves, refs, scales):
        err = _grad_error(leaf.grad, ref.grad, scale)
        assert err <= bound, f"{what}: {name} operand's gradient relative error {err:.3e}"
