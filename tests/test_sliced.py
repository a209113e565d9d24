"""kernels/sliced.py: 16-bit, tf32 and 3xTF32 products in K slices of 128x128 TMA tiles,
summed by splitk.reduce. The kernel in every operand layout with an epilogue (the
interpreter on a small tile, the GPU on the module's), its sm_90a build (offline), the
slice rule and its thresholds, which plans dispatch makes for it, the library's calls that
run there (GPU), and the probe's tile setting."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import (INTERPRETED, gpu_only, offline_build, randn, requires_kernels,
                      single_plan, stored)
import triton_gemm
from triton_gemm import dispatch, last_config
from triton_gemm.kernels import sliced
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_COMPILE = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from perf import sass_audit
from triton_gemm.kernels import sliced as s
dtype, a_m_major, b_k_major = json.loads(sys.argv[1])
bk = s.BK // 2 if dtype == "fp32" else s.BK
a_box = [bk, s.BM] if a_m_major else [s.BM, bk]
b_box = [s.BN, bk] if b_k_major else [bk, s.BN]
sig = {"a_desc": f"tensordesc<{dtype}{a_box}>", "b_desc": f"tensordesc<{dtype}{b_box}>",
       "part_ptr": "*fp32", "M": "i32", "N": "i32", "K_SLICE_STEPS": "i32"}
precision = "tf32x3" if dtype == "fp32" else "tf32"
const = {"PRECISION": precision, "A_M_MAJOR": a_m_major, "B_K_MAJOR": b_k_major,
         "UPCAST": False, "BM": s.BM, "BN": s.BN, "BK": bk, "GROUP_M": s.GROUP_M,
         "FLUSH_STEPS": s.FLUSH_K // bk if precision == "tf32x3" else 0, "DEPENDENT": True}
warps = s.WARPS_3XTF32 if precision == "tf32x3" else s.WARPS
kernel = sass_audit._compile(s._sliced_kernel, sig, const, ["part_ptr", "M", "N"], warps,
                             s.STAGES)
with tempfile.TemporaryDirectory() as tmp:
    mma = sass_audit.mma_instructions(kernel.asm["cubin"], Path(tmp))
    report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a")
print(json.dumps({"shared": kernel.metadata.shared, "mma": mma, **report}))
"""


_BUILDS = ([(dtype, a_m_major, b_k_major) for dtype in ("fp16", "bf16")
            for a_m_major in (False, True) for b_k_major in (False, True)]
           + [("fp32", False, True)])  # 3xTF32: the costlier of fp32's two


@pytest.mark.parametrize("dtype,a_m_major,b_k_major", _BUILDS,
                         ids=[f"{d}-{'a_col' if am else 'a_row'}-{'b_col' if bk else 'b_row'}"
                              for d, am, bk in _BUILDS])
def test_the_kernel_compiles_to_wgmma_without_spills(dtype, a_m_major, b_k_major):
    """Offline for sm_90a (a subprocess: triton.compile needs the interpreter off), every
    16-bit operand layout and fp32 K-major ones in 3xTF32: HGMMA (wgmma, not HMMA), no
    spills, the ring within the H100's shared memory."""
    report = offline_build(_COMPILE, *[dtype, a_m_major, b_k_major])
    assert "HGMMA" in report["mma"] and "HMMA" not in report["mma"].replace("HGMMA", ""), report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, report


@pytest.fixture
def tile(monkeypatch):
    """(BM, BN, BK) the kernel runs: under the interpreter a 32x32x16 tile, slices of 48 or
    more and 3xTF32 flushed every two K steps (its logic at a size the interpreter runs in
    seconds), else the module's."""
    if INTERPRETED:
        for name, value in (("BM", 32), ("BN", 32), ("BK", 16), ("MIN_SLICE_K", 48),
                            ("FLUSH_K", 16)):
            monkeypatch.setattr(sliced, name, value)
    return sliced.BM, sliced.BN, sliced.BK



@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("a_m_major", [False, True], ids=["a_row", "a_col"])
@pytest.mark.parametrize("b_k_major", [False, True], ids=["b_row", "b_col"])
@pytest.mark.parametrize("split", [1, 2, 3])
def test_sliced_product_in_every_layout(tile, dtype, a_m_major, b_k_major, split):
    """act(alpha * A B + beta * bias) on a NaN-poisoned out: rows and columns past whole
    tiles, K in `split` slices (a wave of that many per tile), its last K step partial."""
    bm, bn, bk = tile
    m, n = 2 * bm + 8, bn + 24  # 3 x 2 tiles
    k = split * sliced.MIN_SLICE_K + bk // 2 + 8
    sms = 6 * split
    assert sliced.slices(m, n, k, sms) == split
    a = stored(randn(m, k, dtype=dtype), a_m_major)
    b = stored(randn(k, n, dtype=dtype), b_k_major)
    bias = randn(n, dtype=dtype)
    assert sliced.supports(a, b, a.new_empty(m, n))
    ref = torch.relu(0.5 * (a.double() @ b.double()) + 2.0 * bias.double())
    for call in range(2):  # the second on the cached compiled kernel
        out = torch.full((m, n), float("nan"), dtype=dtype, device=a.device)
        sliced.matmul_2d(a, b, out, bias, alpha=0.5, beta=2.0, activation=1, sms=sms)
        assert last_config() == f"ks_{bm}x{bn}x{bk}_s{split}"
        assert_close(out, ref, dtype, what=f"sliced {m}x{n}x{k} in {split}, call {call}",
                     operands=(a, b))


@requires_kernels
@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
@pytest.mark.parametrize("split", [1, 2])
def test_sliced_fp32_product_on_k_major_operands(tile, precision, split):
    """fp32 operands (A row-major, B K-major, as wgmma reads them) at tf32 and 3xTF32: K
    steps of BK / 2, alpha * A B + beta * D (a matrix D) on a NaN-poisoned out."""
    bm, bn, bk = tile
    m, n = 2 * bm + 8, bn + 24
    k = split * sliced.MIN_SLICE_K + bk // 4 + 4
    a, b = randn(m, k), stored(randn(k, n), True)
    d = randn(m, n)
    assert sliced.supports(a, b, d, precision) and not sliced.supports(a, b, d, "ieee")
    assert not sliced.supports(stored(a, True), b, d, precision)  # an M-major A
    out = torch.full((m, n), float("nan"), device=a.device)
    sliced.matmul_2d(a, b, out, d, alpha=1.5, beta=-1.0, precision=precision, sms=6 * split)
    assert last_config() == f"ks_{bm}x{bn}x{bk // 2}_s{split}"
    assert_close(out, 1.5 * (a.double() @ b.double()) - d.double(), torch.float32, precision,
                 what=f"sliced {precision} {m}x{n}x{k}", operands=(a, b))


def test_slices_fill_one_wave_no_shallower_than_min_slice_k():
    """One wave of 132 SMs of 128x128 tiles and K slices, none shallower than MIN_SLICE_K."""
    assert sliced.slices(1024, 1024, 8192, 132) == 2  # 64 tiles
    assert sliced.slices(768, 768, 4096, 132) == 3  # 36 tiles, slices of 1365
    assert sliced.slices(768, 768, 2 * sliced.MIN_SLICE_K, 132) == 2
    assert sliced.slices(1024, 1024, 2048, 132) == 1  # slices of 1024: too shallow
    assert sliced.slices(1536, 1536, 8192, 132) == 1  # 144 tiles: more than a wave
    assert sliced.slices(128, 128, 65536, 132) == 51
    assert sliced.slices(0, 1024, 8192, 132) == sliced.slices(1024, 0, 8192, 132) == 1


def test_sliced_refuses_what_it_cannot_read():
    """fp32 operands, mixed dtypes and rows off 16 bytes stay off the kernel."""
    a = torch.empty(64, 64, dtype=torch.float16)
    assert not sliced.supports(a.float(), a.float(), a.float())
    assert not sliced.supports(a, a.bfloat16(), a)
    odd = torch.empty(64, 65, dtype=torch.float16)[:, :63]  # rows of 130 bytes
    assert not sliced.supports(odd, torch.empty(63, 64, dtype=torch.float16), a)
    assert not sliced.supports(a[:, ::2], a[::2], a[:, :32])  # no unit stride



def test_16_bit_products_of_few_tiles_over_a_long_k_plan_the_sliced_kernel(monkeypatch):
    """Fewer 128x128 tiles than SMs, not mid-M, two or more slices in a wave: SLICED_PLAN;
    shallower K, a wave of tiles, mid-M weights, split-K sizes and batches keep theirs."""
    for m, n, k, b_k_major in ((1024, 1024, 8192, False), (1024, 1024, 8192, True),
                               (768, 768, 4096, False), (4096, 256, 8192, False)):
        assert single_plan(m, n, k, b_k_major=b_k_major) == dispatch.SLICED_PLAN, (m, n, k)
    assert single_plan(1024, 1024, 8192, torch.bfloat16) == dispatch.SLICED_PLAN
    assert not single_plan(1024, 1024, 2048).sliced
    assert single_plan(1536, 1536, 4096).persistent  # 144 tiles
    assert single_plan(128, 4096, 11008, b_k_major=True).persistent  # mid-M weight
    assert single_plan(256, 256, 32768).split_k
    assert not single_plan(1024, 1024, 8192, batch=2).sliced
    monkeypatch.setattr(dispatch, "SLICED", False)
    assert not single_plan(1024, 1024, 8192).sliced


# At the rule's edges on 132 SMs: 66 tiles of 128x128 and K of two MIN_SLICE_K (two slices);
# 72 tiles (a wave holds one slice each) and K one short of two slices.
THRESHOLDS = [((768, 1408, 2 * sliced.MIN_SLICE_K), 2), ((768, 1536, 2 * sliced.MIN_SLICE_K), 1),
              ((768, 1408, 2 * sliced.MIN_SLICE_K - 1), 1)]


def test_the_rule_at_its_thresholds():
    for (m, n, k), split in THRESHOLDS:
        assert sliced.slices(m, n, k, 132) == split
        assert single_plan(m, n, k).sliced == (split > 1), (m, n, k)


def test_fp32_tensor_core_products_of_few_tiles_plan_k_major_operands_sliced():
    """tf32 and 3xTF32: sliced on K-major operands, a row-major B copied K-major (the
    plan's b_k_major); fp32 FMA (ieee) never."""
    for precision in ("tf32", "tf32x3"):
        nn = single_plan(1024, 1024, 8192, torch.float32, precision=precision)
        assert nn.sliced and nn.b_k_major and not nn.a_k_major, (precision, nn)
        nt = single_plan(768, 768, 4096, torch.float32, b_k_major=True, precision=precision)
        assert nt == dispatch.SLICED_PLAN, (precision, nt)
    assert not single_plan(1024, 1024, 8192, torch.float32, precision="ieee").sliced


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_library_calls_of_few_tiles_over_a_long_k_run_sliced(dtype):
    """matmul, linear (bias and activation) and addmm (out=) of mid-size products take the
    sliced kernel on Hopper and match float64; NaN-poisoned outputs."""
    if not sliced.hopper(torch.device("cuda")):
        pytest.skip("kernels/sliced.py needs Hopper (sm_90)")
    a, b = randn(1024, 8192, dtype=dtype), randn(8192, 1024, dtype=dtype)
    out = triton_gemm.matmul(a, b)
    assert last_config().startswith("ks_"), last_config()
    assert_close(out, a.double() @ b.double(), dtype, what="matmul", operands=(a, b))
    x, w = randn(768, 4096, dtype=dtype), randn(768, 4096, dtype=dtype)
    bias = randn(768, dtype=dtype)
    y = triton_gemm.linear(x, w, bias, activation="gelu")
    assert last_config() == "ks_128x128x64_s3", last_config()
    ref = F.gelu(x.double() @ w.double().T + bias.double())
    assert_close(y, ref, dtype, what="linear", operands=(x, w.T))
    c = torch.full((4096, 256), float("nan"), dtype=dtype, device=a.device)  # an addmm
    d = randn(4096, 256, dtype=dtype)
    a2, b2 = randn(4096, 8192, dtype=dtype), randn(8192, 256, dtype=dtype)
    triton_gemm.addmm(d, a2, b2, beta=0.5, alpha=2.0, out=c)
    assert last_config().startswith("ks_"), last_config()
    assert_close(c, 2.0 * (a2.double() @ b2.double()) + 0.5 * d.double(), dtype,
                 what="addmm", operands=(a2, b2))


@gpu_only
@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_fp32_tensor_core_calls_of_few_tiles_run_sliced(precision):
    """matmul (a row-major B, copied K-major) and linear (a K-major weight, as given) at tf32
    and 3xTF32 take the sliced kernel on Hopper, within the precision's tolerance."""
    if not sliced.hopper(torch.device("cuda")):
        pytest.skip("kernels/sliced.py needs Hopper (sm_90)")
    a, b = randn(768, 4096), randn(4096, 768)
    out = triton_gemm.matmul(a, b, precision=precision)
    assert last_config() == "ks_128x128x32_s3", last_config()
    assert_close(out, a.double() @ b.double(), torch.float32, precision, what="matmul",
                 operands=(a, b))
    x, w, bias = randn(1024, 8192), randn(1024, 8192), randn(1024)
    y = triton_gemm.linear(x, w, bias, precision=precision)
    assert last_config() == "ks_128x128x32_s2", last_config()
    assert_close(y, x.double() @ w.double().T + bias.double(), torch.float32, precision,
                 what="linear", operands=(x, w.T))


@gpu_only
@pytest.mark.parametrize("shape,split", THRESHOLDS, ids=str)
def test_products_at_the_thresholds_are_right_on_either_side(shape, split):
    """fp16 at the rule's edges (THRESHOLDS): the sliced kernel in two slices, or the plain
    kernel, as the rule says on this GPU's SMs, within tolerance of float64."""
    if not sliced.hopper(torch.device("cuda")):
        pytest.skip("kernels/sliced.py needs Hopper (sm_90)")
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("THRESHOLDS are set for 132 SMs")
    m, n, k = shape
    a, b = randn(m, k, dtype=torch.float16), randn(k, n, dtype=torch.float16)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=a.device)
    triton_gemm.matmul(a, b, out=out)
    assert last_config().startswith("ks_") == (split > 1), last_config()
    assert_close(out, a.double() @ b.double(), torch.float16, what=f"{m}x{n}x{k}",
                 operands=(a, b))


@requires_kernels
def test_the_probe_runs_a_tile_in_its_slices_and_puts_the_constants_back():
    """perf/sliced_probe.py's run_tile: the tile, slice count and flush for its call only
    (the interpreter takes a small tile)."""
    from perf import sliced_probe
    names = ("BM", "BN", "BK", "WARPS", "WARPS_3XTF32", "STAGES", "MIN_SLICE_K", "FLUSH_K")
    before = [getattr(sliced, name) for name in names]
    a, b = randn(40, 104, dtype=torch.float16), randn(104, 48, dtype=torch.float16)
    out = torch.full((40, 48), float("nan"), dtype=torch.float16, device=a.device)
    sliced_probe.run_tile(a, b, out, "fp16", 32, 32, 16, 4, 2, 3, 0)
    assert last_config() == "ks_32x32x16_s3", last_config()
    assert_close(out, a.double() @ b.double(), torch.float16, what="probe", operands=(a, b))
    assert [getattr(sliced, name) for name in names] == before
