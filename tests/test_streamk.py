"""The stream-K kernel (kernels/streamk.py): tiles shared out by K steps between programs,
partials handed on through flags. Outputs poisoned first, compared with float64."""

import pytest
import torch

from conftest import DEVICE, randn, requires_kernels
from test_kernels import aligned
from triton_gemm import configs
from triton_gemm.kernels import streamk
from triton_gemm.tolerances import assert_close

SMALL = configs.persistent_config(32, 32, 16, 4, 2, False)  # interpreter-sized tiles

# (programs, M, N, K): tiles = ceil(M/32) * ceil(N/32) with BK = 16 steps of K. Whole waves
# plus a stream-K remainder (3 tiles on 2 programs), remainders only (1 tile over 4
# programs: every program inside one tile), a program with a segment in two tiles (15 tiles
# on 4), ragged edges, and more programs than stream-K steps.
SHARES = [(2, 96, 32, 72), (4, 32, 32, 80), (4, 160, 96, 72), (3, 67, 48, 72), (7, 33, 40, 32)]


@requires_kernels
@pytest.mark.parametrize("programs,m,n,k", SHARES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_shared_tiles_match_float64_and_repeat_bitwise(monkeypatch, programs, m, n, k, dtype):
    monkeypatch.setattr(streamk, "_num_sms", lambda index: programs)
    a = aligned(m, k, dtype)
    b = aligned(n, k, dtype).t() if dtype == torch.float32 else aligned(k, n, dtype)
    d = randn(n, dtype=dtype)
    runs = []
    for _ in range(2):
        out = aligned(m, n, dtype, fill=float("nan"))
        streamk.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision="tf32",
                          activation=1, config=SMALL)
        runs.append(out)
    ref = torch.relu(-(a.double() @ b.double()) + 2.0 * d.double()).cpu()
    precision = None if dtype == torch.float16 else "tf32"
    assert_close(runs[0], ref, dtype, precision, f"{programs} programs")
    assert torch.equal(runs[0], runs[1])  # partials summed in one fixed order


STREAMK_CASES = [(family, config, dtype)
                 for family in ("half", "half_mid") for config in configs.streamk_configs(family)
                 for dtype in (torch.float16, torch.bfloat16)
                 if DEVICE == "cuda"] + [("tf32", config, torch.float32)
                                        for config in configs.streamk_configs("tf32")
                                        if DEVICE == "cuda"]


@pytest.mark.skipif(DEVICE != "cuda", reason="every config at GPU sizes (the interpreter "
                    "tests the sharing above on small tiles)")
@pytest.mark.parametrize("family,config,dtype", STREAMK_CASES,
                         ids=[f"{f}-{configs.config_name(c, f)}-{dt}".replace("torch.", "")
                              for f, c, dt in STREAMK_CASES])
def test_every_streamk_config_on_all_sms(family, config, dtype):
    """1000^3-like products (fewer tiles than SMs: all stream-K) and a ragged one with a
    whole wave and a remainder, B K-major for fp32, each config."""
    for m, n, k in ((1000, 1000, 1008), (2100, 1900, 520)):
        a = aligned(m, k, dtype)
        b = aligned(n, k, dtype).t() if dtype == torch.float32 else aligned(k, n, dtype)
        out = aligned(m, n, dtype, fill=float("nan"))
        streamk.matmul_2d(a, b, out, precision="tf32", config=config)
        assert_close(out, (a.double() @ b.double()).cpu(), dtype,
                     None if dtype != torch.float32 else "tf32", f"{m}x{n}x{k}")
