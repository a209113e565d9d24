"""kernels/batched.py: batches of products on a persistent TMA kernel over 3-D descriptors.
The kernel at both of its tiles, each B layout and precision, with each epilogue, C store
and batch layout (the interpreter and the GPU); what it refuses; its tile rule; dispatch's
plans (BATCHED); its sm_90a build (offline: wgmma, no spills, none serialised); the
library's batched calls that run there (GPU); the probe's operands."""

import sys
from pathlib import Path

import pytest
import torch

from conftest import DEVICE, gpu_only, offline_build, randn, requires_kernels, single_plan
import triton_gemm
from triton_gemm import dispatch, last_config
from triton_gemm.kernels import batched
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_CASES = [(torch.float16, False, False), (torch.float16, False, True),
          (torch.float16, True, False), (torch.float16, True, True),
          (torch.bfloat16, False, True), (torch.bfloat16, True, False),
          (torch.float32, False, True)]
_CASE_IDS = ["fp16-nn", "fp16-nt", "fp16-tn", "fp16-tt", "bf16-nt", "bf16-tn", "tf32-nt"]


def _a(batch, m, k, dtype, m_major):
    """(batch, M, K) A, or the same stored M-major (the transpose of a row-major (K, M))."""
    if m_major:
        return randn(batch, k, m, dtype=dtype).transpose(1, 2)
    return randn(batch, m, k, dtype=dtype)


def _b(batch, k, n, dtype, k_major):
    """(batch, K, N) B, or the same stored K-major (the transpose of a row-major (N, K))."""
    if k_major:
        return randn(batch, n, k, dtype=dtype).transpose(1, 2)
    return randn(batch, k, n, dtype=dtype)


def _reference(a, b, alpha=1.0, d=None, beta=0.0):
    ref = alpha * torch.bmm(a.double(), b.double())
    return ref if d is None else ref + beta * d.double()


@requires_kernels
@pytest.mark.parametrize("dtype,m_major,k_major", _CASES, ids=_CASE_IDS)
@pytest.mark.parametrize("n", [136, 392], ids=["narrow", "wide"])
def test_batched_product_at_both_tiles(dtype, m_major, k_major, n):
    """relu(alpha * A B + beta * bias) per product on a NaN-poisoned out: rows and columns
    past whole tiles (a 2-D view of the batch would read and write the next product's rows
    there; TMA clips each product), K past whole steps, more tiles than programs."""
    batch, m, k = 3, 136, 2 * 64 + 24
    a, b = _a(batch, m, k, dtype, m_major), _b(batch, k, n, dtype, k_major)
    bias = randn(n, dtype=dtype)
    out = torch.full((batch, m, n), float("nan"), dtype=dtype, device=a.device)
    assert batched.supports(a, b, out, "tf32")
    tile = batched.tile_for(batch, m, n, k, dtype, 2, m_major)
    assert tile == (batched.WIDE if n > 256 and dtype != torch.float32 else batched.NARROW)
    for call in range(2):  # the second on the cached compiled kernel
        out.fill_(float("nan"))
        batched.matmul_3d(a, b, out, bias, alpha=0.5, beta=2.0, activation=1, sms=2)
        assert last_config() == f"b_{tile[0]}x{tile[1]}x{tile[2] * 2 // a.element_size()}" \
                                f"_w{tile[3]}", last_config()
        assert_close(out, torch.relu(_reference(a, b, 0.5, bias, 2.0)), dtype, "tf32",
                     what=f"batched {tuple(out.shape)}, call {call}", operands=(a[0], b[0]))


def _d_inputs(batch, m, n):
    """Epilogue inputs of each D_MODES entry, broadcast to (batch, M, N), with the mode the
    kernel reads each in."""
    t = randn(batch, n, m, dtype=torch.float16).transpose(1, 2)
    return {"matrix": (randn(batch, m, n, dtype=torch.float16), batched.D_TMA),
            "mask": (randn(m, n, dtype=torch.float16).expand(batch, m, n), batched.D_TMA),
            "bias rows": (randn(batch, 1, n, dtype=torch.float16).expand(batch, m, n),
                          batched.D_ROW),
            "bias": (randn(n, dtype=torch.float16).expand(batch, m, n), batched.D_ROW),
            "transposed": (t, batched.D_POINTERS),
            "rows off 16 bytes": (randn(batch, m, n + 1, dtype=torch.float16)[:, :, 1:],
                                  batched.D_POINTERS)}


@requires_kernels
@pytest.mark.parametrize("n", [152, 392], ids=["narrow", "wide"])
def test_batched_product_with_each_d_strided_batches_and_pointer_stores(n):
    """A (seq, batch, dim)-style A and B (batch stride under the row stride, as attention's
    heads come); D per product, one mask for the batch (TMA, in halves on the wide tile),
    bias rows (a vector), transposed or on rows off 16 bytes (pointers); an out whose rows
    are off 16 bytes (stored by pointers; the column past N stays poisoned)."""
    batch, m, k = 2, 70, 40
    a = randn(m, batch, k, dtype=torch.float16).transpose(0, 1)  # batch stride k
    b = randn(k, batch, n, dtype=torch.float16).transpose(0, 1)
    for name, (d, mode) in _d_inputs(batch, m, n).items():
        assert batched._d_mode(True, d) == mode, name
        out = torch.full((batch, m, n), float("nan"), dtype=torch.float16, device=a.device)
        batched.matmul_3d(a, b, out, d, alpha=-1.0, beta=0.5, activation=4, sms=3)
        assert_close(out, torch.nn.functional.silu(_reference(a, b, -1.0, d, 0.5)),
                     torch.float16, what=f"batched, D {name}", operands=(a[0], b[0]))
    d = _d_inputs(batch, m, n)["matrix"][0]
    buffer = torch.full((batch, m, n + 1), float("nan"), dtype=torch.float16, device=a.device)
    out = buffer[:, :, :n]
    assert batched.supports(a, b, out, "tf32") and not batched._tma_ok(out, 2)
    batched.matmul_3d(a, b, out, d, alpha=-1.0, beta=0.5, sms=3)
    assert_close(out, _reference(a, b, -1.0, d, 0.5), torch.float16,
                 what="batched, pointer-stored C, matrix D", operands=(a[0], b[0]))
    assert torch.isnan(buffer[:, :, n]).all()


@requires_kernels
@pytest.mark.parametrize("k_major", [False, True], ids=["nn", "nt"])
def test_tall_tile(k_major):
    """The 256x128 tile (C in halves by TMA) over rows past one tile and ragged columns
    and K, on a NaN-poisoned out, with a bias row per product (a matrix D does not fit
    beside it: tile_for)."""
    batch, m, n, k = 2, 300, 200, 104
    a, b = _a(batch, m, k, torch.float16, False), _b(batch, k, n, torch.float16, k_major)
    d = randn(batch, 1, n, dtype=torch.float16)
    out = torch.full((batch, m, n), float("nan"), dtype=torch.float16, device=a.device)
    batched.matmul_3d(a, b, out, d, alpha=0.5, beta=-1.0, sms=3, tile=batched.TALL)
    assert last_config() == "b_256x128x64_w8", last_config()
    assert_close(out, _reference(a, b, 0.5, d, -1.0), torch.float16, what="tall tile",
                 operands=(a[0], b[0]))


def test_batched_refuses_what_it_cannot_read():
    """fp32 other than tf32 with a row-major A and a K-major B, a batch broadcast by a zero
    stride (not a TMA stride), rows off 16 bytes, a non-row-major out."""
    a = torch.empty(2, 64, 64, dtype=torch.float16)
    assert batched.supports(a, a, a, "tf32") == batched.INTERPRETER
    f = a.float()
    k_major = torch.empty(2, 64, 64).transpose(1, 2)
    assert batched.reads(f, k_major, "tf32")
    assert not batched.reads(f, f, "tf32")  # row-major B
    assert not batched.reads(f, k_major, "ieee") and not batched.reads(f, k_major, "tf32x3")
    assert batched.reads(a.transpose(1, 2), a, "tf32")  # M-major 16-bit A
    assert not batched.reads(f.transpose(1, 2), k_major, "tf32")  # M-major fp32 A
    assert not batched.reads(torch.empty(64, 64, dtype=torch.float16).expand(2, 64, 64), a,
                             "tf32")
    odd = torch.empty(2, 64, 65, dtype=torch.float16)[:, :, :63]  # rows of 130 bytes
    assert not batched.reads(odd, torch.empty(2, 63, 64, dtype=torch.float16), "tf32")
    assert not batched.supports(a, a, a.transpose(1, 2), "tf32")
    assert not batched.reads(torch.empty(64, 64, dtype=torch.float16), a, "tf32")  # 2-D
    # Products of 2^31 elements and more (32-bit offsets within one), read as strides only.
    huge = torch.empty(1 << 16, 1 << 15, dtype=torch.float16, device="meta").expand(2, -1, -1)
    assert batched._product_span(huge) == 1 << 31
    assert not batched.supports(a, a, huge, "tf32") and not batched.supports(a, a, a, "tf32",
                                                                             huge)
    assert batched._product_span(a) == 64 * 64


def test_d_modes():
    """How the epilogue reads D: one row (bias, a row per product) as a vector at any
    dtype; a row-major 16-bit matrix on 16-byte rows by TMA (per product or broadcast over
    the batch); fp32 matrices (their TMA box does not fit beside fp32 stages), rows off
    16 bytes, a transposed D and no D by pointers."""
    def mode(shape, dtype=torch.float16, has_d=True, view=lambda t: t):
        d = view(torch.empty(shape, dtype=dtype)).expand(4, 64, 64)
        return batched._d_mode(has_d, d)
    assert mode((64,)) == mode((4, 1, 64)) == mode((64,), torch.float32) == batched.D_ROW
    assert mode((4, 64, 64)) == mode((64, 64)) == batched.D_TMA
    assert mode((64, 64), torch.bfloat16) == batched.D_TMA
    assert mode((4, 64, 64), torch.float32) == batched.D_POINTERS
    assert mode((4, 64, 65), view=lambda t: t[:, :, 1:]) == batched.D_POINTERS
    assert mode((4, 64, 64), view=lambda t: t.transpose(1, 2)) == batched.D_POINTERS
    assert mode((4, 64, 64), has_d=False) == batched.D_POINTERS


def test_tile_rule():
    """The wide tile from WIDE_MIN_N columns where it covers no more of them than the
    narrow one (tf32 over a short K keeps the narrow one); where it covers more, the tall
    tile over a long K if it covers no more rows and fills the SMs' waves as well (16-bit,
    A row-major, no matrix D), else the narrow one."""
    def tile(batch, m, n, k, dtype=torch.float16, m_major=False, d_matrix=False):
        return batched.tile_for(batch, m, n, k, dtype, 132, m_major, d_matrix)
    assert tile(32, 2048, 2048, 128) == batched.WIDE
    assert tile(32, 2048, 392, 128) == batched.WIDE  # 512 columns either way
    assert tile(32, 2048, 2048, 128, torch.float32) == batched.NARROW
    assert tile(8, 2048, 2048, 2048, torch.float32) == batched.WIDE
    for n in (384, 640):  # 256-wide tiles would cover 512, 768
        assert tile(16, 2048, n, 2048) == batched.TALL, n
        assert tile(16, 2048, n, 2048, torch.bfloat16) == batched.TALL, n
        assert tile(16, 2048, n, 2048, m_major=True) == batched.NARROW, n
        assert tile(16, 2048, n, 2048, d_matrix=True) == batched.NARROW, n
        assert tile(16, 2048, n, 256) == batched.NARROW, n  # K under TALL_MIN_K
        assert tile(16, 2048, n, 2048, torch.float32) == batched.NARROW, n
    assert tile(16, 2048, 384, 512) == batched.TALL
    assert tile(8, 2048, 384, 4096) == batched.NARROW  # 192 tall tiles: 1.45 waves
    assert tile(16, 1000, 384, 2048) == batched.NARROW  # ditto
    assert tile(32, 384, 384, 2048) == batched.NARROW  # 512 rows against 384
    assert tile(32, 2048, 128, 2048) == batched.NARROW  # attn @ V
    assert tile(16, 2048, 136, 2048) == batched.NARROW
    assert tile(16, 2048, 255, 4096) == batched.NARROW


def test_batches_plan_the_batched_kernel(monkeypatch):
    """fp16 / bf16 batches in both B layouts, tf32 with a K-major B (as given, or staged
    from a row-major one where the plan copies it), and fp16 rows TMA takes as given (K =
    1000: no padded copy); small products, ieee, tf32x3, single products, a GPU without TMA
    and the switch off keep their plans."""
    batched_plan = dispatch.Plan(False, False, False, batched=True)
    for dtype in (torch.float16, torch.bfloat16):
        for b_k_major in (False, True):
            p = single_plan(2048, 2048, 128, dtype, b_k_major, batch=32)
            assert p == batched_plan, p
    assert single_plan(2048, 128, 2048, batch=32) == batched_plan
    tn = torch.empty(32, 2048, 2048, dtype=torch.float16)  # attention's dV = P^T dO
    assert dispatch.plan(tn.transpose(1, 2), tn[:, :, :128], "half", 132) == batched_plan
    assert single_plan(1000, 1000, 1000, batch=32) == batched_plan
    f32 = dict(dtype=torch.float32, precision="tf32", batch=8)
    assert single_plan(2048, 2048, 2048, b_k_major=True, **f32) == batched_plan
    assert single_plan(2048, 2048, 2048, **f32) == batched_plan._replace(
        b_k_major=True, register_fed=True)  # tests/test_register_fed.py
    assert not single_plan(64, 2048, 2048, batch=8).batched
    assert not single_plan(2048, 64, 2048, batch=8).batched
    assert not single_plan(2048, 2048, 2048, torch.float32, precision="ieee", batch=8).batched
    assert not single_plan(2048, 2048, 2048, torch.float32, True, 8, "tf32x3").batched
    assert not single_plan(2048, 2048, 2048).batched
    a = torch.empty(8, 2048, 2048, dtype=torch.float16)
    assert not dispatch.plan(a, a, "half", 132, tma=False).batched
    monkeypatch.setattr(dispatch, "BATCHED", False)
    assert not single_plan(2048, 2048, 128, batch=32).batched


_COMPILE = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from perf import sass_audit
from triton_gemm.kernels import batched as bt
tile, a_m_major, b_k_major, dtype, d_mode = json.loads(sys.argv[1])
bm, bn, bk16, warps, stages, sub = tile
size = 4 if dtype == "fp32" else 2
bk = bk16 * 2 // size
b_box = [1, bn, bk] if b_k_major else [1, bk, bn]
a_box = [1, bk, bm] if a_m_major else [1, bm, bk]
sig = {"a_desc": f"tensordesc<{dtype}{a_box}>", "b_desc": f"tensordesc<{dtype}{b_box}>",
       "c_desc": f"tensordesc<{dtype}[1, {bm}, {bn // 2 if sub else bn}]>",
       "d_desc": f"tensordesc<{dtype}[1, {bm}, {bn // 2 if sub else bn}]>",
       "c_ptr": f"*{dtype}", "d_ptr": f"*{dtype}", "BATCH": "i32", "M": "i32", "N": "i32",
       "K": "i32", "stride_cb": "i32", "stride_cm": "i32", "stride_db": "i32",
       "stride_dm": "i32", "stride_dn": "i32", "d_step": "i32", "alpha": "fp32",
       "beta": "fp32"}
const = {"PRECISION": "tf32", "HAS_D": d_mode is not None, "D_MODE": d_mode or 0,
         "ACTIVATION": 0, "A_M_MAJOR": a_m_major,
         "B_K_MAJOR": b_k_major,
         "UPCAST": False, "C_TMA": True, "EPILOGUE_SUBTILE": sub, "BM": bm, "BN": bn, "BK": bk,
         "GROUP_M": bt.GROUP_M, "DEPENDENT": True}
if d_mode == 0:  # D by pointers: unit columns, as the GPU specialises a stride of 1
    const["stride_dn"] = 1
kernel = sass_audit._compile(bt._batched_kernel, sig, const,
                             ["c_ptr", "d_ptr", "M", "N", "K", "stride_cb", "stride_cm"],
                             warps, stages)
with tempfile.TemporaryDirectory() as tmp:
    mma = sass_audit.mma_instructions(kernel.asm["cubin"], Path(tmp))
    report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a")
print(json.dumps({"shared": kernel.metadata.shared, "mma": mma, **report}))
"""

# Each tile without D in the layouts it runs; with each D mode it reads (a matrix D is
# not read beside the tall tile: tile_for).
_D_BUILDS = (("fp16", batched.D_ROW), ("fp16", batched.D_TMA), ("fp32", batched.D_ROW))
_BUILDS = [(tile, a_m_major, b_k_major, "fp16", None)
           for tile in (batched.WIDE, batched.NARROW)
           for a_m_major in (False, True) for b_k_major in (False, True)] + [
    (batched.NARROW, False, True, "fp32", None), (batched.WIDE, False, True, "fp32", None)] + [
    (batched.TALL, False, b_k_major, "fp16", None) for b_k_major in (False, True)] + [
    (tile, False, True, dtype, mode.value) for tile in (batched.WIDE, batched.NARROW)
    for dtype, mode in _D_BUILDS] + [(batched.TALL, False, True, "fp16", batched.D_ROW.value)]
_D_NAMES = {None: "", batched.D_ROW.value: "-d_row", batched.D_TMA.value: "-d_tma"}


@pytest.mark.parametrize("tile,a_m_major,b_k_major,dtype,d_mode", _BUILDS,
                         ids=[f"{t[0]}x{t[1]}-{'t' if am else 'n'}{'t' if bk else 'n'}-{d}"
                              f"{_D_NAMES[mode]}" for t, am, bk, d, mode in _BUILDS])
def test_the_kernel_compiles_to_wgmma_unserialised_without_spills(tile, a_m_major, b_k_major,
                                                                  dtype, d_mode):
    """Offline for sm_90a: HGMMA (not HMMA) as wide as the tile's warpgroups take, no ptxas
    note that it serialised them (C7514 / C7515), no spills, within the H100's shared
    memory."""
    report = offline_build(_COMPILE, list(tile), a_m_major, b_k_major, dtype, d_mode)
    assert f"HGMMA.64x{tile[1]}x" in report["mma"], report
    assert "HMMA" not in report["mma"].replace("HGMMA", ""), report
    assert "C7514" not in report["warnings"] and "C7515" not in report["warnings"], report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, report


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("n", [4104, 4008], ids=["narrow", "wide"])
def test_a_matrix_d_by_pointers_fits_shared_memory(dtype, n):
    """A matrix D the epilogue reads by pointers (fp32 always; 16-bit D off 16-byte rows),
    on the tile tile_for gives it, batches of 160 x n x 1025 (4104 columns: the narrow
    tile's; 4008: the wide one's without a D), D's row stride not a multiple of 16 elements:
    offline for sm_90a, within the H100's shared memory (the fp32 narrow tile with C whole
    asked for 262176 bytes and failed to launch)."""
    torch_dtype = torch.float32 if dtype == "fp32" else torch.float16
    tile = batched.tile_for(2, 160, n, 1025, torch_dtype, 132, d_matrix=True)
    report = offline_build(_COMPILE, list(tile), False, True, dtype, batched.D_POINTERS.value)
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, (tile, report)


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32],
                         ids=["fp16", "bf16", "tf32"])
def test_library_batched_calls_run_the_batched_kernel(dtype):
    """bmm (q @ k^T, K-major B), matmul of 4-D attention-shaped operands (attn @ V), bmm
    of an M-major A (P^T dO), baddbmm (a mask broadcast over the batch, out=) on Hopper:
    the batched kernel, matching float64 on NaN-poisoned outputs."""
    if not batched.hopper(torch.device("cuda")):
        pytest.skip("kernels/batched.py needs Hopper (sm_90)")
    precision = "tf32" if dtype == torch.float32 else None
    q, key = randn(2, 4, 256, 64, dtype=dtype), randn(2, 4, 384, 64, dtype=dtype)
    q3, k3 = q.reshape(8, 256, 64), key.reshape(8, 384, 64)
    scores = triton_gemm.bmm(q3, k3.transpose(1, 2), precision=precision)
    assert last_config().startswith("b_"), last_config()
    assert_close(scores, _reference(q3, k3.transpose(1, 2)), dtype, precision,
                 what="bmm q @ k^T", operands=(q3[0], k3[0].T))
    attn, v = randn(2, 4, 256, 384, dtype=dtype), randn(2, 4, 384, 128, dtype=dtype)
    y = triton_gemm.matmul(attn, v, precision=precision)
    if dtype != torch.float32:  # tf32 with a row-major V this small: the plain kernel
        assert last_config().startswith("b_"), last_config()
    assert_close(y, (attn.double() @ v.double()), dtype, precision, what="matmul attn @ V",
                 operands=(attn[0, 0], v[0, 0]))
    if dtype != torch.float32:  # attention's dV = P^T dO: an M-major A (tf32: staged)
        d_out = randn(8, 256, 128, dtype=dtype)
        p_t = attn.reshape(8, 256, 384).transpose(1, 2)
        dv = triton_gemm.bmm(p_t, d_out)
        assert last_config().startswith("b_"), last_config()
        assert_close(dv, _reference(p_t, d_out), dtype, what="bmm P^T dO",
                     operands=(p_t[0], d_out[0]))
    mask = randn(256, 384, dtype=dtype)
    out = torch.full((8, 256, 384), float("nan"), dtype=dtype, device=DEVICE)
    triton_gemm.baddbmm(mask, q3, k3.transpose(1, 2), beta=1.0, alpha=0.125,
                        precision=precision, out=out)
    assert last_config().startswith("b_"), last_config()
    assert_close(out, _reference(q3, k3.transpose(1, 2), 0.125, mask, 1.0), dtype, precision,
                 what="baddbmm with a mask", operands=(q3[0], k3[0].T))


@gpu_only
def test_library_runs_the_tall_tile_where_its_rule_says(monkeypatch):
    """bmm and baddbmm (a bias row per product) of 384 columns over K = 512, a wave of tall
    tiles per 128-row pair: the tall tile on Hopper, matching float64. (The plain bmm runs
    ping-pong as planned, dispatch.PINGPONG: switched off here, and the launch cache
    cleared around it, so the batched kernel's own rule is what runs.)"""
    from triton_gemm import dispatch, launch_cache
    if not batched.hopper(torch.device("cuda")):
        pytest.skip("kernels/batched.py needs Hopper (sm_90)")
    from triton_gemm.kernels.persistent import gpu_sms
    monkeypatch.setattr(dispatch, "PINGPONG", False)
    launch_cache.clear()
    batch = gpu_sms(torch.device("cuda"))[0]
    a, b = randn(batch, 256, 512, dtype=torch.float16), randn(batch, 512, 384,
                                                              dtype=torch.float16)
    out = triton_gemm.bmm(a, b)
    assert last_config() == "b_256x128x64_w8", last_config()
    assert_close(out, _reference(a, b), torch.float16, what="bmm, tall tile",
                 operands=(a[0], b[0]))
    alibi = randn(batch, 1, 384, dtype=torch.float16)
    out = triton_gemm.baddbmm(alibi, a, b, alpha=0.125)
    assert last_config() == "b_256x128x64_w8", last_config()
    assert_close(out, _reference(a, b, 0.125, alibi, 1.0), torch.float16,
                 what="baddbmm, tall tile", operands=(a[0], b[0]))
    launch_cache.clear()


@gpu_only
def test_the_probe_operands_and_its_run(capsys):
    """perf/batched_probe.py's operands (nt: a K-major B) and short runs of it, bmm and
    baddbmm with a bias row per product: the library's line timed (its output checked),
    the pinned tile's D read as a vector and by pointers."""
    from perf import batched_probe
    a, b = batched_probe.operands("2,256,256,64,nt", torch.float16)
    assert a.shape == (2, 256, 64) and b.shape == (2, 64, 256) and b.stride(1) == 1
    a, b = batched_probe.operands("2,256,128,64,tn", torch.float16)
    assert a.shape == (2, 256, 64) and a.stride(1) == 1 and b.stride(2) == 1
    assert batched_probe.main(["--case", "2,256,256,64,nt", "--tiles", "128,128,64,4,4,0",
                               "--rounds", "1"]) == 0
    capsys.readouterr()
    assert batched_probe.main(["--case", "2,256,256,64,nt", "--tiles", "128,128,64,4,4,0",
                               "--rounds", "1", "--d", "rows"]) == 0
    printed = capsys.readouterr().out
    for line in ("library", "plain", "128,128,64,4,4,0", "128,128,64,4,4,0 ptr"):
        assert f"graph 2,256,256,64,nt {line} " in printed, printed
