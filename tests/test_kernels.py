"""The Triton kernel itself: every autotune config pinned once, outputs poisoned first."""

import pytest
import torch

from conftest import DEVICE, gpu_only, randn, requires_kernels
from triton_gemm.tolerances import assert_close
from triton_gemm import configs
from triton_gemm.kernels import matmul as kernel

# Family -> the (dtype, precision) pairs it serves.
FAMILY_CASES = {
    "simt": [(torch.float32, "ieee")],
    "tf32": [(torch.float32, "tf32"), (torch.float32, "tf32x3")],
    "half": [(torch.float16, "half"), (torch.bfloat16, "half")],
}
PINNED = [(family, tile, dtype, precision)
          for family, cases in FAMILY_CASES.items()
          for tile in configs.tiles(family) for dtype, precision in cases]

# Ragged against every tile, K crossing several BK steps of the smaller tiles.
M, N, K = (300, 270, 200) if DEVICE == "cuda" else (67, 45, 70)


def poisoned(*shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)


@requires_kernels
@pytest.mark.parametrize("family,tile,dtype,precision", PINNED,
                         ids=[f"{t[0]}-{dt}-{p}".replace("torch.", "") for _, t, dt, p in PINNED])
def test_every_config(family, tile, dtype, precision):
    """Each config as the autotuner could pick it, with the addmm epilogue on half the runs."""
    config = configs.configs(family)[configs.tiles(family).index(tile)]
    a, b = randn(2, M, K, dtype=dtype), randn(2, K, N, dtype=dtype)
    d = randn(1, 1, N, dtype=dtype)
    out = poisoned(2, M, N, dtype=dtype)
    kernel.matmul_3d(a, b, out, d, alpha=1.5, beta=-0.5, precision=precision, config=config)
    ref = 1.5 * torch.matmul(a.double(), b.double()).cpu() - 0.5 * d.double().cpu()
    assert_close(out, ref, dtype, None if precision == "half" else precision, tile[0])


@requires_kernels
@pytest.mark.parametrize("dtype,precision", [(torch.float32, "tf32x3"), (torch.float16, "half")])
def test_default_config_writes_every_element(dtype, precision):
    a, b = randn(3, 33, 70, dtype=dtype), randn(3, 70, 130, dtype=dtype)
    out = poisoned(3, 33, 130, dtype=dtype)
    kernel.matmul_3d(a, b, out, precision=precision)
    assert_close(out, torch.matmul(a.double(), b.double()), dtype,
                 None if precision == "half" else precision, "default config")


@requires_kernels
def test_output_strides_are_respected():
    """A strided output view: the kernel writes only its elements."""
    a, b = randn(1, 20, 30), randn(1, 30, 10)
    base = poisoned(1, 40, 10, dtype=torch.float32)
    kernel.matmul_3d(a, b, base[:, ::2], precision="ieee")
    assert_close(base[:, ::2], torch.matmul(a.double(), b.double()), torch.float32, "ieee",
                 "strided out")
    assert base[:, 1::2].isnan().all()


def test_layout_code_and_int64_span():
    a = torch.empty(1, 8, 4)
    b = torch.empty(1, 4, 6)
    assert kernel.layout_code(a, b) == kernel.A_K_CONTIGUOUS
    assert kernel.layout_code(a, b.mT.contiguous().mT) == (kernel.A_K_CONTIGUOUS
                                                           | kernel.B_K_CONTIGUOUS)
    assert kernel.layout_code(a.mT.contiguous().mT, b) == 0
    assert kernel._span(torch.empty(3, 5)) == 15
    assert kernel._span(torch.empty(3, 5).t()) == 15
    assert kernel._span(torch.empty(1, 5).expand(4, 5)) == 5


@gpu_only
def test_int64_offsets_beyond_2_pow_31_elements():
    """A has 2^31 + 2048*16 elements: 32-bit offsets would wrap and read the wrong rows."""
    k = 2048
    m = 2**31 // k + 16
    a = torch.empty(m, k, dtype=torch.float16, device="cuda")
    a[:-32].zero_()
    a[-32:] = torch.randn(32, k, device="cuda").half()
    b = randn(k, 16, dtype=torch.float16)
    out = poisoned(1, m, 16, dtype=torch.float16)
    kernel.matmul_3d(a.unsqueeze(0), b.unsqueeze(0), out, precision="half")
    assert_close(out[0, -32:], torch.matmul(a[-32:].double(), b.double()), torch.float16,
                 what="rows past 2^31 elements")
    assert (out[0, :-32] == 0).all()
