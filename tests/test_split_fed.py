"""kernels/split_fed.py: 3xTF32 with one operand split in registers. That the
compiled kernel's wgmmas run pipelined and hazard-free (offline sm_90a compile, no GPU),
which calls dispatch sends there, and the products themselves (GPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import DEVICE, gpu_only, randn, requires_kernels
from test_dispatch import _ops
import triton_gemm
from triton_gemm import dispatch, last_config
from triton_gemm.kernels import split_fed
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
SF_NAME = f"sf_{split_fed.BP}x{split_fed.BQ}x{split_fed.BK}"

_COMPILE = """
import json, re, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from triton.experimental.gluon import language as gl
from perf import sass_audit
from triton_gemm.kernels import split_fed as sf
def desc(block):
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.float32)
    return f"tensordesc<fp32[{block[0]}, {block[1]}],{layout!r}>"
x_k_major = sys.argv[1] == "1"
signature = {"x_desc": desc([sf.BP, sf.BK] if x_k_major else [sf.BK, sf.BP]),
             "y_desc": desc([sf.BQ, sf.BK]),
             "ylo_desc": desc([sf.BQ, sf.BK]), "c_desc": desc([sf.BQ // 8, sf.BP]),
             "P": "i32", "Q": "i32", "K": "i32", "d_ptr": "*fp32", "stride_dm": "i32",
             "stride_dn": "i32", "alpha": "fp32", "beta": "fp32"}
kernel = sass_audit.compile_gluon(sf._split_fed_kernel, signature,
                                  sf.kernel_constexprs(True, x_k_major, True, 4096),
                                  {"num_warps": sf.WARPS, "maxnreg": sf.MAX_REGISTERS})
with tempfile.TemporaryDirectory() as tmp:
    sass = sass_audit.sass_text(kernel.asm["cubin"], Path(tmp))
    report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a",
                                        sf.MAX_REGISTERS)
lines = sass.splitlines()
hgmma = [i for i, line in enumerate(lines) if "HGMMA." in line]
loop = lines[hgmma[0]:hgmma[-1]]
print(json.dumps({"shared": kernel.metadata.shared, **report, "hgmma": len(hgmma),
                  "loop_spills": sum(" STL" in line or " LDL" in line for line in loop),
                  "groups": sum("gsb0" in lines[i] for i in hgmma),
                  "shapes": sorted(set(re.findall(r"HGMMA\\.[\\w.]+", sass))),
                  "hazards": sass_audit.wgmma_register_hazards(sass)}))
"""


@pytest.mark.parametrize("x_k_major", [False, True])
def test_the_kernel_compiles_to_pipelined_hazard_free_wgmma(x_k_major):
    """Offline for sm_90a (a subprocess: triton.compile needs the interpreter off), X
    MN-major (nn, tt) and K-major (nt), with the epilogue's D: tf32 wgmma of 64 x BQ, one
    commit group per product of a K step (BK / 8 instructions each; ptxas serialises every
    wgmma when another instruction writes an accumulator between them, and each would then
    close a group of its own), no wgmma input register written while a wgmma may read it,
    no spills in the K loop (the epilogue's D pointers take 4 bytes of local memory with X
    K-major and C^T stored: a store and a load per tile), and the ring fits the H100's
    shared memory."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _COMPILE, str(int(x_k_major))], cwd=ROOT,
                          env=env, check=False,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["shapes"] == [f"HGMMA.64x{split_fed.BQ}x8.F32.TF32"], report
    assert report["hgmma"] == report["groups"] * (split_fed.BK // 8), report
    assert report["hazards"] == [], report
    assert report["loop_spills"] == 0, report
    assert report["spill_stores"] <= 4 and report["spill_loads"] <= 4, report
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, report


def _hopper() -> bool:
    return split_fed.supports(torch.empty(128, 64, device="cuda"),
                              torch.empty(64, 128, device="cuda"),
                              torch.empty(128, 128, device="cuda"))


def test_the_kernel_refuses_what_it_cannot_read():
    """supports(): never CPU tensors (nor the interpreter); on a Hopper GPU fp32 only, any
    layout (nt: X the operand with more rows; tn: Y staged), output rows of unit stride, and
    X's and C's rows as TMA reads and writes them."""
    a, b, out = torch.empty(128, 64), torch.empty(64, 128), torch.empty(128, 128)
    assert not split_fed.supports(a, b, out)
    assert split_fed.operands(a, b)[2:] == (True, False)  # nn: C^T = B^T A^T, X = B
    x, y, *flags = split_fed.operands(a.T.contiguous().T, b.T.contiguous().T)  # tt
    assert flags == [False, False] and x.shape == (64, 128) and y.shape == (128, 64)
    x, y, *flags = split_fed.operands(a, torch.empty(96, 64).T)  # nt, more rows in A
    assert flags == [False, True] and x.shape == (128, 64) and y.shape == (96, 64)
    x, y, *flags = split_fed.operands(a, torch.empty(256, 64).T)  # nt, more rows in B^T
    assert flags == [True, True] and x.shape == (256, 64) and y.shape == (128, 64)
    x, y, *flags = split_fed.operands(a.T.contiguous().T, b)  # tn: Y = A, M-major
    assert flags == [True, False] and x.shape == (64, 128) and split_fed.y_staged(y)
    assert not split_fed.y_staged(split_fed.operands(a, b)[1])
    if not (torch.cuda.is_available() and _hopper()):
        return
    a, b, out = a.cuda(), b.cuda(), out.cuda()
    assert split_fed.supports(a, b, out)
    assert split_fed.supports(a, b.T.contiguous().T, out)  # nt
    assert split_fed.supports(a.T.contiguous().T, b, out)  # tn
    assert not split_fed.supports(a.half(), b.half(), out.half())
    assert not split_fed.supports(a, b, torch.empty(128, 128, device="cuda").T)
    # B's rows (K of them, N apart) off 16 bytes: TMA cannot read them.
    assert not split_fed.supports(a, torch.empty(64, 129, device="cuda")[:, :127],
                                  torch.empty(128, 127, device="cuda"))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "tt", "nt", "tn"])
@pytest.mark.parametrize("m,n,k", [(128, 128, 16), (300, 272, 1000), (136, 520, 2052),
                                   (1000, 1500, 4096), (1500, 1000, 1024)])
def test_split_fed_kernel_computes_the_product(m, n, k, layout):
    """One tile; edges of both tile sides (TMA reads zeros past them and clips the store);
    K off the 16-deep step and off a flush period (K < 2048 flushes every 64, from 2048
    every 128), several tiles a program; every layout (tn with Y's halves staged, the others
    with its remainder); NaN-poisoned output, tf32x3's tolerance."""
    if not _hopper():
        pytest.skip("kernels/split_fed.py needs Hopper (sm_90)")
    a = randn(m, k) if layout[0] == "n" else randn(k, m).T
    b = randn(k, n) if layout[1] == "n" else randn(n, k).T
    out = torch.full((m, n), float("nan"), device=a.device)
    assert split_fed.supports(a, b, out)
    dispatch._split_fed_run(a, b, out)
    assert last_config() == SF_NAME
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32x3",
                 f"{layout} {m}x{n}x{k}", operands=(a, b))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "tt", "nt", "tn"])
def test_matmul_runs_large_tf32x3_products_on_the_split_fed_kernel(layout):
    """Through the public API: every layout takes the kernel where the staged split plan
    would run, addmm's alpha and beta * bias too; a fused activation (linear) takes the
    staged halves; all within tf32x3's tolerance."""
    if not _hopper():
        pytest.skip("kernels/split_fed.py needs Hopper (sm_90)")
    m, n, k = 2560, 2560, 1024
    a = randn(m, k) if layout[0] == "n" else randn(k, m).T
    b = randn(k, n) if layout[1] == "n" else randn(n, k).T
    out = triton_gemm.matmul(a, b, precision="tf32x3")
    assert last_config() == SF_NAME
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32x3", layout,
                 operands=(a, b))
    bias = randn(n)
    out = triton_gemm.addmm(bias, a, b, beta=0.5, alpha=-2.0, precision="tf32x3")
    assert last_config() == SF_NAME
    assert_close(out, 0.5 * bias.double() - 2.0 * (a.double() @ b.double()), torch.float32,
                 "tf32x3", f"{layout} addmm", operands=(a, b))
    out = triton_gemm.linear(a, b.T, bias, activation="relu", precision="tf32x3")
    assert last_config() != SF_NAME
    assert_close(out, torch.relu(bias.double() + a.double() @ b.double()), torch.float32,
                 "tf32x3", f"{layout} linear relu", operands=(a, b))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "tt", "nt", "tn"])
def test_operands_inside_wider_buffers(layout):
    """Operands that are views with padded row strides (16-byte multiples: TMA reads them
    in place), through the API: the kernel runs on them as given, NaN-poisoned out=."""
    if not _hopper():
        pytest.skip("kernels/split_fed.py needs Hopper (sm_90)")
    m, n, k = 2560, 2688, 1536
    a = randn(m, k + 12)[:, :k] if layout[0] == "n" else randn(k, m + 20)[:, :m].T
    b = randn(k, n + 8)[:, :n] if layout[1] == "n" else randn(n, k + 4)[:, :k].T
    out = torch.full((m, n), float("nan"), device=a.device)
    triton_gemm.matmul(a, b, precision="tf32x3", out=out)
    assert last_config() == SF_NAME
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32x3", f"{layout} views",
                 operands=(a, b))


@gpu_only
@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize("d_kind", ["row", "full", "nan_beta0"])
def test_the_epilogue_scales_and_adds_d(layout, d_kind):
    """alpha * A B + beta * D on the kernel, C stored transposed (nn) and not (nt, X = A):
    a broadcast bias row, a full D of its own strides (a transposed view), and beta = 0
    with a NaN D, which is ignored as torch ignores it. Ragged tiles; NaN-poisoned out."""
    if not _hopper():
        pytest.skip("kernels/split_fed.py needs Hopper (sm_90)")
    m, n, k = 300, 520, 1000
    a = randn(m, k)
    b = randn(k, n) if layout == "nn" else randn(n, k).T
    alpha, beta = -1.5, 0.25
    if d_kind == "row":
        d = randn(n).expand(m, n)
    elif d_kind == "full":
        d = randn(n, m).T
    else:
        d, beta = torch.full((m, n), float("nan"), device=a.device), 0.0
    out = torch.full((m, n), float("nan"), device=a.device)
    assert split_fed.supports(a, b, out, d)
    dispatch._split_fed_run(a, b, out, d, alpha=alpha, beta=beta)
    assert last_config() == SF_NAME
    ref = alpha * (a.double() @ b.double())
    if beta:
        ref = ref + beta * d.double()
    assert_close(out, ref, torch.float32, "tf32x3", f"{layout} {d_kind}", operands=(a, b))


def test_the_plan_tries_the_kernel_for_single_tf32x3_products_of_a_wave_of_tiles():
    """dispatch.plan marks tf32x3 products for the kernel (register_fed) on top of the plan
    made without it (the fallback): K at least SPLIT_TF32_MIN_K, C's rows 16-byte runs, at
    least a wave of 128 x 128 tiles, a single product; staged-split sizes and smaller ones
    alike (2048^3: the in-loop split beneath)."""
    sms = 132
    big = dispatch.plan(*_ops(4096, 4096, 4096), "tf32x3", sms)
    assert big == dispatch.SPLIT_FED_PLAN
    mid = dispatch.plan(*_ops(2048, 2048, 2048, "row", "col"), "tf32x3", sms)
    assert mid.register_fed and not mid.split_tf32
    assert mid._replace(register_fed=False) == dispatch._base_plan(
        *_ops(2048, 2048, 2048, "row", "col"), "tf32x3", sms, True)
    assert dispatch.plan(*_ops(1536, 1536, 1024), "tf32x3", sms).register_fed  # 144 tiles
    for shape in ((1024, 1024, 4096),      # 64 tiles
                  (8192, 8192, 1008),      # K under SPLIT_TF32_MIN_K
                  (4096, 4097, 4096),      # C's rows off 16 bytes
                  (64, 28672, 8192)):      # skinny: 224 tiles from N alone
        assert not dispatch.plan(*_ops(*shape), "tf32x3", sms).register_fed, shape
    for m in (1, 16):  # a linear layer's skinny products keep GEMV and split-K
        skinny = _ops(m, 28672, 8192, "row", "col")
        assert dispatch.plan(*skinny, "tf32x3", sms) == dispatch._base_plan(
            *skinny, "tf32x3", sms, True)
        assert dispatch.plan(*skinny, "tf32x3", sms).gemv == (m == 1)
    batch = (torch.empty(2, 2048, 2048), torch.empty(2, 2048, 2048))
    assert not dispatch.plan(*batch, "tf32x3", sms).register_fed
    assert not dispatch.plan(*_ops(4096, 4096, 4096), "tf32x3", sms, False).register_fed
    assert not dispatch.plan(*_ops(4096, 4096, 4096), "tf32", sms).split_tf32


@requires_kernels
@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_the_stage_copies_only_what_the_kernel_cannot_read(layout):
    """dispatch.split_fed_stage (the copy kernel, on the GPU or under the interpreter): nn
    reads Y (A) as given beside its remainder, within 2^-21 of A with A's low 13 bits
    dropped; tn (A M-major, not K-major) gets both halves, K-major, summing to A."""
    m, n, k = 48, 40, 72
    a, b = (t[0].normal_() for t in _ops(m, n, k, "row" if layout == "nn" else "col", "row",
                                         device=DEVICE))
    y_hi, y_lo = dispatch.split_fed_stage(a, b)
    assert y_hi.stride(1) == 1 and y_lo.stride(1) == 1
    if layout == "nn":
        assert not split_fed.y_staged(a) and y_hi.data_ptr() == a.data_ptr()
        hi = (a.contiguous().view(torch.int32) & -8192).view(torch.float32)  # wgmma's
    else:
        assert split_fed.y_staged(a)
        hi = y_hi[:, :k]
        assert torch.equal(hi + y_lo[:, :k], a)
    err = (hi.double() + y_lo[:, :k].double() - a.double()).abs()
    assert (err <= 2.0 ** -21 * a.double().abs()).all(), err.max()
