"""fp32 FMA (`precision="ieee"`) products on Hopper with a TMA warp of its own: the compute
warps issue nothing but shared-memory loads and FFMA.

A^T (K, M) and B (K, N), both row-major (an M-major A: the library's FMA copy, or `a.t()`
as given), land by TMA in a ring of STAGES slots of [BK, BM] and [BK, BN]; each K row of a
slot is an outer product, every thread taking 4-wide runs of A's column and B's row (two
and four 16-byte loads) into its 8 x 16 outputs. TMA writes the slots unswizzled, as rows;
they are read back through a plain row-major view (Gluon takes an unswizzled NVMMA layout
for wgmma's core-matrix tiling), and one K row's runs fall on distinct banks.

Why not tl.dot's FMA path (kernels/matmul.py's SIMT tiles): every thread there issues its
own loads and address arithmetic and waits on them; Nsight Compute put its issue slots at
72.7% busy against cuBLAS SGEMM's 88% (README, "The CUDA ladder"). perf/simt_gluon_probe.py
(the same kernel on a staged A^T), H100, eager after an L2 flush, three interleaved rounds,
TFLOPS (4096^3 / 8192^3; cuBLAS SGEMM 51.5-51.6 / 51.6-51.7; the library's path then 47.6 /
48.9): 128x256x32 in 3 stages 50.8 / 52.8, 4 stages 51.1 / 52.6; 128x256x16 s4 50.5 / 50.9,
s6 50.5 / 50.8; 128x256x8 s4 47.5 / 47.8; 256x128x16 s4 50.5 / 50.8; 256x128x32 s3 49.4 /
50.3; 128x128x8 s4 45.7 / 46.1 (thirty-ninth session). Deeper K steps pay: each costs a
wait, a CTA barrier and an arrive.

A row-major (K-major) A read as given (A_K_MAJOR): 128-byte-swizzled [BM, BK] boxes, a
thread's rows 8 WM apart (a warp's eight rows differ mod 8: conflict-free), 4 K deep a
16-byte load, the columns taken out of those runs by register renaming (offline: the same
FFMA and LDS.128 counts, no shuffles). Slower than a staged A^T where A^T's copy is cheap:
the probe, H100, 4096^3 / 8192^3 47.7 / 48.1 TFLOPS against 52.2 / 52.9 (cuBLAS 51.6 /
51.6); Nsight Compute at 4096^3 (clocks locked, 1.59 GHz) 3.58 ms against 3.27 (cuBLAS
3.29), issue slots busy 75% against 82%, dispatch stalls 0.45 against 0.28 cycles an
instruction (fortieth session). So large products keep the copy; split_matmul runs the
K-major path where A is a linear layer's weight and the product skinny (C^T = W A^T, A's
few rows copied as B), and where a row-major A and B meet over a long K with few output
tiles (C = A B as given, no copy): in K slices of one wave, their partials summed by
splitk.reduce with the epilogue (dispatch.K_MAJOR_FMA_MIN_N and K_MAJOR_AS_GIVEN_MIN_MN have
the figures). There it runs ~73% of the FMA peak: Nsight Compute (H100, C^T 4096x128x11008
on 256x64 tiles, 1.59 GHz) put compute throughput at 76.7%, no eligible warp in 20% of
cycles, and of the 3.75 cycles a warp waited per instruction 0.97 on the CTA barrier before
each slot's release. Not kept: releasing slots a warp at a time (an mbarrier counting the
eight warps, each warp's first lane arriving by PTX at the barrier's shared memory offset,
no CTA barrier left in the loop) moved the path by 0.3-0.7% (graph time, three interleaved
rounds, us, per-warp / CTA barrier: 4096x128x11008 261.6 / 262.9, 8192x64x8192 195.1 /
195.9, 4096x128x4096 107.0 / 107.7): the warps then wait elsewhere (forty-second session).

Hopper only (TMA, setmaxnreg); no interpreter. No epilogue in the kernel: matmul_2d computes
out = A B; split_matmul's reduce applies one.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .common import INTERPRETER, cdiv, hopper, needs_int64, record, run_kernel, workspace
from .persistent import _tma_ok, tile_origin
from .register_fed import claim_slot, max_registers, ring_barriers
from .splitk import reduce

# The tile (perf/simt_gluon_probe.py above): 8 compute warps of 8 x 16 outputs a thread,
# 48 KB a slot. GROUP_M: tiles in persistent.tile_origin's grouped order, groups of 8 tile
# rows as configs.GROUP_M (not re-measured here; the measured shapes' groups are all 8).
BM, BN, BK, STAGES, GROUP_M, WARPS = 128, 256, 32, 3, 8, 8
# One program a tile: a partial last wave costs a whole one. The report (H100, eager,
# against cuBLAS SGEMM; this kernel's plan against the plain kernel's SIMT tiles before it;
# share of the waves filled, 132 SMs): 4096^3 0.99x vs 0.92x (0.97), 6144^3 1.02x (0.97),
# 8192^3 1.02x vs 0.95x (0.97), 4096^3 on padded strides 1.06x vs 1.03x (0.97); 4097^3 0.90x
# vs 1.04x (0.85), 4104^3 0.89x vs 0.96x (0.85), 3000^3 0.81x vs 1.06x (0.73); so from 0.9.
WAVE_FILL = 0.9
# K-major A (a linear layer's weight, the first operand of a skinny product transposed,
# C^T = W A^T): tiles (BM, BN, WM, STAGES), 8 x 8 and 8 x 16 outputs a thread, of which
# k_major_plan picks one and a slice count per shape. perf/simt_gluon_probe.py
# --k-major, H100, eager after an L2 flush, three interleaved rounds, us, 256x64 / 256x128 /
# 128x128 (WM 2) / 256x128 in 3 stages, each in the slices that fill a wave (cuBLAS SGEMM):
# C^T 4096x128x11008 267.9 / 274.8 / 268.0 / 274.5 (241.0); 4096x256x4096 204.2 / 212.0 /
# 205.1 / 211.7 (186.3); 8192x64x8192 201.5 (208.8; 256x128's idle half 381.6); 11008x128x4096
# (86 tiles of 256x64 unsliced) 375.9 against 256x128 in 3 slices 264.8 (245.7): the slice
# count matters more than the tile, so both tiles stay and k_major_plan weighs their waves.
# Three stages, not four (same probe, --graph, 256x64 in 4 / 5 / 3 stages, us): 4096x128x11008
# 266.7 / 262.4 / 262.3, 4096x256x4096 201.6 / 198.4 / 198.5, 8192x64x8192 200.2 / 197.3 /
# 196.9 (six do not fit); 256x128 (eager, above) 274.8 / - / 274.5, 212.0 / - / 211.7.
# Eight compute warps, not sixteen (graph time, us, 256x64 in 3 stages on 8 warps / 16 with
# WM 8 / 16 with WM 4 / 128x64 on 16; 4 x 8 outputs a thread on 16, 96 registers, no
# spills): 4096x128x11008 261.4 / 292.4 / 283.0 / 340.8, 8192x64x8192 194.8 / 220.4 / 211.2
# / 253.1, 11008x128x4096 263.1 / 294.1 / 284.6 / 346.7.
# 128x128 (WM 2) last, so it wins only where it costs less, not ties: it ran level with
# 256x64 above and takes products of 128 rows whole (C = A B as given, 128x128x65536 in 128
# slices of 512: 57.3 us against 99.8 on 256x64, half its rows idle; H200, graph time).
K_MAJOR_TILES = ((256, 64, 4, 3), (256, 128, 4, 3), (128, 128, 2, 3))
# k_major_plan's cost of a slice an output element: its partial's 8 bytes (written, then
# read by the reduce) at ~2.5 TB/s, in one SM's FMAs over that time (~0.75 x 128 a cycle
# at ~1.7 GHz: the rate the probe's 256x64 tiles ran).
K_MAJOR_SLICE_COST = 8 * 0.75 * 128 * 1.7e9 / 2.5e12
# Most slices k_major_plan weighs (its cost prices their partials' traffic), and the
# shallowest slice it cuts: a long-K product of few tiles (C = A B as given) fills a wave
# only in many slices. perf/simt_gluon_probe.py --as-given --graph, H200, three interleaved
# rounds, us, the plan's slices at most 16 / 32 / 128 (cuBLAS SGEMM; the split-K kernel as
# dispatched before): 256x256x32768 on 256x64 189.2 / 101.7 / 102.0 (98.2; 111.7);
# 128x128x65536 on 128x128 - / 188.5 / 57.3 (66.2; 64.3); 128x128x16384 on 128x128 in
# 128 slices of 128 (four K steps) 23.8 (25.2; 24.0). The LLM shapes' plans are the same
# at 16 and 128 (their waves fill in at most four slices).
K_MAJOR_MAX_SPLIT = 128
K_MAJOR_MIN_SLICE = 128
# The TMA warp's registers; the compute warps get the rest (240 a thread).
LOADER_REGS = 24
# A slot read back as rows (see the module docstring).
ROWS = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))


@gluon.jit
def _work(M, N, K, K_SLICE, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
          GROUP_M: gl.constexpr):
    """(row, column, slice, first K, K steps) of this program: programs walk the tiles in
    persistent.tile_origin's grouped order, slice by slice of K_SLICE (a multiple of BK)."""
    tiles_m = gl.cdiv(M, BM)
    tiles_n = gl.cdiv(N, BN)
    pid = gl.program_id(0)
    s = pid // (tiles_m * tiles_n)
    off_m, off_n = tile_origin(pid % (tiles_m * tiles_n), tiles_m, tiles_n, BM, BN, GROUP_M)
    k0 = s * K_SLICE
    return off_m, off_n, s, k0, gl.cdiv(gl.minimum(K - k0, K_SLICE), BK)


@gluon.jit
def _loader(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, K_SLICE, c_ptr,
            stride_cm, stride_cs, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
            GROUP_M: gl.constexpr, A_K_MAJOR: gl.constexpr, WM: gl.constexpr,
            STORE_T: gl.constexpr):
    """The TMA warp: each K step's A (A^T, or A itself where K-major) and B tiles into the
    ring once the compute warps have handed the slot back; past K, TMA fills zeros."""
    off_m, off_n, _, k0, steps = _work(M, N, K, K_SLICE, BM, BN, BK, GROUP_M)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for i in range(steps):
        slot = claim_slot(ready, empty, i, nbytes)
        k = k0 + i * BK
        if A_K_MAJOR:
            tma.async_copy_global_to_shared(a_desc, [off_m, k], ready.index(slot),
                                            a_ring.index(slot))
        else:
            tma.async_copy_global_to_shared(a_desc, [k, off_m], ready.index(slot),
                                            a_ring.index(slot))
        tma.async_copy_global_to_shared(b_desc, [k, off_n], ready.index(slot),
                                        b_ring.index(slot))


@gluon.jit
def _outer(a_col, b_s, k: gl.constexpr, acc):
    """acc + the outer product of A's column a_col ([BM]) and B's row k."""
    layout: gl.constexpr = acc.type.layout
    a = gl.expand_dims(gl.convert_layout(a_col, gl.SliceLayout(1, layout)), 1)
    b = b_s.slice(k, 1, dim=0).load(layout)  # [1, BN]
    return gl.fma(a, b, acc)


@gluon.jit
def _compute(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, K_SLICE, c_ptr,
             stride_cm, stride_cs, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
             GROUP_M: gl.constexpr, A_K_MAJOR: gl.constexpr, WM: gl.constexpr,
             STORE_T: gl.constexpr):
    """The compute warps: BK outer products a slot, then the tile to C (to its slice's
    plane of C) by pointer stores (16 bytes a thread a run; with STORE_T a warp's 32-byte
    runs down C^T's columns)."""
    STAGES: gl.constexpr = a_ring.type.shape[0]
    NW: gl.constexpr = gl.num_warps()
    off_m, off_n, s, _, steps = _work(M, N, K, K_SLICE, BM, BN, BK, GROUP_M)
    # M-major A: 4x4 runs a thread, 8 x 4 threads a warp, warps 2 x NW / 2: the CTA's 64 x
    # 8 NW block repeats over the tile, so a thread holds (BM / 64) x (BN / (8 NW)) runs; a
    # K row's A runs are 8 distinct 16-byte loads a warp, its B runs 4. K-major A: a
    # thread's rows 8 WM apart, so a warp's eight rows differ mod 8 and its 16-byte loads of
    # four K columns fall on distinct banks of the 128-byte swizzle.
    acc_layout: gl.constexpr = (gl.BlockedLayout([1, 4], [8, 4], [WM, NW // WM], [1, 0])
                                if A_K_MAJOR else
                                gl.BlockedLayout([4, 4], [8, 4], [2, NW // 2], [1, 0]))
    acc = gl.zeros([BM, BN], gl.float32, acc_layout)
    for i in range(steps):
        slot = i % STAGES
        mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
        b_s = b_ring.index(slot)._reinterpret(gl.float32, [BK, BN], ROWS)
        if A_K_MAJOR:
            # Four K columns a 16-byte load, split into columns by register renaming (the
            # split's layouts are acc_layout's rows: the conversions move nothing).
            a_s = a_ring.index(slot)
            for kk in gl.static_range(0, BK, 4):
                a4 = a_s.slice(kk, 4, dim=1).load(acc_layout)  # [BM, 4]
                x0, x1 = gl.split(a4.reshape([BM, 2, 2]))  # K columns {0, 2}, {1, 3}
                c0, c2 = gl.split(x0)
                c1, c3 = gl.split(x1)
                acc = _outer(c0, b_s, kk, acc)
                acc = _outer(c1, b_s, kk + 1, acc)
                acc = _outer(c2, b_s, kk + 2, acc)
                acc = _outer(c3, b_s, kk + 3, acc)
        else:
            a_t = a_ring.index(slot)._reinterpret(gl.float32, [BK, BM], ROWS)
            for kk in gl.static_range(BK):
                a = a_t.slice(kk, 1, dim=0).permute((1, 0)).load(acc_layout)  # [BM, 1]
                b = b_s.slice(kk, 1, dim=0).load(acc_layout)  # [1, BN]
                acc = gl.fma(a, b, acc)
        gl.thread_barrier()  # every warp done with the slot
        mbarrier.arrive(empty.index(slot))
    rows = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    if STORE_T:  # C^T: a warp's eight rows a 32-byte run of each column
        ptrs = c_ptr + s * stride_cs + cols[None, :] * stride_cm + rows[:, None]
    else:
        ptrs = c_ptr + s * stride_cs + rows[:, None] * stride_cm + cols[None, :]
    gl.store(ptrs, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@gluon.jit
def _simt_tma_kernel(a_desc, b_desc, c_ptr, M, N, K, K_SLICE, stride_cm, stride_cs,
                     BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                     STAGES: gl.constexpr, GROUP_M: gl.constexpr, LOADER_REGS: gl.constexpr,
                     A_K_MAJOR: gl.constexpr = False, WM: gl.constexpr = 2,
                     STORE_T: gl.constexpr = False):
    """C[:M, :N] = A B in fp32 FMA for A^T (K, M) through a_desc ([BK, BM] boxes; with
    A_K_MAJOR A (M, K) itself, [BM, BK] boxes in the 128-byte swizzle), B (K, N) through
    b_desc ([BK, BN]) and C row-major with row stride stride_cm; one program a tile and K
    slice of K_SLICE, slice s's product stored at C + s * stride_cs (STORE_T: as C^T, row
    stride stride_cm). WM: warps along M of a K-major A's tile."""
    if A_K_MAJOR:
        a_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BM, BK], a_desc.layout)
    else:
        a_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BK, BM], a_desc.layout)
    b_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BK, BN], b_desc.layout)
    ready, empty = ring_barriers(STAGES)
    gl.warp_specialize([
        (_compute, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, K_SLICE, c_ptr,
                    stride_cm, stride_cs, BM, BN, BK, GROUP_M, A_K_MAJOR, WM, STORE_T)),
        (_loader, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, K_SLICE, c_ptr,
                   stride_cm, stride_cs, BM, BN, BK, GROUP_M, A_K_MAJOR, WM, STORE_T)),
    ], [1], [LOADER_REGS])


def _descriptor(t: torch.Tensor, block: list) -> TensorDescriptor:
    """A TMA descriptor writing unswizzled rows (see the module docstring)."""
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block,
                            gl.NVMMASharedLayout(0, 32, rank=2))


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether fp32 a (M, K) stored M-major, b (K, N) row-major and a fp32 out (M, N) with
    unit column stride, a and b as TMA reads them (16-byte aligned base and row stride),
    can run here: on a Hopper GPU, outside the interpreter, with out's element offsets
    within int32 (the store computes them so; the plain kernel takes larger outputs)."""
    if INTERPRETER or not (a.dtype == b.dtype == out.dtype == torch.float32):
        return False
    if a.dim() != 2 or b.dim() != 2 or out.dim() != 2 or min(a.shape + b.shape) == 0:
        return False
    if needs_int64(out):
        return False
    return (a.stride(0) == 1 and b.stride(1) == 1 and out.stride(1) == 1
            and hopper(a.device) and _tma_ok(a.T, a.stride(1)) and _tma_ok(b, b.stride(0)))


def fills_waves(m: int, n: int, sms: int) -> bool:
    """Whether an (m, n) output's tiles fill at least WAVE_FILL of the waves of sms
    programs they take (one program a tile, one an SM)."""
    tiles = cdiv(m, BM) * cdiv(n, BN)
    return tiles >= WAVE_FILL * cdiv(tiles, sms) * sms


def matmul_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out = a @ b in fp32 FMA for operands supports() accepts (b may hold columns past
    out's, which are computed and not stored). Returns out."""
    m, n, k = out.shape[0], out.shape[1], a.shape[1]
    args = (_descriptor(a.T, [BK, BM]), _descriptor(b, [BK, BN]), out, m, n, k, k,
            out.stride(0), 0)
    constexprs = {"BM": BM, "BN": BN, "BK": BK, "STAGES": STAGES, "GROUP_M": GROUP_M,
                  "LOADER_REGS": LOADER_REGS, "A_K_MAJOR": False, "WM": 2, "STORE_T": False,
                  "num_warps": WARPS, "maxnreg": max_registers(WARPS)}
    run_kernel(_simt_tma_kernel, (cdiv(m, BM) * cdiv(n, BN),), args, constexprs)
    record(triton.Config({"SIMT_TMA": True, "BM": BM, "BN": BN, "BK": BK},
                         num_warps=WARPS, num_stages=STAGES), "simt")
    return out


def k_major_plan(m: int, n: int, k: int, sms: int) -> tuple:
    """(BM, BN, WM, STAGES, slices, K per slice) for a K-major A's (m, n, k) product: the
    tile of K_MAJOR_TILES and slice count (slices at least K_MAJOR_MIN_SLICE deep, where K
    allows) whose waves of sms programs (one an SM) take the fewest FMA cycles, the
    partials' traffic counted (K_MAJOR_SLICE_COST). Memoised with the module's constants in
    the key (the probes set them): ~100 us of Python a plan at 128 slices."""
    return _k_major_plan(m, n, k, sms, K_MAJOR_TILES, K_MAJOR_MAX_SPLIT, K_MAJOR_MIN_SLICE)


@functools.lru_cache(maxsize=4096)
def _k_major_plan(m, n, k, sms, tiles, max_split, min_slice) -> tuple:
    best = None
    for bm, bn, wm, stages in tiles:
        tile_count = cdiv(m, bm) * cdiv(n, bn)
        for split in range(1, min(max_split, max(k // min_slice, 1)) + 1):
            k_slice = cdiv(cdiv(k, split), BK) * BK
            split = cdiv(k, k_slice)
            waves = cdiv(tile_count * split, sms)
            cost = waves * bm * bn * k_slice + K_MAJOR_SLICE_COST * split * m * n
            if best is None or cost < best[0]:
                best = (cost, (bm, bn, wm, stages, split, k_slice))
    return best[1]


def supports_k_major(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether fp32 a (M, K) row-major (K-major), b (K, N) row-major and a fp32 out (M, N)
    can run on split_matmul: a and b as TMA reads them, on a Hopper GPU, outside the
    interpreter, the partials' element offsets within int32 (computed so)."""
    if INTERPRETER or not (a.dtype == b.dtype == out.dtype == torch.float32):
        return False
    if a.dim() != 2 or b.dim() != 2 or out.dim() != 2 or min(a.shape + b.shape) == 0:
        return False
    if out.shape[0] * out.shape[1] * min(cdiv(a.shape[1], BK), K_MAJOR_MAX_SPLIT) >= 2**31:
        return False  # the partials' offsets: a bound on k_major_plan's slices, which it
        # cuts no finer than a K step and no more than K_MAJOR_MAX_SPLIT (often fewer)
    return (a.stride(1) == 1 and b.stride(1) == 1 and hopper(a.device)
            and _tma_ok(a, a.stride(0)) and _tma_ok(b, b.stride(0)))


def split_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                 d: torch.Tensor | None = None, *, alpha: float = 1.0, beta: float = 0.0,
                 activation: int = 0, sms: int) -> torch.Tensor:
    """out = act(alpha * a @ b + beta * d) in fp32 FMA for a K-major a (M, K) and operands
    supports_k_major() accepts, any strides of out and d: K slices' partials (k_major_plan
    over sms SMs) stored in out's memory order, then splitk.reduce sums them in one fixed
    order (bitwise reproducible) with the epilogue. Returns out."""
    m, n, k = out.shape[0], out.shape[1], a.shape[1]
    bm, bn, wm, stages, split, k_slice = k_major_plan(m, n, k, sms)
    store_t = out.stride(0) == 1 and out.stride(1) != 1  # C^T of a row-major C
    work = workspace((split, n, m) if store_t else (split, m, n), torch.float32, a.device)
    swizzled = gl.NVMMASharedLayout(128, 32, rank=2)
    args = (TensorDescriptor(a, list(a.shape), list(a.stride()), [bm, BK], swizzled),
            _descriptor(b, [BK, bn]), work, m, n, k, k_slice, m if store_t else n, m * n)
    constexprs = {"BM": bm, "BN": bn, "BK": BK, "STAGES": stages, "GROUP_M": GROUP_M,
                  "LOADER_REGS": LOADER_REGS, "A_K_MAJOR": True, "WM": wm,
                  "STORE_T": store_t, "num_warps": WARPS, "maxnreg": max_registers(WARPS)}
    run_kernel(_simt_tma_kernel, (split * cdiv(m, bm) * cdiv(n, bn),), args, constexprs)
    record(triton.Config({"SIMT_TMA": True, "A_K_MAJOR": True, "BM": bm, "BN": bn, "BK": BK,
                          "SPLIT": split}, num_warps=WARPS, num_stages=stages), "simt")
    if store_t:
        return reduce(work, split, out.T, None if d is None else d.T, alpha=alpha,
                      beta=beta, activation=activation).T
    return reduce(work, split, out, d, alpha=alpha, beta=beta, activation=activation)
