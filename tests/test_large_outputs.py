"""Tensors past 2^31 elements through the public API, calls across the dispatch routes
(persistent 16-bit and tf32, register-fed tf32, 3xTF32, fp32 FMA, batched; one and 16 rows
against a huge weight): element offsets there overflow 32-bit arithmetic (an output row's
offset row * N, D's in the epilogue, a batch's, a weight row's), so a kernel either
computes them in 64 bits or its route refuses such tensors. Each output is poisoned with
NaN where the call takes out=, and the rows on both sides of element 2^31 and the last rows
are checked against float64. GPU only: one case moves 4-17 GB."""

import fcntl

import pytest
import torch

import triton_gemm as tg
from conftest import gpu_only, poisoned, randn
from triton_gemm.tolerances import assert_close

# (65536 + 128) x 32768 outputs: 2^31 + 2^22 elements, rows from 65536 on past 2^31.
M, N, K = 65536 + 128, 32768, 64
# Rows checked: either side of element 2^31, the first and the last.
CHECKED_ROWS = [slice(0, 64), slice(2**31 // N - 64, 2**31 // N + 64), slice(M - 64, M)]
# A weight of 2^31 + 2^11 elements as (N_WIDE, 16): for linear's few-row routes.
N_WIDE, K_WIDE = 2**27 + 128, 16


def _mm(dtype, precision=None, n=N, b_k_major=False):
    a = randn(M, K, dtype=dtype)
    b = randn(n, K, dtype=dtype).t() if b_k_major else randn(K, n, dtype=dtype)
    out = tg.mm(a, b, precision=precision, out=poisoned(M, n, dtype=dtype))
    return out, lambda rows: (a[rows].double() @ b.double(), a[rows], b)


def _addmm(dtype, precision=None):
    a, b, d = randn(M, K, dtype=dtype), randn(K, N, dtype=dtype), randn(M, N, dtype=dtype)
    out = tg.addmm(d, a, b, beta=0.5, alpha=2.0, precision=precision,
                   out=poisoned(M, N, dtype=dtype))
    return out, lambda rows: (2.0 * (a[rows].double() @ b.double()) + 0.5 * d[rows].double(),
                              a[rows], b)


def _linear(dtype):
    x, w, bias = randn(M, K, dtype=dtype), randn(N, K, dtype=dtype), randn(N, dtype=dtype)
    out = tg.linear(x, w, bias, activation="gelu")
    return out, lambda rows: (torch.nn.functional.gelu(
        x[rows].double() @ w.double().t() + bias.double()), x[rows], w.t())


def _bmm(dtype, with_d):
    half = M // 2
    a, b = randn(2, half, K, dtype=dtype), randn(2, K, N, dtype=dtype)
    d = randn(2, half, N, dtype=dtype) if with_d else None
    out = poisoned(2, half, N, dtype=dtype)
    out = tg.baddbmm(d, a, b, beta=0.5, out=out) if with_d else tg.bmm(a, b, out=out)
    # Rows of the (2 * half, N) stack: CHECKED_ROWS fall on both products, none across.

    def reference(rows):
        product, first = divmod(rows.start, half)
        assert (rows.stop - 1) // half == product
        part = slice(first, first + rows.stop - rows.start)
        ref = a[product, part].double() @ b[product].double()
        if d is not None:
            ref += 0.5 * d[product, part].double()
        return ref, a[product, part], b[product]
    return out.reshape(M, N), reference


CALLS = {
    "mm fp16": lambda: _mm(torch.float16),
    "mm fp16 K-major B": lambda: _mm(torch.float16, b_k_major=True),
    "mm fp16 unaligned rows": lambda: _mm(torch.float16, n=N - 1),
    "mm bf16 K-major B": lambda: _mm(torch.bfloat16, b_k_major=True),
    "mm tf32": lambda: _mm(torch.float32, "tf32"),
    "mm tf32x3": lambda: _mm(torch.float32, "tf32x3"),
    "mm ieee": lambda: _mm(torch.float32, "ieee"),
    "addmm fp16": lambda: _addmm(torch.float16),
    "addmm tf32": lambda: _addmm(torch.float32, "tf32"),
    "addmm ieee": lambda: _addmm(torch.float32, "ieee"),
    "linear bf16 bias gelu": lambda: _linear(torch.bfloat16),
    "bmm fp16": lambda: _bmm(torch.float16, with_d=False),
    "baddbmm fp16": lambda: _bmm(torch.float16, with_d=True),
}


@pytest.fixture
def one_at_a_time(tmp_path_factory):
    """These tests one at a time across pytest-xdist's workers (a lock in the session's
    temporary root), each handing its memory back after: one holds up to 35 GB."""
    with open(tmp_path_factory.getbasetemp().parent / "large_outputs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
        torch.cuda.empty_cache()


def _enough_memory(gigabytes: float) -> bool:
    return torch.cuda.mem_get_info()[0] >= gigabytes * 2**30


@gpu_only
@pytest.mark.parametrize("name", list(CALLS))
def test_outputs_past_2_pow_31_elements(name, one_at_a_time):
    if not _enough_memory(40):
        pytest.skip("needs 40 GB of free GPU memory")
    out, reference = CALLS[name]()
    precision = next((p for p in ("tf32x3", "tf32", "ieee") if p in name), None)
    assert not out.isnan().any(), f"{name}: elements left unwritten"
    for rows in CHECKED_ROWS:
        ref, a, b = reference(rows)
        assert_close(out[rows], ref, a.dtype, precision,
                     what=f"{name}, rows {rows.start}-{rows.stop}", operands=(a, b))


@gpu_only
@pytest.mark.parametrize("rows", [1, 16])
def test_weights_past_2_pow_31_elements(rows, one_at_a_time):
    """linear against a (2^27 + 128, 16) fp16 weight: the GEMV and skinny routes."""
    if not _enough_memory(20):
        pytest.skip("needs 20 GB of free GPU memory")
    x, w = randn(rows, K_WIDE, dtype=torch.float16), randn(N_WIDE, K_WIDE, dtype=torch.float16)
    out = tg.linear(x, w)
    for cols in (slice(0, 64), slice(2**31 // K_WIDE - 64, 2**31 // K_WIDE + 64),
                 slice(N_WIDE - 64, N_WIDE)):
        assert_close(out[:, cols], x.double() @ w[cols].double().t(), torch.float16,
                     what=f"{rows} rows, columns {cols.start}-{cols.stop}",
                     operands=(x, w[cols].t()))
