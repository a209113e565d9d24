"""kernels/wide.py: 16-bit products in 128x192 tiles (a 128- and a 64-column accumulator
side by side). The kernel in every operand layout with each epilogue and C store (the
interpreter and the GPU), its sm_90a build (offline: wgmma, no spills, none serialised),
dispatch's rule (WIDE_MIN_GAIN) and its plans, the library's calls that run there (GPU),
and the probe's kernel."""

import sys
from fractions import Fraction
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import (check_pointer_store_and_matrix_d, gpu_only, offline_build, randn,
                      requires_kernels, single_plan, stored)
import triton_gemm
from triton_gemm import configs, dispatch, last_config
from triton_gemm.kernels import wide
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
NAME = f"w_{wide.BM}x{wide.WIDTH}x{wide.BK}"



@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("a_m_major", [False, True], ids=["a_row", "a_col"])
@pytest.mark.parametrize("b_k_major", [False, True], ids=["b_row", "b_col"])
def test_wide_product_in_every_layout(dtype, a_m_major, b_k_major):
    """act(alpha * A B + beta * bias) on a NaN-poisoned out: two rows of tiles, the last
    column of tiles cut inside its 128-column part, K past whole steps, more tiles than
    programs (each walks two)."""
    m, n, k = wide.BM + 8, wide.WIDTH + 104, 2 * wide.BK + 32  # rows of 320 bytes: on sectors
    a = stored(randn(m, k, dtype=dtype), a_m_major)
    b = stored(randn(k, n, dtype=dtype), b_k_major)
    bias = randn(n, dtype=dtype)
    assert wide.supports(a, b, a.new_empty(m, n)) and wide.tiles(m, n) == 4
    ref = torch.relu(0.5 * (a.double() @ b.double()) + 2.0 * bias.double())
    for call in range(2):  # the second on the cached compiled kernel
        out = torch.full((m, n), float("nan"), dtype=dtype, device=a.device)
        wide.matmul_2d(a, b, out, bias, alpha=0.5, beta=2.0, activation=1, sms=2)
        assert last_config() == NAME, last_config()
        assert_close(out, ref, dtype, what=f"wide {m}x{n}x{k}, call {call}", operands=(a, b))


@requires_kernels
def test_wide_product_into_rows_tma_cannot_store_and_with_a_matrix_d():
    """An out whose rows are off 16 bytes (stored by pointers), the tile's right part inside
    N, a bias; out's column past N untouched. A matrix D: supports() leaves it to the
    persistent kernel (spills here), but the kernel computes it right."""
    check_pointer_store_and_matrix_d(wide, 72, 152, 64)


def test_wide_refuses_what_it_cannot_read():
    """fp32, mixed dtypes, rows off 16 bytes, and an A whose rows sit 16 bytes off a sector
    (read faster as planes on the persistent kernel) stay off the kernel."""
    a = torch.empty(64, 64, dtype=torch.float16)
    assert wide.supports(a, a, a) == wide.INTERPRETER
    assert not wide.supports(a.float(), a.float(), a.float())
    assert not wide.supports(a, a.bfloat16(), a)
    odd = torch.empty(64, 65, dtype=torch.float16)[:, :63]  # rows of 130 bytes
    assert not wide.supports(odd, torch.empty(63, 64, dtype=torch.float16), a)
    off_sector = torch.empty(1000, 1000, dtype=torch.float16)  # 2000-byte rows, as planes
    assert not wide.supports(off_sector, off_sector, off_sector)



def test_the_rule_at_the_measured_shapes():
    """132 SMs: the shapes of dispatch.WIDE_MIN_GAIN's probe, on the side the probe found."""
    assert configs.wave_fill(96, 132) == Fraction(96, 132)
    assert configs.wave_fill(144, 132) == Fraction(144, 264) and configs.wave_fill(0, 132) == 0
    for m, n in ((1536, 1536), (1664, 1536)):  # 96 / 104 tiles: one wave, 1.33x its best
        assert dispatch._wide_fills(m, n, 132), (m, n)
    for m, n in ((1536, 4608), (1024, 1536), (2048, 4096), (3072, 3072), (4096, 4096),
                 (8192, 8192), (2048, 11008)):
        assert not dispatch._wide_fills(m, n, 132), (m, n)
    # N off 256: a 128x256 tile's empty columns count against it (8192x384: one wave of
    # full 128x192 tiles against one of 128x256 tiles a quarter empty; gain 1.33); gains of
    # 1 (16384x384, 8192x640, 4096x1152) and under (8192x896, 2048x384) keep their plans.
    assert dispatch._wide_fills(8192, 384, 132)
    for m, n in ((16384, 384), (8192, 640), (4096, 1152), (8192, 896), (2048, 384)):
        assert not dispatch._wide_fills(m, n, 132), (m, n)


def test_16_bit_products_that_fill_waves_better_plan_the_wide_kernel(monkeypatch):
    """fp16 and bf16, nn and nt: a persistent plan marked wide; tf32, batches, a split wave
    (3072^3: wave_rows) and the switch off keep theirs."""
    for dtype in (torch.float16, torch.bfloat16):
        for b_k_major in (False, True):
            p = single_plan(1536, 1536, 4096, dtype, b_k_major)
            assert p == dispatch.Plan(False, False, False, persistent=True, wide=True), p
    assert not single_plan(1536, 1536, 4096, torch.float32, precision="tf32").wide
    assert not single_plan(1536, 1536, 4096, batch=2).wide
    assert not single_plan(3072, 3072, 4096).wide
    assert not single_plan(1536, 4608, 4096).wide
    # Mid-M rows (configs.MID_M_MAX or fewer) with a wave of 128x128 tiles (256 x 11008:
    # 172) take the rule too; with fewer (128 x 11008: 86) the mid tiles keep them, as they
    # do rows that pad 128-row tiles by a third (dispatch.MID_SHORT_MAX_M) where the
    # 128x256 tiles fill their waves poorly (192 x 11008: 86 of them) and kernels/tall.py
    # does not take them (dispatch.TALL: 129 x 11008 it does, the mid tiles its fallback).
    mid = dispatch.Plan(False, False, False, persistent=True, mid_tiles=True)
    for m in (dispatch.MID_SHORT_MAX_M + 1, configs.MID_M_MAX):
        assert single_plan(m, 11008, 4096, b_k_major=True).wide, m
    assert single_plan(dispatch.MID_SHORT_MAX_M, 11008, 4096, b_k_major=True) == mid
    assert single_plan(dispatch.PERSISTENT_TILE + 1, 11008, 4096,
                       b_k_major=True) == mid._replace(tall=True)
    for m, n, k in ((144, 16384, 4096), (192, 28672, 8192)):
        assert single_plan(m, n, k, b_k_major=True).tall, (m, n, k)
    assert not single_plan(128, 11008, 4096, b_k_major=True).wide
    monkeypatch.setattr(dispatch, "WIDE", False)
    assert not single_plan(1536, 1536, 4096).wide


_COMPILE = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from perf import sass_audit
from triton_gemm.kernels import wide as w
a_m_major, b_k_major, has_d = json.loads(sys.argv[1])
bh = w.BN // 2
a_box = [w.BK, w.BM] if a_m_major else [w.BM, w.BK]
def b_box(width):
    return [width, w.BK] if b_k_major else [w.BK, width]
sig = {"a_desc": f"tensordesc<fp16{a_box}>", "b_desc": f"tensordesc<fp16{b_box(w.BN)}>",
       "c_desc": f"tensordesc<fp16[{w.BM}, {w.BN}]>", "bh_desc": f"tensordesc<fp16{b_box(bh)}>",
       "ch_desc": f"tensordesc<fp16[{w.BM}, {bh}]>", "c_ptr": "*fp16", "d_ptr": "*fp16",
       "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32", "stride_dm": "i32",
       "stride_dn": "i32", "alpha": "fp32", "beta": "fp32"}
const = {"HAS_D": has_d, "D_ROW": has_d, "A_M_MAJOR": a_m_major, "B_K_MAJOR": b_k_major,
         "UPCAST": False, "ACTIVATION": 0, "C_TMA": True, "INT64": False, "BM": w.BM,
         "BN": w.BN, "BK": w.BK, "GROUP_M": w.GROUP_M, "DEPENDENT": True, "stride_dm": 0, "stride_dn": 1}
kernel = sass_audit._compile(w._wide_kernel, sig, const,
                             ["c_ptr", "d_ptr", "M", "N", "K", "stride_cm"], w.WARPS, w.STAGES)
with tempfile.TemporaryDirectory() as tmp:
    mma = sass_audit.mma_instructions(kernel.asm["cubin"], Path(tmp))
    report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a")
print(json.dumps({"shared": kernel.metadata.shared, "mma": mma, **report}))
"""

_BUILDS = [(a_m_major, b_k_major, False) for a_m_major in (False, True)
           for b_k_major in (False, True)] + [(False, True, True)]


@pytest.mark.parametrize("a_m_major,b_k_major,has_d", _BUILDS,
                         ids=[f"{'a_col' if am else 'a_row'}-{'b_col' if bk else 'b_row'}"
                              f"{'-bias' if d else ''}" for am, bk, d in _BUILDS])
def test_the_kernel_compiles_to_wgmma_unserialised_without_spills(a_m_major, b_k_major, has_d):
    """Offline for sm_90a, each operand layout and a bias row (D_ROW): HGMMA 64x128 and
    64x64 (not HMMA), no ptxas note that it serialised them (C7515: the reason the K loop is
    not flattened), no spills, within the H100's shared memory."""
    report = offline_build(_COMPILE, *[a_m_major, b_k_major, has_d])
    assert "HGMMA.64x128x16" in report["mma"] and "HGMMA.64x64x16" in report["mma"], report
    assert "HMMA" not in report["mma"].replace("HGMMA", ""), report
    assert "C7515" not in report["warnings"], report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, report


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_library_calls_that_fill_waves_better_run_wide(dtype):
    """matmul, linear (bias and activation) and addmm (out=, a bias row) of 1536x1536
    outputs take the wide kernel on Hopper with 132 SMs (addmm with a matrix D the
    persistent kernel), and so does linear of 8192 x 384; all match float64; NaN-poisoned
    outputs."""
    if not wide.hopper(torch.device("cuda")):
        pytest.skip("kernels/wide.py needs Hopper (sm_90)")
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the rule's shapes are set for 132 SMs")
    a, b = randn(1536, 4096, dtype=dtype), randn(4096, 1536, dtype=dtype)
    out = triton_gemm.matmul(a, b)
    assert last_config() == NAME, last_config()
    assert_close(out, a.double() @ b.double(), dtype, what="matmul", operands=(a, b))
    x, w = randn(1536, 2048, dtype=dtype), randn(1536, 2048, dtype=dtype)
    bias = randn(1536, dtype=dtype)
    y = triton_gemm.linear(x, w, bias, activation="gelu")
    assert last_config() == NAME, last_config()
    assert_close(y, F.gelu(x.double() @ w.double().T + bias.double()), dtype, what="linear",
                 operands=(x, w.T))
    for d in (randn(1536, dtype=dtype), randn(1536, 1536, dtype=dtype)):
        c = torch.full((1536, 1536), float("nan"), dtype=dtype, device=a.device)
        triton_gemm.addmm(d, a, b, beta=0.5, alpha=2.0, out=c)
        # A matrix D runs on the persistent kernel (wide.supports).
        assert (last_config() == NAME) == (d.dim() == 1), last_config()
        assert_close(c, 2.0 * (a.double() @ b.double()) + 0.5 * d.double(), dtype,
                     what=f"addmm, D {tuple(d.shape)}", operands=(a, b))
    # 384 columns: two 192-wide tiles (dispatch._wide_fills counts 256-wide ones' empty
    # columns).
    x, w = randn(8192, 1024, dtype=dtype), randn(384, 1024, dtype=dtype)
    y = triton_gemm.linear(x, w)
    assert last_config() == NAME, last_config()
    assert_close(y, x.double() @ w.double().T, dtype, what="linear, N = 384", operands=(x, w.T))


@requires_kernels
def test_the_probe_kernel_runs_both_tile_kinds():
    """perf/wide_tile_probe.py's kernel: a 2-part tile and a plain one (BN2 = 0), flattened
    or not, on a NaN-poisoned out."""
    from perf import wide_tile_probe
    a, b = randn(70, 96, dtype=torch.float16), randn(96, 200, dtype=torch.float16)
    for tile in ((32, 32, 16, 16, 4, 2, False, True), (32, 32, 16, 16, 4, 2, False, False),
                 (32, 32, 0, 16, 4, 2, False, True)):
        out = torch.full((70, 200), float("nan"), dtype=torch.float16, device=a.device)
        wide_tile_probe.run_tile(a, b, out, *tile, sms=3)
        assert_close(out, a.double() @ b.double(), torch.float16, what=f"probe {tile}",
                     operands=(a, b))
