"""kernels/tall.py: 16-bit products of 129-192 rows in tiles of all the rows (a 128-row and a
16-, 32- or 64-row accumulator stacked, each computed transposed). The kernel at each lower
height in every operand layout with each epilogue and C store (the interpreter and the GPU),
its sm_90a build (offline: wgmma as wide as each part, no spills, none serialised),
dispatch's rule (TALL) and its plans, and the library's calls that run there (GPU)."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import (check_pointer_store_and_matrix_d, gpu_only, offline_build, randn,
                      requires_kernels, single_plan, stored)
import triton_gemm
from triton_gemm import dispatch, last_config
from triton_gemm.kernels import tall
from triton_gemm.kernels.common import hopper
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _name(m: int) -> str:
    height = sum(tall.parts(m))
    return f"t_{height}x{tall.BN}x{tall.BK}_w{tall.WARPS}_s{tall.STAGES[height]}"


def test_the_parts_are_the_fewest_rows_that_cover_the_output():
    parts = [tall.parts(m) for m in (65, 80, 81, 96, 129, 144, 145, 160, 161, 192)]
    assert parts == [(64, 16), (64, 16), (64, 32), (64, 32), (128, 16), (128, 16), (128, 32),
                     (128, 32), (128, 64), (128, 64)]
    assert all(tall.parts(m) is None for m in (1, 64, 97, 128, 193, 256))
    assert {u + h for u in tall.UPPER_HEIGHTS for h in tall.LOWER_HEIGHTS if h < u} == set(
        tall.STAGES)
    assert tall.MAX_M == 192 and tall.tiles(144, 16384) == 128 and tall.tiles(150, 200) == 2


# Row counts at each lower height (all of it used, or a part of it), with their layouts.
_CASES = [(144, False, True), (136, True, False), (160, False, False), (152, True, True),
          (192, False, True), (184, True, False), (72, False, True), (96, True, False)]


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m,a_m_major,b_k_major", _CASES,
                         ids=[f"{m}-{'a_col' if am else 'a_row'}-{'b_col' if bk else 'b_row'}"
                              for m, am, bk in _CASES])
def test_tall_product_in_every_layout(dtype, m, a_m_major, b_k_major):
    """act(alpha * A B + beta * bias) on a NaN-poisoned out: the last column of tiles cut,
    K past whole steps, more tiles than programs (each walks two)."""
    n, k = tall.BN + 104, 2 * tall.BK + 32  # rows of 320 bytes: on sectors
    a = stored(randn(m, k, dtype=dtype), a_m_major)
    b = stored(randn(k, n, dtype=dtype), b_k_major)
    bias = randn(n, dtype=dtype)
    assert tall.supports(a, b, a.new_empty(m, n))
    ref = torch.relu(0.5 * (a.double() @ b.double()) + 2.0 * bias.double())
    for call in range(2):  # the second on the cached compiled kernel
        out = torch.full((m, n), float("nan"), dtype=dtype, device=a.device)
        tall.matmul_2d(a, b, out, bias, alpha=0.5, beta=2.0, activation=1, sms=1)
        assert last_config() == _name(m), last_config()
        assert_close(out, ref, dtype, what=f"tall {m}x{n}x{k}, call {call}", operands=(a, b))


@requires_kernels
@pytest.mark.parametrize("m,a_m_major,b_k_major", [(144, False, True), (184, True, False)],
                         ids=["144-a_row-b_col", "184-a_col-b_row"])
def test_tall_product_in_k_slices(monkeypatch, m, a_m_major, b_k_major):
    """Fewer tiles than SMs: K slices (MIN_SLICE_K lowered to fit the interpreter), the last
    one short, summed with the epilogue by splitk.reduce; a bias and an activation, on a
    NaN-poisoned out."""
    monkeypatch.setattr(tall, "MIN_SLICE_K", 64)
    n, k = tall.BN + 8, 200
    assert tall.slices(m, n, k, 8) == 3  # three of 64 asked; two of 128 steps run
    a = stored(randn(m, k, dtype=torch.float16), a_m_major)
    b = stored(randn(k, n, dtype=torch.float16), b_k_major)
    bias = randn(n, dtype=torch.float16)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=a.device)
    tall.matmul_2d(a, b, out, bias, alpha=0.5, beta=2.0, activation=1, sms=8)
    assert last_config() == _name(m) + "_k2", last_config()
    assert_close(out, torch.relu(0.5 * (a.double() @ b.double()) + 2.0 * bias.double()),
                 torch.float16, what=f"tall {m}x{n}x{k} in slices", operands=(a, b))


@requires_kernels
def test_tall_product_into_rows_tma_cannot_store_and_with_a_matrix_d():
    """An out whose rows are off 16 bytes (stored by pointers), a bias; out's column past N
    untouched. A matrix D (left to the persistent kernel by supports(), as wide.py's), which
    the kernel computes right all the same."""
    check_pointer_store_and_matrix_d(tall, 150, 152, 64)


def test_tall_refuses_rows_outside_its_tile():
    """Rows parts() gives no tile: a ValueError naming the ranges."""
    for m in (64, 128, tall.MAX_M + 1):
        a = torch.empty(m, 64, dtype=torch.float16)
        with pytest.raises(ValueError, match="65-96 or 129-192"):
            tall.matmul_2d(a, torch.empty(64, 64, dtype=torch.float16),
                           torch.empty(m, 64, dtype=torch.float16), sms=1)


def test_the_rule_at_the_measured_shapes():
    """132 SMs: the shapes of dispatch.TALL's probe, on the side the probe found."""
    for m, n, k in ((144, 16384, 4096), (136, 28672, 8192), (192, 28672, 8192),
                    (144, 11008, 4096), (160, 11008, 4096), (144, 8192, 28672),
                    (192, 8192, 28672), (144, 4096, 11008), (192, 4096, 11008),
                    (72, 11008, 4096), (96, 16384, 4096), (96, 8192, 28672)):
        assert dispatch._tall_fills(m, n, k, 132), (m, n, k)
    # A 64-row lower part at 0.65 of a wave, under half a wave of tiles and slices (slices
    # of 4096 no shallower than MIN_SLICE_K: 2), rows outside the tile.
    for m, n, k in ((192, 11008, 4096), (176, 11008, 2048), (160, 4096, 4096),
                    (144, 4096, 4096), (72, 4096, 4096), (128, 16384, 4096),
                    (112, 16384, 4096), (193, 28672, 8192)):
        assert not dispatch._tall_fills(m, n, k, 132), (m, n, k)
    assert tall.slices(144, 8192, 28672, 132) == 2 and tall.slices(144, 4096, 11008, 132) == 4
    assert tall.slices(144, 4096, 4096, 132) == 2 and tall.slices(144, 16384, 4096, 132) == 1


def test_16_bit_short_prefills_plan_the_tall_kernel(monkeypatch):
    """fp16 and bf16, nn and nt: a persistent plan marked tall (the mid tiles kept for the
    kernel's refusals where the plan before had them); tf32, batches, the switch off and
    the rule's losing shapes keep theirs."""
    tall_plan = dispatch.Plan(False, False, False, persistent=True, tall=True)
    for dtype in (torch.float16, torch.bfloat16):
        for b_k_major in (False, True):
            assert single_plan(144, 16384, 4096, dtype, b_k_major) == tall_plan
            assert single_plan(160, 11008, 4096, dtype, b_k_major) == tall_plan._replace(
                mid_tiles=True)
    assert not single_plan(144, 16384, 4096, torch.float32, True, precision="tf32").tall
    assert not single_plan(144, 16384, 4096, b_k_major=True, batch=2).tall
    assert not single_plan(192, 11008, 4096, b_k_major=True).tall
    monkeypatch.setattr(dispatch, "TALL", False)
    assert not single_plan(144, 16384, 4096, b_k_major=True).tall


_COMPILE = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from perf import sass_audit
from triton_gemm.kernels import tall as t
bm, bh, a_m_major, b_k_major, has_d, slices = json.loads(sys.argv[1])
def a_box(rows):
    return [t.BK, rows] if a_m_major else [rows, t.BK]
b_box = [t.BN, t.BK] if b_k_major else [t.BK, t.BN]
sig = {"a_desc": f"tensordesc<fp16{a_box(bm)}>", "b_desc": f"tensordesc<fp16{b_box}>",
       "c_desc": f"tensordesc<fp16[{bm}, {t.BN}]>", "ah_desc": f"tensordesc<fp16{a_box(bh)}>",
       "ch_desc": f"tensordesc<fp16[{bh}, {t.BN}]>", "c_ptr": "*fp16", "d_ptr": "*fp16",
       "part_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32",
       "stride_dm": "i32", "stride_dn": "i32", "alpha": "fp32", "beta": "fp32",
       "K_SLICE_STEPS": "i32"}
const = {"HAS_D": has_d, "D_ROW": has_d, "A_M_MAJOR": a_m_major, "B_K_MAJOR": b_k_major,
         "UPCAST": False, "ACTIVATION": 0, "C_TMA": True, "INT64": False, "BM": bm, "BH": bh,
         "BN": t.BN,
         "BK": t.BK, "GROUP_M": t.GROUP_M, "SLICES": slices, "DEPENDENT": True, "stride_dm": 0,
         "stride_dn": 1}
kernel = sass_audit._compile(t._tall_kernel, sig, const,
                             ["c_ptr", "d_ptr", "M", "N", "K", "stride_cm"], t.WARPS,
                             t.STAGES[bm + bh])
with tempfile.TemporaryDirectory() as tmp:
    mma = sass_audit.mma_instructions(kernel.asm["cubin"], Path(tmp))
    report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a")
print(json.dumps({"shared": kernel.metadata.shared, "mma": mma, **report}))
"""

_BUILDS = ([(128, bh, False, True, False, 1) for bh in tall.LOWER_HEIGHTS]
           + [(64, bh, False, True, False, 1) for bh in (16, 32)]
           + [(128, 16, True, False, False, 1), (128, 64, True, True, False, 1),
              (128, 64, False, True, True, 1), (64, 32, True, False, False, 1),
              (128, 64, False, True, False, 2), (64, 32, False, True, False, 2)])


@pytest.mark.parametrize("bm,bh,a_m_major,b_k_major,has_d,slices", _BUILDS,
                         ids=[f"{bm}+{bh}-{'a_col' if am else 'a_row'}-"
                              f"{'b_col' if bk else 'b_row'}{'-bias' if d else ''}"
                              f"{'-sliced' if sl > 1 else ''}"
                              for bm, bh, am, bk, d, sl in _BUILDS])
def test_the_kernel_compiles_to_wgmma_unserialised_without_spills(bm, bh, a_m_major,
                                                                  b_k_major, has_d, slices):
    """Offline for sm_90a, each tile height, operand layouts, a bias row (D_ROW) and K
    slices (fp32 partials stored by pointers): HGMMA 64x(upper height) and 64x(lower
    height), the parts' rows as wgmma's N (not HMMA, no padding to 64 rows), no ptxas note
    that it serialised them (C7515), no spills, within the H100's shared memory at the
    module's stages."""
    report = offline_build(_COMPILE, *[bm, bh, a_m_major, b_k_major, has_d, slices])
    assert f"HGMMA.64x{bm}x16" in report["mma"] and f"HGMMA.64x{bh}x16" in report["mma"], report
    assert "HMMA" not in report["mma"].replace("HGMMA", ""), report
    assert "C7515" not in report["warnings"], report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, report


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_library_calls_of_short_prefills_run_tall(dtype):
    """linear (bias and activation) of 144 and 160 rows against 16384- and 11008-wide
    weights, of 192 rows against a 4096 x 11008 one (in K slices) and of 96 rows against an
    11008-wide one, matmul and addmm (out=, a bias row) take the tall kernel on Hopper with
    132 SMs (addmm with a matrix D the persistent kernel) and match float64; NaN-poisoned
    outputs."""
    if not hopper(torch.device("cuda")):
        pytest.skip("kernels/tall.py needs Hopper (sm_90)")
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the rule's shapes are set for 132 SMs")
    for m, n, k, slices in ((144, 16384, 2048, ""), (160, 11008, 2048, ""),
                            (192, 4096, 11008, "_k4"), (96, 11008, 2048, "")):
        x, w = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype)
        bias = randn(n, dtype=dtype)
        y = triton_gemm.linear(x, w, bias, activation="gelu")
        assert last_config() == _name(m) + slices, last_config()
        assert_close(y, F.gelu(x.double() @ w.double().T + bias.double()), dtype,
                     what=f"linear {m}x{n}", operands=(x, w.T))
    a, b = randn(144, 4096, dtype=dtype), randn(4096, 16384, dtype=dtype)
    out = triton_gemm.matmul(a, b)
    assert last_config() == _name(144), last_config()
    assert_close(out, a.double() @ b.double(), dtype, what="matmul", operands=(a, b))
    for d in (randn(16384, dtype=dtype), randn(144, 16384, dtype=dtype)):
        c = torch.full((144, 16384), float("nan"), dtype=dtype, device=a.device)
        triton_gemm.addmm(d, a, b, beta=0.5, alpha=2.0, out=c)
        assert (last_config() == _name(144)) == (d.dim() == 1), last_config()
        assert_close(c, 2.0 * (a.double() @ b.double()) + 0.5 * d.double(), dtype,
                     what=f"addmm, D {tuple(d.shape)}", operands=(a, b))


def test_the_probe_reads_its_tiles():
    from perf import tall_probe
    assert tall_probe.parse_tile("128,64,4,5") == (128, 64, 4, 5)
    assert tall_probe.parse_tile("128,64,4,5,2") == (128, 64, 4, 5, 2)
    assert tall_probe.parse_tile("auto") is None


def test_tall_supports_only_rows_its_tile_holds():
    """supports(): kernels/wide.py's operand rules, and 129-192 rows."""
    for m, ok in ((64, False), (65, True), (96, True), (97, False), (128, False), (129, True),
                  (192, True), (193, False)):
        a = torch.empty(m, 64, dtype=torch.float16)
        b = torch.empty(64, 64, dtype=torch.float16)
        assert tall.supports(a, b, a.new_empty(m, 64)) == (ok and tall.INTERPRETER), m
        assert not tall.supports(a.float(), b.float(), a.new_empty(m, 64).float())
