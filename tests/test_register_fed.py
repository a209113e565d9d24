"""kernels/register_fed.py: tf32 nn and tt products with the MN-major operand fed to wgmma
from registers. Where dispatch sends them (CPU), that the compiled kernel never lets an
instruction overwrite a running wgmma's registers (offline sm_90a compile, no GPU), and the
products themselves (GPU)."""

import math
import sys
from pathlib import Path

import pytest
import torch

from conftest import DEVICE, gpu_only, offline_build, randn, requires_kernels
import triton_gemm
from triton_gemm import dispatch, last_config
from triton_gemm.kernels import common, register_fed
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import sass_audit  # noqa: E402

SMS = 132
RF_NAME = f"rf_{register_fed.BP}x{register_fed.BQ}x{register_fed.BK}"


def _ops(m, n, k, a_layout, b_layout, dtype=torch.float32):
    a = torch.empty(1, m, k, dtype=dtype) if a_layout == "row" else \
        torch.empty(1, k, m, dtype=dtype).transpose(1, 2)
    b = torch.empty(1, k, n, dtype=dtype) if b_layout == "row" else \
        torch.empty(1, n, k, dtype=dtype).transpose(1, 2)
    return a, b


def test_tf32_nn_and_tt_plans_take_the_register_fed_kernel_with_their_copy_behind():
    nn = dispatch.plan(*_ops(4096, 4096, 4096, "row", "row"), "tf32", SMS, True)
    tt = dispatch.plan(*_ops(4096, 4096, 4096, "col", "col"), "tf32", SMS, True)
    assert nn == dispatch.Plan(False, False, True, persistent=True, register_fed=True)
    assert tt == dispatch.Plan(False, True, False, persistent=True, register_fed=True)


@pytest.mark.parametrize("case", ["nt", "tn", "fp16", "tf32x3", "ieee", "batch", "no-tma",
                                  "padded", "small"])
def test_other_products_keep_their_plans(case):
    """Both operands K-major (nt) need no copy; both MN-major (tn) are both staged; 16-bit
    wgmma reads either layout; tf32x3 and ieee have their own paths (tf32x3's register-fed
    kernel is kernels/split_fed.py: tests/test_split_fed.py); GPUs without TMA, unaligned
    (padded) and small products never reach the persistent plan; batches take the batched
    plan (its register-fed launch: test_tf32_batches_plan_the_register_fed_launch)."""
    args = {"nt": (_ops(4096, 4096, 4096, "row", "col"), "tf32", True),
            "tn": (_ops(4096, 4096, 4096, "col", "row"), "tf32", True),
            "fp16": (_ops(4096, 4096, 4096, "row", "row", torch.float16), "half", True),
            "tf32x3": (_ops(4096, 4096, 4096, "row", "row"), "tf32x3", True),
            "ieee": (_ops(4096, 4096, 4096, "row", "row"), "ieee", True),
            "batch": ((torch.empty(2, 2048, 2048), torch.empty(2, 2048, 2048)), "tf32", True),
            "no-tma": (_ops(4096, 4096, 4096, "row", "row"), "tf32", False),
            "padded": (_ops(4097, 4097, 4097, "row", "row"), "tf32", True),
            "small": (_ops(512, 512, 512, "row", "row"), "tf32", True)}[case]
    (a, b), precision, tma = args
    p = dispatch.plan(a, b, precision, SMS, tma)
    if precision == "tf32x3":
        assert p == dispatch.SPLIT_FED_PLAN
    elif case == "batch":
        assert not p.persistent and p.batched
    else:
        assert not p.register_fed


def _batch(batch, m, n, k, layout, empty=False):
    """(batch, M, K) A and (batch, K, N) B in the nn, tt, nt or tn layout (t: the operand
    the transpose of a row-major tensor): N(0, 1) on the suite's device, or with empty
    meta-free empty CPU tensors (plans read no data)."""
    make = torch.empty if empty else randn
    a = make(batch, k, m).mT if layout[0] == "t" else make(batch, m, k)
    b = make(batch, n, k).mT if layout[1] == "t" else make(batch, k, n)
    return a, b


def test_tf32_batches_plan_the_register_fed_launch(monkeypatch):
    """Batches of tf32 nn and tt products: the batched plan with its K-major copy behind
    the register-fed launch (REGISTER_FED_BATCHED); nt (both K-major, read as given: the
    ping-pong kernel over this K) and tn (both staged) keep the batched kernel, as does the
    switch off; rows off ALIGN
    (padded copies behind) nn and nt take the launch."""
    shapes = dict(batch=8, m=1024, n=1024, k=1024)
    plans = {layout: dispatch.plan(*_batch(**shapes, layout=layout, empty=True), "tf32", SMS,
                                   True)
             for layout in ("nn", "tt", "nt", "tn")}
    assert plans["nn"] == dispatch.Plan(False, False, True, batched=True, register_fed=True)
    assert plans["tt"] == dispatch.Plan(False, True, False, batched=True, register_fed=True)
    # nt over this K runs ping-pong (dispatch.PINGPONG), the batched kernel behind it.
    assert plans["nt"] == dispatch.Plan(False, False, False, batched=True, pingpong=True)
    assert plans["tn"] == dispatch.Plan(False, True, True, batched=True)
    # Rows off ALIGN (1000 fp32): the copies behind pad, the launch reads them as given.
    # and so nt where they would pad.
    for layout in ("nn", "nt"):
        padded = dispatch.plan(*_batch(32, 1000, 1000, 1000, layout, empty=True), "tf32",
                               SMS, True)
        assert padded == dispatch.Plan(True, True, True, batched=True, register_fed=True)
    monkeypatch.setattr(dispatch, "REGISTER_FED_BATCHED", False)
    nn = dispatch.plan(*_batch(**shapes, layout="nn", empty=True), "tf32", SMS, True)
    assert nn == dispatch.Plan(False, False, True, batched=True)


def test_batched_launch_refuses_what_3d_tma_cannot_read():
    """supports_batched: fp32 batches in the nn, tt and nt layouts, 16-bit ones in nt only
    (not tn, 2-D, nor the interpreter or a CPU); no broadcast (zero-stride) batch, no rows
    off 16 bytes."""
    a, b = _batch(2, 64, 64, 64, "nn", empty=True)
    assert not register_fed.supports_batched(a, b, torch.empty(2, 64, 64))  # not on a GPU
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        return  # the interpreter, or not Hopper
    out = randn(2, 64, 64)
    for layout in ("nn", "tt", "nt"):
        assert register_fed.supports_batched(*_batch(2, 64, 64, 64, layout), out)
    assert not register_fed.supports_batched(*_batch(2, 64, 64, 64, "tn"), out)
    a, b = _batch(2, 64, 64, 64, "nn")
    assert not register_fed.supports_batched(a.half(), b.half(), out.half())
    a, b = _batch(2, 64, 64, 64, "nt")
    assert register_fed.supports_batched(a.half(), b.half(), out.half())
    assert not register_fed.supports_batched(a, b[:1].expand(2, 64, 64), out)
    a, b = _batch(2, 64, 63, 64, "nn")  # B's rows of 63 fp32: 252 bytes
    assert not register_fed.supports_batched(a, b, randn(2, 64, 63))


@requires_kernels
def test_a_register_fed_plan_the_kernel_cannot_take_runs_its_copy():
    """In the interpreter (no Gluon), with an epilogue, or past supports(): the plan's K-major
    copy and the tiled kernel compute the product."""
    m, n, k = (256, 320, 512) if DEVICE == "cuda" else (48, 40, 64)
    a, b, d = randn(1, m, k), randn(1, k, n), randn(n)
    force = dispatch.Plan(False, False, True, persistent=True, register_fed=True)
    out = torch.full((1, m, n), float("nan"), device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision="tf32", force=force)
    assert not last_config().startswith("rf_")
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, torch.float32, "tf32", "register-fed plan, epilogue", operands=(a, b))


def test_the_hazard_scan_finds_a_fragment_loaded_under_a_running_wgmma():
    """ptxas 12.8's own schedule with one wgmma left in flight (the probe's first try):
    the next fragment loaded into the registers the running wgmma reads."""
    sass = "\n".join([
        "        /*2350*/                   HGMMA.64x256x8.F32.TF32 R24, R152, gdesc[UR4], R24 ;",
        "        /*2420*/                   HGMMA.64x256x8.F32.TF32 R24, R164, gdesc[UR4], R24, gsb0 ;",
        "        /*2580*/                   LDS R152, [R13+UR5+0x20000] ;",
        "        /*2680*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;",
        "        /*2690*/                   LDS R170, [R13+UR5+0x20000] ;",
        "        /*26a0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;",
        "        /*26b0*/               @P1 LDS.64 R164, [R13+UR5+0x20000] ;"])
    assert sass_audit.wgmma_register_hazards(sass) == [
        "/*2580*/ LDS R152, [R13+UR5+0x20000] ;"]


def _offline_reports(reports: str) -> list:
    """The sass_audit reports the expression `reports` (a list of sass_audit calls, its
    names in scope) gives, compiled offline in a subprocess: triton.compile needs the
    interpreter off."""
    return offline_build("import json, sys; sys.path.insert(0, '.'); "
                         "from perf import sass_audit; "
                         "from perf.sass_audit import register_fed_report; "
                         f"print(json.dumps({reports}))")


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_the_kernel_compiles_with_alternating_fragments_and_no_hazard(batched):
    """Offline for sm_90a (a subprocess: triton.compile needs the interpreter off): both
    output orientations issue register-fed HGMMA from two register sets (two K steps a
    turn), nothing writes a set while its wgmma runs, no spills, and the ring fits the
    H100's shared memory; so too the batched launch (3-D descriptors)."""
    for report in _offline_reports(f"[register_fed_report(t, batched={batched}) "
                                   "for t in (True, False)]"):
        assert report["mma"] == "HGMMA.64x256x8.F32.TF32", report
        # Four k8 instructions a K step, each fragment four registers: two sets of 16.
        assert len(report["a_registers"]) == 8, report
        assert report["hazards"] == [], report
        assert report["spill_stores"] == 0 and "C7515" not in report["warnings"], report
        assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem


@pytest.mark.parametrize("ctas,x_smem,dtype", [(2, False, "fp32"), (4, False, "fp32"),
                                               (2, True, "fp32"), (2, True, "fp16")])
def test_the_cluster_variant_compiles_with_its_shared_memory_where_its_ptx_says(ctas, x_smem,
                                                                              dtype):
    """The variant in clusters of ctas CTAs, offline for sm_90a: the PTX strings' shared
    memory offsets match triton's allocation (else matmul_2d refuses to launch it), one
    multicast load of Y a K step, three slot releases (the loop's two and the tile's last;
    two with X in shared memory, x_smem) each arriving on every CTA's barrier, no GPU-scope
    fence but the four cluster syncs (start and end of both partitions), and the plain
    kernel's register, spill and hazard checks; fp16 too (a 16-bit output: the epilogue
    buffers halve and the barriers move down 16 KB)."""
    for report in _offline_reports(f"[register_fed_report(t, ctas={ctas}, x_smem={x_smem}, "
                                   f"dtype={dtype!r}) for t in (True, False)]"):
        assert report["offsets_ok"], report
        assert report["multicast_loads"] == 1, report
        assert report["remote_arrives"] == (2 if x_smem else 3) * ctas, report
        assert report["gpu_membars"] == 4, report  # 4 cluster syncs, nothing else
        assert report["mma"] == ("HGMMA.64x256x8.F32.TF32" if dtype == "fp32"
                                 else "HGMMA.64x256x16.F32"), report
        # Register-fed: two alternating four-register fragments; x_smem: none.
        assert len(report["a_registers"]) == (0 if x_smem else 8), report
        assert report["hazards"] == [], report
        assert report["spill_stores"] == 0 and "C7515" not in report["warnings"], report
        assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_the_rows_tile_compiles_without_spills_within_shared_memory(dtype):
    """rows_2d's variant (C^T stored, both operands read by wgmma from shared memory,
    ROWS_BQ Y rows, ROWS_STAGES slots), offline for sm_90a: 64xROWS_BQ wgmma, no register
    fragments (so no hazard to check), no spills, the ring within the H100's shared memory;
    and in 2-CTA clusters (probed, not dispatched) its shared memory where its PTX strings
    say: Y's ring first though the two rings are the same size."""
    one, clustered = _offline_reports(f"[register_fed_report(True, ctas=c, x_smem=True, "
                                      f"dtype={dtype!r}, rows=True) for c in (1, 2)]")
    bq = register_fed.ROWS_BQ
    for report in (one, clustered):
        assert report["mma"] == (f"HGMMA.64x{bq}x8.F32.TF32" if dtype == "fp32"
                                 else f"HGMMA.64x{bq}x16.F32"), report
        assert report["a_registers"] == [], report
        assert report["spill_stores"] == 0 and "C7515" not in report["warnings"], report
        assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem
    assert clustered["offsets_ok"] and clustered["multicast_loads"] == 1, clustered


def test_the_offset_check_refuses_ptx_whose_barriers_moved():
    """_check_offsets on the plain kernel's barrier layout (count-1 barriers only, at other
    offsets) raises, naming the constants to update."""
    ptx = ("add.s32 \t%r101, %r109, 196720;\n\t// begin inline asm\n"
           "\t@%p10 mbarrier.init.shared::cta.b64 [%r101], 1;\n")
    with pytest.raises(RuntimeError, match="WS_SCRATCH"):
        register_fed._check_offsets(ptx, 2)


@gpu_only
def test_a_cluster_kernel_whose_shared_memory_moved_runs_without_clusters(monkeypatch):
    """Where the compiled cluster kernel's offsets do not match its PTX strings (another
    triton, say), matmul_2d warns once and runs the kernel without clusters: nothing wrong
    is launched, the product is right, and later calls skip the clusters silently."""
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")

    def moved(ptx, ctas, *sizes):
        raise register_fed.ClusterUnavailable("register_fed: offsets moved (test)")

    monkeypatch.setattr(common, "_compiled", {})  # compile (and prepare) afresh
    monkeypatch.setattr(register_fed, "_clustered", set())
    monkeypatch.setattr(register_fed, "_clusters_unavailable", [])
    monkeypatch.setattr(register_fed, "_check_offsets", moved)
    a, b = randn(512, 256), randn(256, 768)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for call in range(2):
        out = torch.full((512, 768), float("nan"), device=a.device)
        if call == 0:
            with pytest.warns(RuntimeWarning, match="without clusters"):
                register_fed.matmul_2d(a, b, out, sms, ctas=2)
        else:
            register_fed.matmul_2d(a, b, out, sms, ctas=2)
        assert last_config() == RF_NAME  # no "_c2": one CTA a cluster
        assert_close(out, a.double() @ b.double(), torch.float32, "tf32", f"call {call}",
                     operands=(a, b))


@gpu_only
@pytest.mark.parametrize("ctas", [1, 2, 4])
@pytest.mark.parametrize("layout", ["nn", "tt", "nt"])
@pytest.mark.parametrize("m,n,k", [(256, 512, 1024), (300, 272, 1000), (1000, 1500, 1016),
                                   (384, 256, 96), (128, 640, 32), (4096, 4096, 4096),
                                   (1000, 4224, 2080)])
def test_register_fed_kernel_computes_the_product(layout, m, n, k, ctas):
    """Edges of both tile sides (TMA reads zeros past them, the store is masked), K past
    the last 32-deep step, an odd number of K steps (96, 32: the loop runs them in pairs),
    several tiles per program (4096^3 on 132 SMs); nt with both operands read by wgmma from
    shared memory (X_SMEM); in clusters of ctas, tile counts along P that are no multiple
    of ctas (300 x 272: 3 both ways, 1000 x 4224 nn: 33; a group's
    tiles past P read zeros and store nothing); NaN-poisoned output."""
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    a = randn(k, m).T if layout == "tt" else randn(m, k)
    b = randn(k, n) if layout == "nn" else randn(n, k).T
    out = torch.full((m, n), float("nan"), device=a.device)
    assert register_fed.supports(a, b, out)
    register_fed.matmul_2d(a, b, out, torch.cuda.get_device_properties(0).multi_processor_count,
                           ctas=ctas)
    name = ("gs" if layout == "nt" else "rf") + RF_NAME[2:] + (f"_c{ctas}" if ctas > 1 else "")
    assert last_config() == name
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32",
                 f"{layout} {m}x{n}x{k} ctas={ctas}",
                 operands=(a, b))


@gpu_only
@pytest.mark.parametrize("ctas", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(300, 272, 1000), (1000, 4224, 2080), (128, 640, 64),
                                   (2048, 2048, 2048)])
def test_register_fed_kernel_computes_16_bit_nt_products(dtype, m, n, k, ctas):
    """16-bit operands, nt only (both K-major, read by wgmma from shared memory; nn and tt
    would need an MN-major ring it lacks): tile edges, K past the last 64-deep step, an
    odd count of them, clusters whose last group runs past P, several tiles a program;
    NaN-poisoned output of the operands' dtype."""
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    a, b = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype).T
    out = torch.full((m, n), float("nan"), device=a.device, dtype=dtype)
    assert not register_fed.supports(a, b.contiguous(), out)  # nn
    assert register_fed.supports(a, b, out)
    register_fed.matmul_2d(a, b, out, torch.cuda.get_device_properties(0).multi_processor_count,
                           ctas=ctas)
    assert last_config() == f"gs_{register_fed.BP}x{register_fed.BQ}x{register_fed.BK * 2}" + (
        f"_c{ctas}" if ctas > 1 else "")
    assert_close(out, a.double() @ b.double(), dtype, None, f"{m}x{n}x{k} ctas={ctas}",
                 operands=(a, b))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "tt"])
def test_matmul_runs_large_tf32_nn_and_tt_products_register_fed(layout):
    """Through the public API: matmul takes the kernel, addmm (an epilogue) the copy."""
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    m = n = k = 2048
    a = randn(m, k) if layout == "nn" else randn(k, m).T
    b = randn(k, n) if layout == "nn" else randn(n, k).T
    out = triton_gemm.matmul(a, b, precision="tf32")
    assert last_config() == RF_NAME
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32", layout, operands=(a, b))
    bias = randn(n)
    out = triton_gemm.addmm(bias, a, b, precision="tf32")
    assert last_config() != RF_NAME
    assert_close(out, bias.double() + a.double() @ b.double(), torch.float32, "tf32",
                 f"{layout} addmm", operands=(a, b))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "tt", "rows"])
def test_register_fed_calls_replay_through_the_launch_cache(layout):
    """A second call of the signature on new operands is a replay (no planning, triton's
    launcher bypassed; its descriptors rebuilt around the new addresses) and still right;
    rows: rows_2d's C^T on 128 rows against a K-major weight of 86 tiles (dispatch.FED_ROWS)."""
    from triton_gemm import launch_cache
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    if not launch_cache.ENABLED:
        pytest.skip("TRITON_GEMM_LAUNCH_CACHE=0")
    m, n, k = (register_fed.ROWS_BQ, 11008, 1024) if layout == "rows" else (2048, 2048, 2048)
    name = (f"gst_{register_fed.BP}x{register_fed.ROWS_BQ}x{register_fed.BK}"
            f"_s{register_fed.ROWS_STAGES}" if layout == "rows" else RF_NAME)

    def operands():
        a = randn(1, k, m).mT if layout == "tt" else randn(1, m, k)
        b = randn(1, k, n) if layout == "nn" else randn(1, n, k).mT
        return a, b

    launch_cache.clear()
    replayed = launch_cache.stats["replayed"]
    for _ in range(3):
        a, b = operands()
        out = torch.full((1, m, n), float("nan"), device=a.device)
        launch_cache.run(a, b, out, None, alpha=1.0, beta=0.0, precision="tf32")
        assert last_config() == name
        assert_close(out, a.double() @ b.double(), torch.float32, "tf32", layout,
                     operands=(a[0], b[0]))
    assert launch_cache.stats["replayed"] - replayed == 2


@gpu_only
@pytest.mark.parametrize("layout,dtype", [("nn", torch.float32), ("tt", torch.float32),
                                          ("nt", torch.float32), ("nt", torch.float16),
                                          ("nt", torch.bfloat16)],
                         ids=["nn", "tt", "nt", "fp16-nt", "bf16-nt"])
@pytest.mark.parametrize("batch,m,n,k", [(3, 300, 272, 1000), (2, 256, 512, 96),
                                         (5, 132, 1000, 40), (32, 1000, 1000, 1000),
                                         (4, 1024, 1024, 2048)])
def test_batched_launch_computes_each_product(layout, dtype, batch, m, n, k):
    """register_fed.bmm on fresh N(0, 1) batches, NaN-poisoned output: tiles ragged at
    every product's edges (3-D TMA clips each box inside its product: no rows of the next
    one read or written), K past the last K step and an odd count of them, several
    products per program (32 x 1000^3 on 132 SMs); nt (both operands from shared memory)
    at tf32 and 16 bits too."""
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    a, b = _batch(batch, m, n, k, layout)
    a, b = a.to(dtype), b.to(dtype)
    out = torch.full((batch, m, n), float("nan"), device=DEVICE, dtype=dtype)
    assert register_fed.supports_batched(a, b, out)
    register_fed.bmm(a, b, out, torch.cuda.get_device_properties(0).multi_processor_count)
    bk = register_fed.BK * 4 // a.element_size()
    prefix = "gsb" if layout == "nt" else "rfb"
    assert last_config() == f"{prefix}_{register_fed.BP}x{register_fed.BQ}x{bk}"
    precision = "tf32" if dtype == torch.float32 else None
    assert_close(out, a.double() @ b.double(), dtype, precision,
                 f"{layout} {batch} x {m}x{n}x{k}", operands=(a[-1], b[-1]))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "tt"])
def test_bmm_runs_tf32_nn_and_tt_batches_register_fed(layout):
    """Through the public API: bmm and 4-D matmul take the batched launch, baddbmm (an
    epilogue) and a broadcast batch the K-major copy; a replay through the launch cache
    on new operands is right too."""
    from triton_gemm import launch_cache
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    name = "rfb" + RF_NAME[2:]
    replayed = launch_cache.stats["replayed"]
    for _ in range(2):  # the second call of the signature: a replay
        a, b = _batch(8, 768, 640, 1024, layout)
        out = triton_gemm.bmm(a, b, precision="tf32")
        assert last_config() == name
        assert_close(out, a.double() @ b.double(), torch.float32, "tf32", f"{layout} bmm",
                     operands=(a[0], b[0]))
    y = triton_gemm.matmul(a.reshape(2, 4, 768, 1024), b.reshape(2, 4, 1024, 640),
                           precision="tf32")
    assert last_config() == name
    assert_close(y.reshape(8, 768, 640), a.double() @ b.double(), torch.float32, "tf32",
                 f"{layout} 4-D matmul", operands=(a[0], b[0]))
    bias = randn(640)
    out = triton_gemm.baddbmm(bias, a, b, alpha=0.5, precision="tf32")
    assert last_config() != name
    assert_close(out, bias.double() + 0.5 * (a.double() @ b.double()), torch.float32, "tf32",
                 f"{layout} baddbmm", operands=(a[0], b[0]))
    shared = b[:1].expand(8, *b.shape[1:])
    out = triton_gemm.bmm(a, shared, precision="tf32")
    assert last_config() != name
    assert_close(out, a.double() @ shared.double(), torch.float32, "tf32",
                 f"{layout} broadcast B", operands=(a[0], b[0]))
    if launch_cache.ENABLED:  # the loop's second bmm replayed
        assert launch_cache.stats["replayed"] > replayed


@gpu_only
def test_bmm_runs_tf32_nt_batches_with_rows_off_align_register_fed():
    """tf32 nt batches whose rows (1000 fp32) would have both operands copied and padded:
    the batched launch reads them as given (both from shared memory), matching float64."""
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    a, b = _batch(4, 1000, 1000, 1000, "nt")
    out = torch.full((4, 1000, 1000), float("nan"), device=DEVICE)
    triton_gemm.bmm(a, b, precision="tf32", out=out)
    assert last_config() == f"gsb_{register_fed.BP}x{register_fed.BQ}x{register_fed.BK}"
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32", "nt 4 x 1000^3",
                 operands=(a[0], b[0]))


def _rows_plan(m, n, k, precision="tf32", layout="nt", batch=1, tma=True, sms=SMS):
    dtype = torch.float32 if precision in ("tf32", "tf32x3", "ieee") else torch.float16
    a = torch.empty(batch, m, k, dtype=dtype)
    b = (torch.empty(batch, n, k, dtype=dtype).transpose(1, 2) if layout == "nt"
         else torch.empty(batch, k, n, dtype=dtype))
    return dispatch.plan(a, b, precision, sms, tma)


@pytest.mark.parametrize("precision", ["tf32", "half"])
def test_few_rows_against_a_wide_k_major_weight_plan_rows_2d(precision, monkeypatch):
    """nt products of FED_ROWS_MIN_M .. ROWS_BQ rows against a weight of at least
    FED_ROWS_MIN_TILES_PER_SM tiles an SM plan rows_2d on top of the plan made otherwise
    (which run() keeps for the calls it cannot take); a row fewer or more, a tile fewer,
    another layout, a batch, tf32x3 or ieee, or no TMA, plan as before."""
    low, high = dispatch.FED_ROWS_MIN_M[precision], register_fed.ROWS_BQ
    tiles = math.ceil(dispatch.FED_ROWS_MIN_TILES_PER_SM[precision] * SMS)
    n, k = tiles * register_fed.BP, 4096
    for m in (low, high):
        p = _rows_plan(m, n, k, precision)
        assert p.fed_rows, (m, p)
        monkeypatch.setattr(dispatch, "FED_ROWS", False)
        assert p == _rows_plan(m, n, k, precision)._replace(fed_rows=True)
        monkeypatch.setattr(dispatch, "FED_ROWS", True)
    assert _rows_plan(high, n - register_fed.BP + 1, k, precision).fed_rows  # same tiles
    for args, kw in (((low - 1, n, k), {}), ((high + 1, n, k), {}),
                     ((high, n - register_fed.BP, k), {}), ((high, n, k), {"layout": "nn"}),
                     ((high, n, k), {"batch": 2}), ((high, n, k), {"tma": False})):
        assert not _rows_plan(*args, precision=precision, **kw).fed_rows, (args, kw)
    for other in ("tf32x3", "ieee"):
        assert not _rows_plan(high, n, k, other).fed_rows, other
    assert (dispatch.FED_ROWS_MIN_TILES_PER_SM["tf32"] * SMS
            <= 11008 / register_fed.BP)  # the llm suite's 128x11008x4096 tf32 row


def test_rows_2d_refuses_what_it_cannot_read():
    """supports_rows: off Hopper (the interpreter included) nothing; on it a row-major A of
    up to ROWS_BQ rows and a K-major B only, in one dtype, with rows TMA can address."""
    a, w = randn(128, 64, dtype=torch.float16), randn(256, 64, dtype=torch.float16)
    out = torch.empty(128, 256, device=a.device, dtype=a.dtype)
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        assert not register_fed.supports_rows(a, w.T, out)
        return
    assert register_fed.supports_rows(a, w.T, out)
    taller = randn(register_fed.ROWS_BQ + 1, 64, dtype=a.dtype)
    refused = {"rows": (taller, w.T, out.new_empty(taller.shape[0], 256)),
               "nn": (a, w.T.contiguous(), out), "tn": (a.T.contiguous().T, w.T, out),
               "dtype": (a, w.T, out.float()),
               "pitch": (a, randn(300, 64, dtype=a.dtype).T, out.new_empty(128, 300))}
    for name, args in refused.items():
        assert not register_fed.supports_rows(*args), name


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(128, 640, 1000), (100, 312, 64), (1, 256, 128),
                                   (128, 4224, 2080), (97, 33024, 96)])
def test_rows_2d_computes_the_product(dtype, m, n, k):
    """C^T = W A^T on ROWS_BQ-row tiles of A: fewer rows than the tile (TMA reads zeros
    past them, the transposed store clips them), columns past the last weight tile, K past
    the last step and an odd count of steps, several tiles a program (258 on 132 SMs);
    NaN-poisoned output of the operands' dtype."""
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    a, w = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype)
    out = torch.full((m, n), float("nan"), device=a.device, dtype=dtype)
    assert register_fed.supports_rows(a, w.T, out)
    assert not register_fed.supports_rows(a, w.T.contiguous(), out)  # nn
    assert not register_fed.supports_rows(randn(k, m, dtype=dtype).T, w.T, out)  # tn
    register_fed.rows_2d(a, w.T, out, torch.cuda.get_device_properties(0).multi_processor_count)
    bk = register_fed.BK * 4 // a.element_size()
    assert last_config() == (f"gst_{register_fed.BP}x{register_fed.ROWS_BQ}x{bk}"
                             f"_s{register_fed.ROWS_STAGES}")
    precision = "tf32" if dtype == torch.float32 else None
    assert_close(out, a.double() @ w.double().T, dtype, precision, f"{m}x{n}x{k}",
                 operands=(a, w.T))


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_runs_few_rows_on_rows_2d_and_bias_on_the_plan_behind(dtype):
    """matmul of the llm suite's 128x11008 rows (K cut to 1024) against a K-major weight
    takes rows_2d where the plan says so; linear with a bias (an epilogue rows_2d lacks)
    runs the plan made otherwise; both NaN-poisoned, both right."""
    m, n, k = register_fed.ROWS_BQ, 11008 if dtype == torch.float32 else 33024, 1024
    if not register_fed.supports(randn(8, 8), randn(8, 8), randn(8, 8)):
        pytest.skip("the register-fed kernel needs Hopper (sm_90)")
    a, w, bias = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype), randn(n, dtype=dtype)
    precision = "tf32" if dtype == torch.float32 else None
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert dispatch.plan(a[None], w.T[None], precision or "half", sms).fed_rows
    out = torch.full((m, n), float("nan"), device=a.device, dtype=dtype)
    triton_gemm.matmul(a, w.T, precision=precision, out=out)
    assert last_config().startswith("gst_"), last_config()
    assert_close(out, a.double() @ w.double().T, dtype, precision, "matmul", operands=(a, w.T))
    with_bias = triton_gemm.linear(a, w, bias, precision=precision)
    assert not last_config().startswith("gst_"), last_config()
    assert_close(with_bias, a.double() @ w.double().T + bias.double(), dtype, precision,
                 "linear with a bias", operands=(a, w.T))
