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

Not kept: a row-major (K-major) A read as given, which would save A's copy (~1% of 4096^3):
128-byte-swizzled [BM, BK] boxes, a thread's 8 rows 16 apart (conflict-free), 4 K deep a
16-byte load, the columns taken out of those runs by register renaming (offline: the same
FFMA and LDS.128 counts, no shuffles). Correct but slower: the probe, H100, 4096^3 / 8192^3
47.7 / 48.1 TFLOPS against 52.2 / 52.9 on a staged A^T (cuBLAS 51.6 / 51.6); Nsight Compute
at 4096^3 (clocks locked, 1.59 GHz) 3.58 ms against 3.27 (cuBLAS 3.29), issue slots busy
75% against 82%, dispatch stalls 0.45 against 0.28 cycles an instruction (fortieth
session).

Hopper only (TMA, setmaxnreg); no interpreter. No epilogue: matmul_2d computes out = A B.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .common import INTERPRETER, hopper, needs_int64, record, run_kernel
from .persistent import _tma_ok, tile_origin
from .register_fed import claim_slot, max_registers, ring_barriers

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
# The TMA warp's registers; the compute warps get the rest (240 a thread).
LOADER_REGS = 24
# A slot read back as rows (see the module docstring).
ROWS = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))


@gluon.jit
def _loader(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, c_ptr, stride_cm,
            BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr):
    """The TMA warp: each K step's A^T and B tiles into the ring once the compute warps
    have handed the slot back; past K, TMA fills zeros."""
    off_m, off_n = tile_origin(gl.program_id(0), gl.cdiv(M, BM), gl.cdiv(N, BN), BM, BN,
                               GROUP_M)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for i in range(gl.cdiv(K, BK)):
        slot = claim_slot(ready, empty, i, nbytes)
        tma.async_copy_global_to_shared(a_desc, [i * BK, off_m], ready.index(slot),
                                        a_ring.index(slot))
        tma.async_copy_global_to_shared(b_desc, [i * BK, off_n], ready.index(slot),
                                        b_ring.index(slot))


@gluon.jit
def _compute(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, c_ptr, stride_cm,
             BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr):
    """The compute warps: BK outer products a slot, then the tile to C by pointer stores
    (16 bytes a thread a run)."""
    STAGES: gl.constexpr = a_ring.type.shape[0]
    NW: gl.constexpr = gl.num_warps()
    # 4x4 runs a thread, 8 x 4 threads a warp, warps 2 x NW / 2: the CTA's 64 x 8 NW block
    # repeats over the tile, so a thread holds (BM / 64) x (BN / (8 NW)) runs; a K row's
    # A runs are 8 distinct 16-byte loads a warp, its B runs 4.
    acc_layout: gl.constexpr = gl.BlockedLayout([4, 4], [8, 4], [2, NW // 2], [1, 0])
    off_m, off_n = tile_origin(gl.program_id(0), gl.cdiv(M, BM), gl.cdiv(N, BN), BM, BN,
                               GROUP_M)
    acc = gl.zeros([BM, BN], gl.float32, acc_layout)
    for i in range(gl.cdiv(K, BK)):
        slot = i % STAGES
        mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
        a_t = a_ring.index(slot)._reinterpret(gl.float32, [BK, BM], ROWS)
        b_s = b_ring.index(slot)._reinterpret(gl.float32, [BK, BN], ROWS)
        for kk in gl.static_range(BK):
            a = a_t.slice(kk, 1, dim=0).permute((1, 0)).load(acc_layout)  # [BM, 1]
            b = b_s.slice(kk, 1, dim=0).load(acc_layout)  # [1, BN]
            acc = gl.fma(a, b, acc)
        gl.thread_barrier()  # every warp done with the slot
        mbarrier.arrive(empty.index(slot))
    rows = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    gl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@gluon.jit
def _simt_tma_kernel(a_desc, b_desc, c_ptr, M, N, K, stride_cm,
                     BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                     STAGES: gl.constexpr, GROUP_M: gl.constexpr, LOADER_REGS: gl.constexpr):
    """C[:M, :N] = A B in fp32 FMA for A^T (K, M) through a_desc ([BK, BM] boxes), B (K, N)
    through b_desc ([BK, BN]) and C row-major with row stride stride_cm; one program a
    tile."""
    a_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BK, BM], a_desc.layout)
    b_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BK, BN], b_desc.layout)
    ready, empty = ring_barriers(STAGES)
    gl.warp_specialize([
        (_compute, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, c_ptr, stride_cm,
                    BM, BN, BK, GROUP_M)),
        (_loader, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, c_ptr, stride_cm,
                   BM, BN, BK, GROUP_M)),
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
    tiles = triton.cdiv(m, BM) * triton.cdiv(n, BN)
    return tiles >= WAVE_FILL * triton.cdiv(tiles, sms) * sms


def matmul_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out = a @ b in fp32 FMA for operands supports() accepts (b may hold columns past
    out's, which are computed and not stored). Returns out."""
    m, n, k = out.shape[0], out.shape[1], a.shape[1]
    args = (_descriptor(a.T, [BK, BM]), _descriptor(b, [BK, BN]), out, m, n, k, out.stride(0))
    constexprs = {"BM": BM, "BN": BN, "BK": BK, "STAGES": STAGES, "GROUP_M": GROUP_M,
                  "LOADER_REGS": LOADER_REGS, "num_warps": WARPS,
                  "maxnreg": max_registers(WARPS)}
    run_kernel(_simt_tma_kernel, (triton.cdiv(m, BM) * triton.cdiv(n, BN),), args, constexprs)
    record(triton.Config({"SIMT_TMA": True, "BM": BM, "BN": BN, "BK": BK},
                         num_warps=WARPS, num_stages=STAGES), "simt")
    return out
