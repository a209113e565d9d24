"""kernels/simt_tma.py: fp32 FMA products on Hopper, a TMA warp feeding FFMA warps. That
the compiled kernel's loop is shared-memory loads and FFMA only (offline sm_90a compile, no
GPU), which calls dispatch sends there, and the products themselves (GPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import gpu_only, randn
import triton_gemm
from triton_gemm import dispatch, last_config
from triton_gemm.kernels import simt_tma
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
ST_NAME = f"st_{simt_tma.BM}x{simt_tma.BN}x{simt_tma.BK}"

_COMPILE = """
import json, re, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from triton.experimental.gluon import language as gl
from perf import sass_audit
from triton_gemm.kernels import simt_tma as st
bm, bn, wm, stages = json.loads(sys.argv[1])  # wm 0: the M-major A
rows = repr(gl.NVMMASharedLayout(0, 32, rank=2))
a_desc = (f"tensordesc<fp32[{bm}, {st.BK}],{gl.NVMMASharedLayout(128, 32, rank=2)!r}>" if wm
          else f"tensordesc<fp32[{st.BK}, {bm}],{rows}>")
signature = {"a_desc": a_desc, "b_desc": f"tensordesc<fp32[{st.BK}, {bn}],{rows}>",
             "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "K_SLICE": "i32",
             "stride_cm": "i32", "stride_cs": "i32"}
constexprs = {"BM": bm, "BN": bn, "BK": st.BK, "STAGES": stages, "GROUP_M": st.GROUP_M,
              "LOADER_REGS": st.LOADER_REGS, "A_K_MAJOR": bool(wm), "WM": wm or 2,
              "STORE_T": bool(wm)}
kernel = sass_audit.compile_gluon(st._simt_tma_kernel, signature, constexprs,
                                  {"num_warps": st.WARPS,
                                   "maxnreg": st.max_registers(st.WARPS)})
with tempfile.TemporaryDirectory() as tmp:
    sass = sass_audit.sass_text(kernel.asm["cubin"], Path(tmp))
    report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a",
                                        st.max_registers(st.WARPS))
ops = re.findall(r"^\\s*/\\*[0-9a-f]+\\*/\\s+(?:@!?U?P\\w+\\s+)?([A-Z][A-Z0-9.]*)", sass, re.M)
print(json.dumps({"shared": kernel.metadata.shared, **report,
                  "ffma": ops.count("FFMA"), "lds128": ops.count("LDS.128"),
                  "lds_other": sum(op.startswith("LDS") and op != "LDS.128" for op in ops),
                  "shfl": sum(op.startswith("SHFL") for op in ops),
                  "tma_loads": kernel.asm["ptx"].count("cp.async.bulk.tensor")}))
"""

# (BM, BN, WM, STAGES): the M-major tile (WM 0) and every K-major one.
_TILES = [(simt_tma.BM, simt_tma.BN, 0, simt_tma.STAGES), *simt_tma.K_MAJOR_TILES]


@pytest.mark.parametrize("tile", _TILES, ids=lambda t: "x".join(map(str, t)))
def test_the_kernel_compiles_to_ffma_fed_by_16_byte_shared_loads(tile):
    """Offline for sm_90a (a subprocess: triton.compile needs the interpreter off): one K
    step is BM x BN x BK / threads FFMA; 16-byte shared loads only (but the barrier's byte):
    an M-major A's K row six a thread (two runs of A, four of B), a K-major A's K step a
    run of four K columns per row of the thread's and a K row's B runs; no shuffles (the
    K-major columns come out of their runs by register renaming), two TMA loads a step, no
    spills, and the ring fits the H100's shared memory."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _COMPILE, json.dumps(tile)], cwd=ROOT,
                          env=env, check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    bm, bn, wm, _ = tile
    threads = 32 * simt_tma.WARPS
    assert report["ffma"] == bm * bn * simt_tma.BK // threads, report
    if wm:
        rows, runs = bm // (8 * wm), bn // (16 * (simt_tma.WARPS // wm))
        assert report["lds128"] == rows * simt_tma.BK // 4 + runs * simt_tma.BK, report
    else:
        assert report["lds128"] == 6 * simt_tma.BK, report
    assert report["lds_other"] <= 1 and report["shfl"] == 0, report
    assert report["tma_loads"] == 2, report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, report


def _ops(m, n, k, a_layout, b_layout):
    a = torch.empty(1, m, k) if a_layout == "row" else torch.empty(1, k, m).transpose(1, 2)
    b = torch.empty(1, k, n) if b_layout == "row" else torch.empty(1, n, k).transpose(1, 2)
    return a, b


def test_large_fp32_fma_plans_stage_what_the_kernel_reads():
    """The plans whose staged operands the kernel takes (an M-major A, a row-major B) for
    ieee products of at least SIMT_TMA_MIN rows and columns, every layout: A copied
    M-major unless given so, a K-major B copied row-major."""
    big = dispatch.SIMT_TMA_MIN
    for a_layout, b_layout in (("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")):
        p = dispatch.plan(*_ops(big, big, 1024, a_layout, b_layout), "ieee", 132)
        assert p.a_m_major == (a_layout == "row"), (a_layout, b_layout, p)
        assert p.b_n_major == (b_layout == "col"), (a_layout, b_layout, p)
        assert not (p.split_k or p.persistent or p.gemv), p


def test_the_kernel_refuses_what_it_cannot_read(monkeypatch):
    """supports(): never CPU tensors (nor the interpreter); on a Hopper GPU fp32 only, A
    M-major, B row-major, output rows of unit stride, rows TMA can read, and outputs whose
    element offsets fit int32."""
    a = torch.empty(256, 128).T  # (128, 256), M-major
    b, out = torch.empty(256, 64), torch.empty(128, 64)
    assert not simt_tma.supports(a, b, out)
    if not (torch.cuda.is_available() and _hopper()):
        return
    a, b, out = a.cuda(), b.cuda(), out.cuda()
    assert simt_tma.supports(a, b, out)
    assert not simt_tma.supports(a.contiguous(), b, out)  # K-major A
    assert not simt_tma.supports(a, b.T.contiguous().T, out)  # K-major B
    assert not simt_tma.supports(a.half(), b.half(), out.half())
    assert not simt_tma.supports(a, b, torch.empty(64, 128, device="cuda").T)
    # A's rows (K of them, M apart) off 16 bytes: TMA cannot read them.
    assert not simt_tma.supports(torch.empty(256, 129, device="cuda").T,
                                 b, torch.empty(129, 64, device="cuda"))
    # An output whose storage reaches 2^31 elements: its offsets would pass int32.
    monkeypatch.setattr(simt_tma, "needs_int64", lambda *tensors: True)
    assert not simt_tma.supports(a, b, out)


def test_the_k_major_path_refuses_what_it_cannot_read():
    """supports_k_major(): never CPU tensors (nor the interpreter); on a Hopper GPU fp32
    only, A row-major (K-major), B row-major, rows TMA can read, and partials whose offsets
    fit int32; the output's strides are free (C^T as a view of C included)."""
    a, b, out = torch.empty(128, 256), torch.empty(256, 64), torch.empty(128, 64)
    assert not simt_tma.supports_k_major(a, b, out)
    if not (torch.cuda.is_available() and _hopper()):
        return
    a, b, out = a.cuda(), b.cuda(), out.cuda()
    assert simt_tma.supports_k_major(a, b, out)
    assert simt_tma.supports_k_major(a, b, torch.empty(64, 128, device="cuda").T)
    assert not simt_tma.supports_k_major(a.T.contiguous().T, b, out)  # M-major A
    assert not simt_tma.supports_k_major(a, b.T.contiguous().T, out)  # K-major B
    assert not simt_tma.supports_k_major(a.half(), b.half(), out.half())
    # A's rows (M of them, K apart) off 16 bytes: TMA cannot read them.
    assert not simt_tma.supports_k_major(torch.empty(128, 255, device="cuda"),
                                         torch.empty(255, 64, device="cuda"), out)
    # Partials' offsets past int32: 2^27 outputs in the 16 slices a K of 16 steps may take,
    # not in the 8 of a K of 8 steps.
    big_a, big_b = torch.empty(16384, 512, device="cuda"), torch.empty(512, 8192, device="cuda")
    big_out = torch.empty(1, 1, device="cuda").expand(16384, 8192)
    assert not simt_tma.supports_k_major(big_a, big_b, big_out)
    assert simt_tma.supports_k_major(big_a[:, :256], big_b[:256], big_out)


def _hopper() -> bool:
    a = torch.empty(256, 128, device="cuda").T
    return simt_tma.supports(a, torch.empty(256, 64, device="cuda"),
                             torch.empty(128, 64, device="cuda"))


def test_the_kernel_is_taken_only_where_its_tiles_fill_the_waves():
    """fills_waves at 132 SMs: 4096^3's 512 tiles of 128x256 fill 97% of four waves; 4097^3
    (561 tiles, 85% of five) and 3000^3 (288, 73% of three) do not."""
    assert simt_tma.fills_waves(4096, 4096, 132)
    assert simt_tma.fills_waves(8192, 8192, 132)
    assert not simt_tma.fills_waves(4097, 4097, 132)
    assert not simt_tma.fills_waves(3000, 3000, 132)
    assert not simt_tma.fills_waves(4104, 4104, 132)


@gpu_only
@pytest.mark.parametrize("m,n,k", [(256, 512, 64), (300, 520, 77), (1000, 1500, 1016),
                                   (128, 256, 32), (132, 260, 33), (2048, 2048, 2048)])
def test_simt_tma_kernel_computes_the_product(m, n, k):
    """Edges of both tile sides (TMA reads zeros past them, the store is masked), K off the
    32-deep step, one tile, one row and column block past it (rows TMA can read: 16-byte
    multiples); NaN-poisoned output."""
    if not _hopper():
        pytest.skip("kernels/simt_tma.py needs Hopper (sm_90)")
    a = randn(k, m).T  # M-major
    b = randn(k, n)
    out = torch.full((m, n), float("nan"), device=a.device)
    assert simt_tma.supports(a, b, out)
    simt_tma.matmul_2d(a, b, out)
    assert last_config() == ST_NAME
    assert_close(out, a.double() @ b.double(), torch.float32, "ieee", f"{m}x{n}x{k}",
                 operands=(a, b))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_matmul_runs_large_ieee_products_on_the_simt_tma_kernel(layout):
    """Through the public API, every operand layout (the plan's copies make A M-major and B
    row-major): matmul takes the kernel; addmm (an epilogue), a product under SIMT_TMA_MIN
    and one whose tiles leave most of a wave empty the plain kernel."""
    if not _hopper():
        pytest.skip("kernels/simt_tma.py needs Hopper (sm_90)")
    m, n, k = dispatch.SIMT_TMA_MIN, dispatch.SIMT_TMA_MIN, 1000
    a = randn(m, k) if layout[0] == "n" else randn(k, m).T
    b = randn(k, n) if layout[1] == "n" else randn(n, k).T
    out = triton_gemm.matmul(a, b, precision="ieee")
    assert last_config() == ST_NAME
    assert_close(out, a.double() @ b.double(), torch.float32, "ieee", layout, operands=(a, b))
    bias = randn(n)
    out = triton_gemm.addmm(bias, a, b, precision="ieee")
    assert last_config() != ST_NAME
    assert_close(out, bias.double() + a.double() @ b.double(), torch.float32, "ieee",
                 f"{layout} addmm", operands=(a, b))
    ragged = triton_gemm.matmul(a[:, :k - 8], b[:k - 8, :n - 4], precision="ieee")
    assert_close(ragged, a[:, :k - 8].double() @ b[:k - 8, :n - 4].double(), torch.float32,
                 "ieee", f"{layout} ragged", operands=(a[:, :k - 8], b[:k - 8, :n - 4]))
    small = triton_gemm.matmul(a[:256], b[:, :256], precision="ieee")
    assert last_config() != ST_NAME  # under SIMT_TMA_MIN
    assert_close(small, a[:256].double() @ b[:, :256].double(), torch.float32, "ieee",
                 f"{layout} small", operands=(a[:256], b[:, :256]))


# (m, n, k) -> (BM, BN, slices, K a slice) where the plan is pinned: a wave of 256x64 tiles'
# worth of slices (8192x64x8192: 32 tiles in 4 slices of 2048); few tiles over a long K in
# many slices (256x256x32768: 4 tiles in 32); 128 rows whole on 128x128 tiles
# (128x128x65536: K_MAJOR_MAX_SPLIT slices); slices no shallower than K_MAJOR_MIN_SLICE
# (128x128x4096: 32 of 128, not a wave of 128 of 32; 256x64 ties 128x128 and comes first).
PINNED_PLANS = {(8192, 64, 8192): (256, 64, 4, 2048), (256, 256, 32768): (256, 64, 32, 1024),
                (128, 128, 65536): (128, 128, 128, 512), (128, 128, 4096): (256, 64, 32, 128)}


@pytest.mark.parametrize("m,n,k", [(8192, 64, 8192), (4096, 128, 4096), (11008, 128, 4096),
                                   (28672, 128, 8192), (4096, 256, 4096), (1000, 100, 1000),
                                   (256, 64, 32), (8, 8, 40), (256, 256, 32768),
                                   (128, 128, 65536), (128, 128, 4096), (200, 300, 100)])
def test_k_major_plans_cut_k_into_whole_steps_over_a_known_tile(m, n, k):
    """k_major_plan at 132 SMs: a K_MAJOR_TILES tile, at most K_MAJOR_MAX_SPLIT slices of
    whole 32-deep steps that cover K with none empty, each at least K_MAJOR_MIN_SLICE deep
    where K holds one that deep; PINNED_PLANS where pinned."""
    bm, bn, wm, stages, split, k_slice = simt_tma.k_major_plan(m, n, k, 132)
    assert (bm, bn, wm, stages) in simt_tma.K_MAJOR_TILES
    assert k_slice % simt_tma.BK == 0 and (split - 1) * k_slice < k <= split * k_slice
    assert split <= simt_tma.K_MAJOR_MAX_SPLIT
    assert k_slice >= min(simt_tma.K_MAJOR_MIN_SLICE, k)
    if (m, n, k) in PINNED_PLANS:
        assert (bm, bn, split, k_slice) == PINNED_PLANS[m, n, k]


@gpu_only
@pytest.mark.parametrize("m,n,k,transposed_out", [
    (8192, 64, 4096, True), (1000, 100, 1000, True), (4096, 128, 1376, True),
    (600, 256, 2052, False), (300, 8, 40, False), (256, 64, 32, True)])
def test_k_major_split_product(m, n, k, transposed_out):
    """split_matmul on a row-major (K-major) A: C^T's rows (a transposed skinny product's
    output, stored in C's order) and a row-major C; edges of both tile sides, K off the
    32-deep step and the slices, one K step; alpha, beta * D and an activation through
    splitk.reduce; NaN-poisoned output."""
    if not _hopper():
        pytest.skip("kernels/simt_tma.py needs Hopper (sm_90)")
    a, b = randn(m, k), randn(k, n)
    base = torch.full((n, m) if transposed_out else (m, n), float("nan"), device=a.device)
    out = base.T if transposed_out else base
    assert simt_tma.supports_k_major(a, b, out)
    ref = a.double() @ b.double()
    simt_tma.split_matmul(a, b, out, sms=132)
    assert_close(out, ref, torch.float32, "ieee", f"{m}x{n}x{k}", operands=(a, b))
    d = randn(m, n)
    out.fill_(float("nan"))
    simt_tma.split_matmul(a, b, out, d, alpha=0.5, beta=-2.0, activation=1, sms=132)
    assert_close(out, torch.relu(0.5 * ref - 2.0 * d.double()), torch.float32, "ieee",
                 f"{m}x{n}x{k} epilogue", operands=(a, b))


@gpu_only
@pytest.mark.parametrize("m,n,k", [(dispatch.K_MAJOR_AS_GIVEN_MIN_MN, 160, 32768),
                                   (300, 132, 16384)])
def test_long_k_products_as_given_take_the_k_major_path(m, n, k):
    """ieee split-K products of a row-major A and B with at least K_MAJOR_AS_GIVEN_MIN_MN
    rows and columns and K_MAJOR_AS_GIVEN_MIN_MNK multiply-adds run on the K-major path as
    given (addmm's bias, alpha and beta through the reduce); one row or column fewer, or a
    quarter of K, stays on the split-K kernel; NaN-poisoned out."""
    if not _hopper():
        pytest.skip("kernels/simt_tma.py needs Hopper (sm_90)")
    assert m * n * k >= dispatch.K_MAJOR_AS_GIVEN_MIN_MNK > m * n * k // 4
    a, b, bias = randn(m, k), randn(k, n), randn(n)
    out = torch.full((m, n), float("nan"), device=a.device)
    triton_gemm.addmm(bias, a, b, beta=0.5, alpha=2.0, precision="ieee", out=out)
    assert last_config().startswith("stk_"), last_config()
    assert_close(out, 2.0 * (a.double() @ b.double()) + 0.5 * bias.double(), torch.float32,
                 "ieee", f"addmm {m}x{n}x{k}", operands=(a, b))
    edge = dispatch.K_MAJOR_AS_GIVEN_MIN_MN - 1
    for a_, b_ in ((a[:edge], b), (a, b[:, :edge]), (a[:, :k // 4], b[:k // 4])):
        fewer = triton_gemm.matmul(a_, b_, precision="ieee")
        assert last_config().startswith("k_"), last_config()
        assert_close(fewer, a_.double() @ b_.double(), torch.float32, "ieee",
                     f"{tuple(fewer.shape)} on split-K", operands=(a_, b_))


@gpu_only
def test_mid_size_long_k_products_take_the_k_major_path():
    """ieee products of a row-major A and B too large for split-K and too small for the
    M-major tile, K from K_MAJOR_MID_MIN_K, run on the K-major path (epilogue included);
    half that K stays on the plain kernel; NaN-poisoned out."""
    if not _hopper():
        pytest.skip("kernels/simt_tma.py needs Hopper (sm_90)")
    # Half the K falls short of K_MAJOR_MID_MIN_K only: m * n * k / 2 >= 2^29 still.
    m, n, k = 1024, 640, dispatch.K_MAJOR_MID_MIN_K
    assert m * n * k // 2 >= dispatch.K_MAJOR_AS_GIVEN_MIN_MNK
    a, b, bias = randn(m, k), randn(k, n), randn(n)
    assert not dispatch.plan(a[None], b[None], "ieee", 132).copies
    out = torch.full((m, n), float("nan"), device=a.device)
    triton_gemm.addmm(bias, a, b, beta=0.5, alpha=2.0, precision="ieee", out=out)
    assert last_config().startswith("stk_"), last_config()
    assert_close(out, 2.0 * (a.double() @ b.double()) + 0.5 * bias.double(), torch.float32,
                 "ieee", f"addmm {m}x{n}x{k}", operands=(a, b))
    half = triton_gemm.matmul(a[:, :k // 2], b[:k // 2], precision="ieee")
    assert last_config().startswith("s_"), last_config()
    assert_close(half, a[:, :k // 2].double() @ b[:k // 2].double(), torch.float32, "ieee",
                 "half the K on the plain kernel", operands=(a, b))


@gpu_only
def test_mid_size_products_against_a_k_major_weight_take_the_k_major_path():
    """The mid-size products above against a K-major weight (linear's) run on the K-major
    path too, on B's row-major copy (K_MAJOR_COPIED_B), bias and all; half the K stays on
    the plain kernel; NaN-poisoned out."""
    if not _hopper():
        pytest.skip("kernels/simt_tma.py needs Hopper (sm_90)")
    m, n, k = dispatch.FMA_TRANSPOSED_MAX_M + 1, 2048, dispatch.K_MAJOR_MID_MIN_K
    assert m * n * k // 2 >= dispatch.K_MAJOR_AS_GIVEN_MIN_MNK
    x, w, bias = randn(m, k), randn(n, k), randn(n)
    p = dispatch.plan(x[None], w.T[None], "ieee", 132)
    assert p.b_n_major and not (p.split_k or p._replace(b_n_major=False).copies), p
    out = torch.full((m, n), float("nan"), device=x.device)
    triton_gemm.addmm(bias, x, w.T, beta=0.5, alpha=2.0, precision="ieee", out=out)
    assert last_config().startswith("stk_"), last_config()
    assert_close(out, 2.0 * (x.double() @ w.double().T) + 0.5 * bias.double(),
                 torch.float32, "ieee", f"addmm {m}x{n}x{k} nt", operands=(x, w.T))
    xh, wh = x[:, :k // 2], w[:, :k // 2]
    half = triton_gemm.linear(xh, wh, precision="ieee")
    assert last_config().startswith("s_"), last_config()
    assert_close(half, xh.double() @ wh.double().T, torch.float32, "ieee",
                 "half the K on the plain kernel", operands=(xh, wh.T))


@gpu_only
@pytest.mark.parametrize("m", [dispatch.K_MAJOR_FMA_MIN_N, 100, dispatch.FMA_TRANSPOSED_MAX_M])
def test_linear_products_take_the_k_major_path(m):
    """ieee products against a K-major weight (linear's) of K_MAJOR_FMA_MIN_N ..
    FMA_TRANSPOSED_MAX_M rows run transposed on the K-major path, bias and all; one row
    fewer stays on the split-K kernel."""
    if not _hopper():
        pytest.skip("kernels/simt_tma.py needs Hopper (sm_90)")
    n, k = dispatch.THIN_MIN_N, 1056
    x, w, bias = randn(m, k), randn(n, k), randn(n)
    out = triton_gemm.linear(x, w, bias, precision="ieee")
    assert last_config().startswith("stk_")
    assert_close(out, x.double() @ w.double().T + bias.double(), torch.float32, "ieee",
                 f"linear {m} rows", operands=(x, w.T))
    fewer = triton_gemm.matmul(x[:dispatch.K_MAJOR_FMA_MIN_N - 1], w.T, precision="ieee")
    assert last_config().startswith("k_")
    assert_close(fewer, x[:dispatch.K_MAJOR_FMA_MIN_N - 1].double() @ w.double().T,
                 torch.float32, "ieee", "one row fewer", operands=(x, w.T))
