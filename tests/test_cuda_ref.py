"""The CUDA ladder: every step against float64 on fresh data with a poisoned C (GPU only),
and its registry and input checks (anywhere)."""

import re
from pathlib import Path

import pytest
import torch

from conftest import gpu_only
from triton_gemm.tolerances import assert_close
from triton_gemm import cuda_ref

SHAPES = [(1, 1, 1), (17, 17, 17), (129, 129, 129), (1000, 1000, 1000), (4097, 4097, 4097),
          (1, 4096, 1024), (300, 17, 129), (64, 1000, 8), (513, 257, 3), (128, 128, 0)]


def _tolerance_dtype(kernel):
    # WMMA rounds operands to fp16; every other step is fp32 FMA.
    return (torch.float16, None) if kernel in cuda_ref.TENSOR_CORE_KERNELS else (torch.float32,
                                                                                "ieee")


@gpu_only
@pytest.mark.parametrize("kernel", cuda_ref.NAMES)
@pytest.mark.parametrize("m,n,k", SHAPES, ids=lambda v: str(v))
def test_every_step_against_float64(kernel, m, n, k):
    a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
    out = cuda_ref.sgemm(a, b, kernel=kernel)  # fresh output; beta = 0 never reads it
    torch.cuda.synchronize()
    assert_close(out, a.double() @ b.double(), *_tolerance_dtype(kernel), what=kernel)


@gpu_only
@pytest.mark.parametrize("kernel", cuda_ref.NAMES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (2.0, -0.5), (0.5, 0.0)])
def test_alpha_beta(kernel, alpha, beta):
    m, n, k = 131, 77, 45
    a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
    c = torch.randn(m, n, device="cuda")
    if beta == 0:
        c.fill_(float("nan"))  # BLAS: beta == 0 never reads C
    out = cuda_ref.sgemm(a, b, c, alpha=alpha, beta=beta, kernel=kernel)
    ref = alpha * (a.double() @ b.double())
    if beta != 0:
        ref += beta * c.double()
    assert_close(out, ref, *_tolerance_dtype(kernel), what=f"{kernel} a={alpha} b={beta}")


@gpu_only
@pytest.mark.parametrize("kernel", cuda_ref.NAMES)
def test_unaligned_rows_use_scalar_loads(kernel):
    """K and N not multiples of 4, and A starting 4 bytes into its storage."""
    m, n, k = 70, 33, 37
    storage = torch.randn(m * k + 1, device="cuda")
    a = storage[1:].view(m, k)
    b = torch.randn(k, n, device="cuda")
    assert_close(cuda_ref.sgemm(a, b, kernel=kernel), a.double() @ b.double(),
                 *_tolerance_dtype(kernel), what=kernel)


def test_registry_matches_sources_and_binding():
    binding = (cuda_ref.SOURCE_DIR / "binding.cpp").read_text()
    assert re.findall(r'\{"(\w+)", sgemm_\w+\}', binding) == list(cuda_ref.NAMES)
    files = sorted(p.name for p in cuda_ref.SOURCE_DIR.glob("[0-9]*.cu"))
    assert files == [f for _, f, _ in cuda_ref.LADDER]
    for name, f, _ in cuda_ref.LADDER:
        assert f"cudaError_t sgemm_{name}(LADDER_ARGS)" in (cuda_ref.SOURCE_DIR / f).read_text()
    assert list(cuda_ref.KERNELS) == list(cuda_ref.NAMES)


def test_sources_are_plain_cuda():
    for path in Path(cuda_ref.SOURCE_DIR).glob("*.cu*"):
        assert "torch" not in path.read_text(), f"{path.name} must not include torch headers"


@pytest.mark.parametrize("args,kwargs,exc,words", [
    ((torch.ones(2, 3), torch.ones(3, 4)), {}, ValueError, "needs CUDA tensors"),
    ((torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 4)), {}, TypeError, "float32"),
    ((torch.ones(2, 3), torch.ones(3, 4)), {"kernel": "cutlass"}, ValueError, "unknown kernel"),
    (([[1.0]], torch.ones(1, 1)), {}, TypeError, "torch.Tensor"),
])
def test_bad_input(args, kwargs, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        cuda_ref.sgemm(*args, **kwargs)


@gpu_only
def test_bad_input_on_gpu():
    a, b = torch.randn(4, 3, device="cuda"), torch.randn(5, 6, device="cuda")
    with pytest.raises(ValueError, match=re.escape("(4x3 and 5x6)")):
        cuda_ref.sgemm(a, b)
    with pytest.raises(ValueError, match="contiguous"):
        cuda_ref.sgemm(torch.randn(3, 4, device="cuda").t(), torch.randn(3, 2, device="cuda"))
    with pytest.raises(ValueError, match="needs 'c'"):
        cuda_ref.sgemm(torch.randn(3, 4, device="cuda"), torch.randn(4, 2, device="cuda"),
                       beta=1.0)


@pytest.mark.skipif(torch.version.cuda is not None, reason="checks the message of CPU torch")
def test_no_cuda_toolkit_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no CUDA support"):
        cuda_ref.load()
