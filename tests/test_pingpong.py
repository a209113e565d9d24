"""kernels/pingpong.py: 16-bit products on two wgmma warpgroups taking turns. Where dispatch
sends them (CPU), what the kernel compiles to (offline sm_90a, no GPU), and the products
themselves (GPU)."""

import pytest
import torch

from conftest import DEVICE, TORCH_ACTIVATIONS, gpu_only, offline_build, randn, requires_kernels
import triton_gemm
from triton_gemm import configs, dispatch, last_config
from triton_gemm.kernels import persistent, pingpong
from triton_gemm.tolerances import assert_close

SMS = 132
BM, BN, BK = pingpong.TILE[:3]


def _batch(batch, m, n, k, layout, dtype=torch.float16, empty=False):
    """(batch, M, K) A and (batch, K, N) B in the nn, nt, tn or tt layout (t: the operand
    the transpose of a row-major tensor): N(0, 1) on the suite's device, or with empty
    meta-free empty CPU tensors (plans read no data)."""
    if empty:
        def make(*shape):
            return torch.empty(*shape, dtype=dtype)
    else:
        def make(*shape):
            return randn(*shape, dtype=dtype)
    a = make(batch, k, m).mT if layout[0] == "t" else make(batch, m, k)
    b = make(batch, n, k).mT if layout[1] == "t" else make(batch, k, n)
    return a, b


def _plan(batch, m, n, k, layout, dtype=torch.float16, precision="half", dram_gbps=None):
    return dispatch.plan(*_batch(batch, m, n, k, layout, dtype, empty=True), precision, SMS,
                         dram_gbps=dram_gbps)


@pytest.mark.parametrize("case", [(1, 4096, 4096, 1024, "nt"), (1, 8192, 4096, 512, "nn"),
                                  (1, 4096, 8192, 1024, "tn"), (16, 1024, 1024, 512, "nn"),
                                  (32, 1024, 1024, 1024, "nt"), (64, 512, 512, 512, "tt"),
                                  (8, 2048, 2048, 1024, "nn"), (1, 8192, 8192, 128, "nt"),
                                  (1, 4096, 4096, 256, "nn"), (8, 2048, 2048, 256, "nn"),
                                  (1, 2048, 2048, 512, "nn")])
def test_short_k_16_bit_products_with_many_tiles_plan_the_ping_pong_kernel(case):
    """The measured window (dispatch.PINGPONG): K 128..1024 (batches 256..1024), 1.9
    128x128 tiles an SM and more (2048^2: 256 on 132 SMs), rows on 128 bytes; batches
    keep the batched kernel behind it (for an epilogue), single products the persistent
    kernel."""
    p = _plan(*case)
    assert p.pingpong, p
    assert p.batched == (case[0] > 1) and p.persistent == (case[0] == 1), p
    assert not p.copies, p


@pytest.mark.parametrize("case,why", [
    ((1, 4096, 4096, 2048, "nt"), "K past PINGPONG_MAX_K"),
    ((8, 2048, 2048, 2048, "nn"), "K past PINGPONG_MAX_K"),
    ((32, 2048, 2048, 128, "nt"), "K under PINGPONG_BATCHED_MIN_K"),
    ((1, 8192, 8192, 64, "nt"), "K under PINGPONG_MIN_K"),
    ((1, 1536, 2048, 1024, "nt"), "192 tiles, 1.45 an SM"),
    ((32, 1000, 1000, 1000, "nn"), "rows of 2000 bytes"),
    ((32, 1024, 1024, 1000, "nn"), "A's rows of 2000 bytes"),
    ((8, 1000, 1024, 1024, "tn"), "A M-major, its rows of 2000 bytes"),
])
def test_products_outside_the_window_keep_their_plans(case, why):
    assert not _plan(*case).pingpong, why


def test_batches_over_k_128_take_it_on_fast_memory_only():
    """PINGPONG_FAST_MEMORY_BATCHED_MIN_K: batches over K = 128 plan it from
    FAST_MEMORY_GBPS of DRAM bandwidth (the lent H200 reads 4814) and not below
    it (an H100's 3352, or unknown); single products over K = 128 do not depend on it."""
    fast, slow = 4814.0, 3352.0
    for dtype, precision in ((torch.float16, "half"), (torch.float32, "tf32")):
        for case in ((32, 2048, 2048, 128, "nt"), (8, 4096, 4096, 128, "nt")):
            assert _plan(*case, dtype, precision, fast).pingpong, (case, precision)
            assert not _plan(*case, dtype, precision, slow).pingpong, (case, precision)
            assert not _plan(*case, dtype, precision).pingpong, (case, precision)
    for gbps in (fast, slow, None):
        assert _plan(1, 8192, 8192, 128, "nt", dram_gbps=gbps).pingpong


@pytest.mark.parametrize("case,dtype,precision,taken", [
    ((1, 8192, 8192, 64, "nt"), torch.float16, "half", True),  # C 128 MB, 31 tiles an SM
    ((1, 4096, 4096, 64, "nn"), torch.float16, "half", True),  # 7.8 tiles an SM
    ((1, 8192, 8192, 64, "tn"), torch.bfloat16, "half", True),
    ((16, 1024, 1024, 64, "tt"), torch.float16, "half", True),
    ((4, 4096, 4096, 64, "nt"), torch.float16, "half", True),  # C of exactly 128 MB
    ((1, 4096, 4096, 64, "nt"), torch.float32, "tf32", True),  # C 64 MB at fp32
    ((1, 8192, 8200, 64, "nt"), torch.float16, "half", False),  # C past 128 MB
    ((32, 2048, 2048, 64, "nt"), torch.float16, "half", False),  # 256 MB
    ((1, 8192, 8192, 64, "nt"), torch.float32, "tf32", False),  # 256 MB at fp32
    ((1, 2048, 2048, 64, "nt"), torch.float16, "half", False),  # 1.9 tiles an SM
    ((64, 512, 384, 64, "nt"), torch.float16, "half", False),  # 5.8
    ((1, 3840, 3968, 64, "nt"), torch.float16, "half", True),  # 930 tiles: 7 * 132 = 924
    ((1, 3840, 3840, 64, "nt"), torch.float16, "half", False),  # 900
    ((1, 8192, 8192, 32, "nt"), torch.float16, "half", False),  # K under 64 (A's rows 64
])                                                              # bytes too)
def test_k_64_takes_it_on_fast_memory_within_its_limits(case, dtype, precision, taken):
    """PINGPONG_FAST_MEMORY_MIN_K: on fast memory K = 64 plans it where C has
    PINGPONG_SHORT_K_MIN_TILES_PER_SM tiles an SM and at most PINGPONG_SHORT_K_MAX_C_BYTES;
    on slow or unknown memory never."""
    assert _plan(*case, dtype, precision, 4814.0).pingpong == taken, case
    assert not _plan(*case, dtype, precision, 3352.0).pingpong, case
    assert not _plan(*case, dtype, precision).pingpong, case


@pytest.mark.parametrize("case,dtype,precision,taken", [
    ((16, 2048, 384, 2048, "nn"), torch.float16, "half", True),  # 128-column tiles: 384
    ((16, 2048, 640, 2048, "nn"), torch.bfloat16, "half", True),  # 640
    ((8, 2048, 384, 4096, "nt"), torch.float16, "half", True),  # 384 tiles, 2.9 an SM
    ((16, 2048, 384, 4160, "nn"), torch.float16, "half", False),  # K past 4096
    ((8, 2048, 2048, 2048, "nn"), torch.float16, "half", False),  # the 256-wide tile
    ((1, 8192, 384, 2048, "nn"), torch.float16, "half", False),  # a single product
    ((4, 1024, 384, 2048, "nn"), torch.float16, "half", False),  # 96 tiles
    ((16, 2048, 384, 2048, "nt"), torch.float32, "tf32", False),  # 16-bit only
])
def test_batches_past_k_1024_on_128_column_tiles_take_it_on_fast_memory(case, dtype,
                                                                        precision, taken):
    """PINGPONG_FAST_MEMORY_NARROW_BATCHED_MAX_K: on fast memory, 16-bit batches over K
    1025..4096 whose N the batched kernel would cover with 128-column tiles plan it (with
    1.9 tiles an SM); on slow or unknown memory none do."""
    assert _plan(*case, dtype, precision, 4814.0).pingpong == taken, case
    assert not _plan(*case, dtype, precision, 3352.0).pingpong, case
    assert not _plan(*case, dtype, precision).pingpong, case


def test_tf32_plans_it_only_for_k_major_operands(monkeypatch):
    """tf32 nt (both operands K-major as given) takes it, single and batched; nn and tt
    (one operand MN-major: the register-fed kernel) and tn (both copied) do not, nor do
    tf32x3 and ieee; nor anything with the switch off."""
    for batch, m in ((1, 4096), (16, 1024)):
        p = _plan(batch, m, m, 1024, "nt", torch.float32, "tf32")
        assert p.pingpong and not p.copies, p
        for layout in ("nn", "tt", "tn"):
            p = _plan(batch, m, m, 1024, layout, torch.float32, "tf32")
            assert not p.pingpong, (batch, layout, p)
    for precision in ("tf32x3", "ieee"):
        p = _plan(1, 4096, 4096, 1024, "nt", torch.float32, precision)
        assert not p.pingpong, (precision, p)
    monkeypatch.setattr(dispatch, "PINGPONG", False)
    assert not _plan(16, 1024, 1024, 512, "nn").pingpong
    assert not _plan(1, 4096, 4096, 1024, "nt").pingpong


def test_rows_aligned_looks_at_every_stride_but_the_unit_one():
    assert pingpong.rows_aligned(torch.empty(4, 128, 64, dtype=torch.float16))
    assert pingpong.rows_aligned(torch.empty(4, 64, 128, dtype=torch.float16).mT)
    assert not pingpong.rows_aligned(torch.empty(4, 128, 1000, dtype=torch.float16))
    assert not pingpong.rows_aligned(torch.empty(4, 128, 1000, dtype=torch.float16).mT)
    # A batch of one: its stride does not matter; a batch stride off 128 bytes does.
    assert pingpong.rows_aligned(torch.empty(1, 100, 64, dtype=torch.float16))
    flat = torch.empty(20000, dtype=torch.float16)
    assert not pingpong.rows_aligned(flat.as_strided((4, 64, 64), (4100, 64, 1)))


def test_bias_rows_are_broadcast_rows_within_int32_offsets():
    assert pingpong.bias_rows(None)
    assert pingpong.bias_rows(torch.empty(64, dtype=torch.float16).expand(128, 64))
    assert pingpong.bias_rows(torch.empty(4, 1, 64, dtype=torch.float16).expand(4, 128, 64))
    assert not pingpong.bias_rows(torch.empty(128, 64, dtype=torch.float16))
    # A row of a storage past 2^31 elements (not touched: only its size is read).
    huge = torch.empty(2**31 + 8, dtype=torch.int8)
    assert not pingpong.bias_rows(huge[-64:].expand(128, 64))


def test_supports_refuses_cpu_operands_and_matrix_vector():
    a, b = _batch(2, 128, 128, 128, "nn", empty=True)
    assert not pingpong.supports(a, b, torch.empty(2, 128, 128, dtype=torch.float16))
    assert not pingpong.supports(a[0], b[0, :, 0], torch.empty(128, dtype=torch.float16))


def test_config_names_say_ping_pong_and_batch():
    import triton
    single = triton.Config({"PINGPONG": True, "BM": 128, "BN": 128, "BK": 64,
                            "PRODUCTS": False}, num_warps=8, num_stages=5)
    batch = triton.Config({**single.kwargs, "PRODUCTS": True}, num_warps=8, num_stages=5)
    assert configs.config_name(single, "half") == "pp_128x128x64"
    assert configs.config_name(batch, "half") == "ppb_128x128x64"


_COMPILE = """
import json, sys
sys.path.insert(0, '.')
from perf import sass_audit
print(json.dumps([sass_audit.pingpong_report(a_t, b_t, dtype, batched, None, has_d, act)
                  for a_t, b_t, dtype, batched, has_d, act in json.loads(sys.argv[1])]))
"""


def test_the_kernel_compiles_for_every_layout_without_spills():
    """Offline for sm_90a (a subprocess: triton.compile needs the interpreter off): every
    operand layout, single and batched, issues 64x128 fp16 / bf16 HGMMA (not HMMA), with no
    spills and no ptxas warning under the register cap, its ring and both warpgroups'
    epilogue buffers inside the H100's shared memory, and the wgmma warpgroups at 240
    registers, the TMA warp at 24 (setmaxnreg); so too with a bias row and an activation
    in the epilogue."""
    from perf import sass_audit
    cases = [(False, True, "fp16", False, False, 0), (False, False, "fp16", True, True, 3),
             (True, False, "bf16", False, True, 2), (True, True, "fp16", True, False, 4),
             (False, True, "fp32", True, True, 1)]
    for case, report in zip(cases, offline_build(_COMPILE, *cases)):
        dtype = case[2]
        expected = {"fp16": "HGMMA.64x128x16.F32", "bf16": "HGMMA.64x128x16.F32.BF16",
                    "fp32": "HGMMA.64x128x8.F32.TF32"}[dtype]
        assert report["mma"] == expected, (case, report)
        assert report["spill_stores"] == 0 and report["spill_loads"] == 0, (case, report)
        assert report["warnings"] == "", (case, report)
        assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, (case, report)
        assert {"240", "24"} <= set(report["setmaxnreg"]), (case, report)


@requires_kernels
def test_a_ping_pong_plan_it_cannot_take_runs_the_rest_of_the_plan():
    """A D that is not rows of one row (a matrix per product), and in the interpreter (no
    Gluon) anything: the rest of the plan (here the plain kernel) computes the product."""
    batch, m, n, k = (4, 256, 256, 512) if DEVICE == "cuda" else (2, 32, 48, 64)
    a, b = _batch(batch, m, n, k, "nn")
    d = randn(batch, m, n, dtype=torch.float16)
    force = dispatch.Plan(False, False, False, pingpong=True)
    out = torch.full((batch, m, n), float("nan"), device=a.device, dtype=torch.float16)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision="half", force=force)
    assert not last_config().startswith("pp")
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, torch.float16, None, "ping-pong plan, matrix D", operands=(a[0], b[0]))


def _hopper() -> bool:
    return DEVICE == "cuda" and pingpong.supports(*(randn(64, 64, dtype=torch.float16),) * 3)


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("batch,m,n,k", [(1, 304, 272, 1000), (1, 128, 640, 64),
                                         (1, 2048, 2048, 1024), (3, 304, 272, 1000),
                                         (32, 1024, 1024, 512), (5, 136, 1000, 40)])
def test_the_kernel_computes_each_product(dtype, layout, batch, m, n, k):
    """pingpong.matmul on fresh N(0, 1) operands, NaN-poisoned output: tiles ragged at
    every edge (TMA reads zeros past them, clips the stores; in a batch inside each
    product), K past the last 64-deep step, one K step, a program with one tile (its
    second warpgroup idle) and with many (32 x 1024^2: 2048 tiles, both warpgroups taking
    turns), every operand layout."""
    if not _hopper():
        pytest.skip("kernels/pingpong.py needs Hopper (sm_90)")
    a, b = _batch(batch, m, n, k, layout, dtype)
    if batch == 1:
        a, b = a[0], b[0]
    out = torch.full((*a.shape[:-2], m, n), float("nan"), device=DEVICE, dtype=dtype)
    assert pingpong.supports(a, b, out)
    pingpong.matmul(a, b, out, torch.cuda.get_device_properties(0).multi_processor_count)
    assert last_config() == f"pp{'b' if batch > 1 else ''}_{BM}x{BN}x{BK}"
    assert_close(out, a.double() @ b.double(), dtype, None, f"{layout} {batch} x {m}x{n}x{k}",
                 operands=(a, b) if batch == 1 else (a[0], b[0]))


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_the_api_runs_planned_products_on_it_and_the_rest_elsewhere(dtype):
    """bmm, 4-D matmul, linear (nt) and baddbmm with a bias in the window run here, a
    replay through the launch cache too; baddbmm with a matrix, a broadcast batch and rows
    off 128 bytes run the rest of the plan; all match float64."""
    from triton_gemm import launch_cache
    if not _hopper():
        pytest.skip("kernels/pingpong.py needs Hopper (sm_90)")
    name = f"ppb_{BM}x{BN}x{BK}"
    replayed = launch_cache.stats["replayed"]
    for _ in range(2):  # the second call of the signature: a replay
        a, b = _batch(16, 1024, 1024, 512, "nn", dtype)
        out = triton_gemm.bmm(a, b)
        assert last_config() == name
        assert_close(out, a.double() @ b.double(), dtype, None, "bmm", operands=(a[0], b[0]))
    if launch_cache.ENABLED:
        assert launch_cache.stats["replayed"] > replayed
    y = triton_gemm.matmul(a.reshape(4, 4, 1024, 512), b.reshape(4, 4, 512, 1024))
    assert last_config() == name
    assert_close(y.reshape(16, 1024, 1024), a.double() @ b.double(), dtype, None, "4-D matmul",
                 operands=(a[0], b[0]))
    x, w = randn(4096, 1024, dtype=dtype), randn(4096, 1024, dtype=dtype)
    y = triton_gemm.linear(x, w)
    assert last_config() == f"pp_{BM}x{BN}x{BK}"
    assert_close(y, x.double() @ w.double().T, dtype, None, "linear", operands=(x, w.T))
    bias = randn(1024, dtype=dtype)
    out = triton_gemm.baddbmm(bias, a, b, alpha=0.5)
    assert last_config() == name
    assert_close(out, bias.double() + 0.5 * (a.double() @ b.double()), dtype, None,
                 "baddbmm, bias", operands=(a[0], b[0]))
    mask = randn(1024, 1024, dtype=dtype)
    out = triton_gemm.baddbmm(mask, a, b)
    assert not last_config().startswith("pp")
    assert_close(out, mask.double() + a.double() @ b.double(), dtype, None, "baddbmm, mask",
                 operands=(a[0], b[0]))
    shared = b[:1].expand(16, *b.shape[1:])
    out = triton_gemm.bmm(a, shared)
    assert not last_config().startswith("pp")
    assert_close(out, a.double() @ shared.double(), dtype, None, "broadcast B",
                 operands=(a[0], b[0]))
    a, b = _batch(8, 1000, 1024, 1000, "nn", dtype)
    out = triton_gemm.bmm(a, b)
    assert not last_config().startswith("pp")
    assert_close(out, a.double() @ b.double(), dtype, None, "rows of 2000 bytes",
                 operands=(a[0], b[0]))


@gpu_only
@pytest.mark.parametrize("activation", [None, *TORCH_ACTIVATIONS])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_the_epilogue_takes_bias_rows_alpha_beta_and_activations(dtype, activation):
    """linear with a bias and each activation (fused), addmm with alpha and beta, baddbmm
    with a row per product (ALiBi's shape) and an fp32 bias: here, against float64 on
    NaN-poisoned outputs (through the API, which writes into fresh outputs; the kernel's
    own poisoned output below)."""
    from triton_gemm.kernels.epilogue import ACTIVATIONS
    if not _hopper():
        pytest.skip("kernels/pingpong.py needs Hopper (sm_90)")
    act = TORCH_ACTIVATIONS.get(activation, lambda x: x)
    x, w, bias = (randn(4096, 1024, dtype=dtype), randn(4096, 1024, dtype=dtype),
                  randn(4096, dtype=dtype))
    y = triton_gemm.linear(x, w, bias, activation=activation)
    assert last_config() == f"pp_{BM}x{BN}x{BK}"
    assert_close(y, act(x.double() @ w.double().T + bias.double()), dtype, None,
                 f"linear, {activation}", operands=(x, w.T))
    if activation is not None:
        return
    y = triton_gemm.addmm(bias, x, w.T, alpha=0.5, beta=-2.0)
    assert last_config() == f"pp_{BM}x{BN}x{BK}"
    assert_close(y, 0.5 * (x.double() @ w.double().T) - 2.0 * bias.double(), dtype, None,
                 "addmm", operands=(x, w.T))
    a, b = _batch(8, 2048, 1024, 1024, "nt", dtype)
    rows = randn(8, 1, 1024, dtype=dtype)
    y = triton_gemm.baddbmm(rows, a, b, alpha=0.125)
    assert last_config() == f"ppb_{BM}x{BN}x{BK}"
    assert_close(y, rows.double() + 0.125 * (a.double() @ b.double()), dtype, None,
                 "baddbmm, a row per product", operands=(a[0], b[0]))
    out = torch.full((8, 2048, 1024), float("nan"), device=DEVICE, dtype=dtype)
    bias32 = randn(1024)
    pingpong.matmul(a, b, out, torch.cuda.get_device_properties(0).multi_processor_count,
                    d=bias32.expand(out.shape), beta=1.0, activation=ACTIVATIONS["silu"])
    assert_close(out, torch.nn.functional.silu(a.double() @ b.double() + bias32.double()),
                 dtype, None, "fp32 bias, silu", operands=(a[0], b[0]))


@gpu_only
@pytest.mark.parametrize("batch,m,n,k", [(1, 304, 272, 1000), (1, 2048, 2048, 1024),
                                         (3, 304, 272, 1000), (32, 1024, 1024, 512),
                                         (5, 136, 1000, 40)])
def test_tf32_nt_products(batch, m, n, k):
    """fp32 operands at tf32, both K-major (nt; other layouts refused: wgmma reads 32-bit
    operands K-major only): ragged tiles, K past the last 32-deep step, single and batched,
    NaN-poisoned output; through the API too (linear, bmm of a transposed B)."""
    if not _hopper():
        pytest.skip("kernels/pingpong.py needs Hopper (sm_90)")
    a, b = _batch(batch, m, n, k, "nt", torch.float32)
    if batch == 1:
        a, b = a[0], b[0]
    out = torch.full((*a.shape[:-2], m, n), float("nan"), device=DEVICE)
    assert pingpong.supports(a, b, out)
    assert not pingpong.supports(a, b.contiguous(), out)  # nn
    assert not pingpong.supports(a.mT.contiguous().mT, b, out)  # tn
    pingpong.matmul(a, b, out, torch.cuda.get_device_properties(0).multi_processor_count)
    assert last_config() == f"pp{'b' if batch > 1 else ''}_128x128x32"
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32",
                 f"tf32 nt {batch} x {m}x{n}x{k}", operands=(a, b) if batch == 1 else (a[0], b[0]))


@gpu_only
def test_the_api_runs_tf32_nt_products_in_the_window_here():
    if not _hopper():
        pytest.skip("kernels/pingpong.py needs Hopper (sm_90)")
    x, w, bias = randn(4096, 1024), randn(4096, 1024), randn(4096)
    y = triton_gemm.linear(x, w, bias, precision="tf32")
    assert last_config() == "pp_128x128x32"
    assert_close(y, x.double() @ w.double().T + bias.double(), torch.float32, "tf32",
                 "tf32 linear", operands=(x, w.T))
    a, b = _batch(16, 1024, 1024, 512, "nt", torch.float32)
    y = triton_gemm.bmm(a, b, precision="tf32")
    assert last_config() == "ppb_128x128x32"
    assert_close(y, a.double() @ b.double(), torch.float32, "tf32", "tf32 bmm nt",
                 operands=(a[0], b[0]))
    y = triton_gemm.bmm(a, b, precision="tf32x3")
    assert not last_config().startswith("pp")


@gpu_only
@pytest.mark.parametrize("dtype,precision", [(torch.float16, None), (torch.bfloat16, None),
                                             (torch.float32, "tf32")],
                         ids=["fp16", "bf16", "tf32"])
def test_the_api_runs_the_window_down_to_its_short_ends(dtype, precision):
    """The lower ends of the window (PINGPONG_MIN_K single, PINGPONG_BATCHED_MIN_K batched)
    through the API: mm over K = 128 (two 64-deep steps at 16 bits, four at tf32) on 288
    tiles, bmm over K = 256 here (512 tiles), a batch over K = 128 elsewhere; all against
    float64 (a batch over K = 128 takes it on fast memory: FAST_MEMORY_GBPS, and so do
    linear and bmm over K = 64 and a 16-bit batch of 384 columns over K = 2048)."""
    if not _hopper():
        pytest.skip("kernels/pingpong.py needs Hopper (sm_90)")
    bk = pingpong.tile_for(dtype)[2]
    k = dispatch.PINGPONG_MIN_K
    x, w = randn(2048, k, dtype=dtype), randn(2304, k, dtype=dtype)
    y = triton_gemm.linear(x, w, precision=precision)
    assert last_config() == f"pp_128x128x{bk}"
    assert_close(y, x.double() @ w.double().T, dtype, precision, "linear, K = 128",
                 operands=(x, w.T))
    a, b = _batch(8, 1024, 1024, dispatch.PINGPONG_BATCHED_MIN_K, "nt", dtype)
    y = triton_gemm.bmm(a, b, precision=precision)
    assert last_config() == f"ppb_128x128x{bk}"
    assert_close(y, a.double() @ b.double(), dtype, precision, "bmm, K = 256",
                 operands=(a[0], b[0]))
    a, b = _batch(8, 1024, 1024, 128, "nt", dtype)
    y = triton_gemm.bmm(a, b, precision=precision)
    fast = persistent.dram_gbps(a.device) >= dispatch.FAST_MEMORY_GBPS
    assert last_config().startswith("pp") == fast, (last_config(), fast)
    assert_close(y, a.double() @ b.double(), dtype, precision, "bmm, K = 128",
                 operands=(a[0], b[0]))
    # K = 64, one K step, on fast memory (PINGPONG_FAST_MEMORY_MIN_K): 1024 tiles each.
    k = dispatch.PINGPONG_FAST_MEMORY_MIN_K
    x, w = randn(4096, k, dtype=dtype), randn(4096, k, dtype=dtype)
    y = triton_gemm.linear(x, w, precision=precision)
    assert last_config().startswith("pp") == fast, (last_config(), fast)
    assert_close(y, x.double() @ w.double().T, dtype, precision, "linear, K = 64",
                 operands=(x, w.T))
    a, b = _batch(16, 1024, 1024, k, "nt", dtype)
    y = triton_gemm.bmm(a, b, precision=precision)
    assert last_config().startswith("pp") == fast, (last_config(), fast)
    assert_close(y, a.double() @ b.double(), dtype, precision, "bmm, K = 64",
                 operands=(a[0], b[0]))
    # Past K = 1024, 16-bit batches of 384 columns on fast memory
    # (PINGPONG_FAST_MEMORY_NARROW_BATCHED_MAX_K).
    a, b = _batch(16, 1024, 384, 2048, "nn", dtype)
    y = triton_gemm.bmm(a, b, precision=precision)
    assert last_config().startswith("pp") == (fast and dtype != torch.float32), last_config()
    assert_close(y, a.double() @ b.double(), dtype, precision, "bmm, K = 2048",
                 operands=(a[0], b[0]))
