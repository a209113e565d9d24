"""tf32 with an N-major B (row-major (K, N), as `a @ b` gives it) turned K-major inside the
kernel, in shared memory, against the library's plan (a K-major copy of B, then the
persistent kernel), the library on a K-major B (the nt layout, no copy) and cuBLAS tf32,
timed in interleaved rounds after an L2 flush (bench.gpu_median_ms, the report's eager
measure). A probe, not a library path: it lost (README, "Which precision").

    python perf/transpose_probe.py [--size 4096,8192] [--configs CONFIG ...] [--rounds 3]

CONFIG is BM,BN,BK,STAGES,AHEAD,WARPS,CONST,INFLIGHT (kernel docstring). Each config is
first checked against float64 on a NaN-poisoned output. GPU only; offline_sass() compiles
the kernel for sm_90a without one.

The kernel (Gluon, triton's explicit-layout dialect, so that the layouts are chosen here
rather than by triton's generic re-lay of an N-major fp32 dot operand): A arrives by TMA
into a ring of STAGES buffers; every warp loads its share of B's next tiles from global
memory into registers (four K-consecutive elements of one column per thread, so a warp's
load is one 128-byte run of a row) and stores them, one 16-byte store per thread, into a
K-major 128-byte-swizzled ring, from which wgmma reads B as it reads a K-major TMA tile.
Shared memory takes the bytes TMA would write; the loads, stores and a CTA barrier per K
step are what it adds. A warp-specialised variant (ws: configs) moves B's loads and stores
to warps of their own, handing ring slots to the wgmma warpgroups by mbarriers.
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier,
                                                              tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from perf import bench  # noqa: E402
from triton_gemm.kernels import register_fed  # noqa: E402
from triton_gemm.kernels.persistent import programs, tile_origin  # noqa: E402
from triton_gemm.kernels.register_fed import _descriptor, _keep  # noqa: E402

# The variants the README quotes (H200, perf/results/NVIDIA-H200/transpose_probe*.log).
DEFAULT_CONFIGS = ["128,256,32,3,2,8,1,1", "128,256,32,4,2,8,1,1", "128,256,32,4,1,8,1,1",
                   "128,256,32,4,1,8,0,1", "128,256,32,4,1,8,1,2", "128,128,64,3,2,8,1,1",
                   "ws:128,256,32,4,8,1,4,152,1", "ws:128,256,32,3,8,1,4,152,1",
                   "ws:128,256,32,4,8,1,4,168,2", "ws:128,128,32,6,4,1,4,168,1",
                   "rs:256,128,32,4,8,0", "rs:256,128,32,4,8,1", "rsws:256,128,32,4,8,8",
                   "rsws:256,128,32,4,8,16", "rsws:128,256,32,4,8,8"]


@gluon.jit
def _smem_transpose_kernel(
    a_desc, b_ptr, c_ptr, M, N, K, stride_bk, stride_cm,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP_M: gl.constexpr, AHEAD: gl.constexpr, B_STRIDE: gl.constexpr, INFLIGHT: gl.constexpr,
):
    """C (M, N) fp32 row-major = A @ B, tf32. A (M, K) fp32 through a_desc ([BM, BK] boxes,
    K contiguous); B (K, N) fp32 with unit column stride, row stride stride_bk. Persistent:
    program p walks tiles p, p + grid, ... in grouped order. STAGES >= 3 (a ring slot is
    rewritten only after every warpgroup's wgmmas on it are known done: STAGES >=
    INFLIGHT + 2); AHEAD 1 or 2 steps of B in registers; B_STRIDE > 0 compiles B's row
    stride in (each load's offset an immediate: 196 registers instead of 255 and 80 bytes
    of spills at 128x256x32); INFLIGHT wgmmas left running at each step's wait."""
    NW: gl.constexpr = gl.num_warps()
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BN, 8])
    # [BK, BN]: four K-consecutive elements per thread (one 16-byte shared store), lanes
    # along N (a 128-byte global run per warp and K row).
    WN: gl.constexpr = min(NW, BN // 32)
    load_layout: gl.constexpr = gl.BlockedLayout([4, 1], [1, 32], [NW // WN, WN], [0, 1])
    bt_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32,
                                                   rank=2)
    a_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BM, BK], a_desc.layout)
    b_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BN, BK], bt_layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)

    if B_STRIDE > 0:
        stride_bk = B_STRIDE
    rk = gl.arange(0, BK, layout=gl.SliceLayout(1, load_layout))
    rn = gl.arange(0, BN, layout=gl.SliceLayout(0, load_layout))
    cm = gl.arange(0, BM, layout=gl.SliceLayout(1, mma_layout))
    cn = gl.arange(0, BN, layout=gl.SliceLayout(0, mma_layout))
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    step = 0  # steps run by this program over all its tiles: ring slot and barrier phase
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        b_cols = off_n + rn
        b_ptrs = b_ptr + rk[:, None] * stride_bk + b_cols[None, :]
        n_ok = b_cols[None, :] < N

        for s in gl.static_range(STAGES - 1 - INFLIGHT):
            slot = (step + s) % STAGES
            mbarrier.expect(bars.index(slot), a_desc.block_type.nbytes, pred=s < k_steps)
            tma.async_copy_global_to_shared(a_desc, [off_m, s * BK], bars.index(slot),
                                            a_ring.index(slot), pred=s < k_steps)
        b_cur = gl.load(b_ptrs, mask=(rk[:, None] < K) & n_ok, other=0.0)
        b_next = b_cur
        if AHEAD == 2:
            b_next = gl.load(b_ptrs + BK * stride_bk, mask=(rk[:, None] + BK < K) & n_ok,
                             other=0.0)

        acc = gl.zeros([BM, BN], gl.float32, mma_layout)
        for i in range(k_steps):
            slot = (step + i) % STAGES
            b_ring.index(slot).store(gl.permute(b_cur, [1, 0]))
            if AHEAD == 2:
                b_cur = b_next
                k_load = (i + 2) * BK
            else:
                k_load = (i + 1) * BK
            b_next = gl.load(b_ptrs + k_load * stride_bk,
                             mask=(rk[:, None] + k_load < K) & n_ok, other=0.0)
            if AHEAD == 1:
                b_cur = b_next
            fence_async_shared()
            gl.thread_barrier()  # every warp's B stores land before any wgmma reads them
            # Both warpgroups have finished step i - 1 - INFLIGHT (each waited for it before
            # this barrier), so its A slot takes step i + STAGES - 1 - INFLIGHT.
            ahead = i + STAGES - 1 - INFLIGHT
            refill = (step + ahead) % STAGES
            mbarrier.expect(bars.index(refill), a_desc.block_type.nbytes, pred=ahead < k_steps)
            tma.async_copy_global_to_shared(a_desc, [off_m, ahead * BK], bars.index(refill),
                                            a_ring.index(refill), pred=ahead < k_steps)
            mbarrier.wait(bars.index(slot), ((step + i) // STAGES) & 1)
            acc = warpgroup_mma(a_ring.index(slot), b_ring.index(slot).permute((1, 0)), acc,
                                is_async=True)  # fp32 operands: tf32 by default
            acc = warpgroup_mma_wait(num_outstanding=INFLIGHT, deps=(acc, ))
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        step += k_steps
        gl.thread_barrier()  # the next tile's first stores reuse slots read here

        rows_c = off_m + cm
        cols_c = off_n + cn
        gl.store(c_ptr + rows_c[:, None] * stride_cm + cols_c[None, :], acc,
                 mask=(rows_c[:, None] < M) & (cols_c[None, :] < N))

    for s in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(s))


@gluon.jit
def _ws_mma(a_ring, b_ring, ready, empty, c_ptr, M, N, K, stride_cm,
            BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr):
    """The consumer warpgroups: wgmma on each ring slot once it is ready, the slot handed
    back once every warpgroup's wgmma on it is done; C stored from registers."""
    STAGES: gl.constexpr = a_ring.type.shape[0]
    NW: gl.constexpr = gl.num_warps()
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BN, 8])
    cm = gl.arange(0, BM, layout=gl.SliceLayout(1, mma_layout))
    cn = gl.arange(0, BN, layout=gl.SliceLayout(0, mma_layout))
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        acc = gl.zeros([BM, BN], gl.float32, mma_layout)
        for i in range(k_steps):
            slot = step % STAGES
            mbarrier.wait(ready.index(slot), (step // STAGES) & 1)
            acc = warpgroup_mma(a_ring.index(slot), b_ring.index(slot).permute((1, 0)), acc,
                                is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
            gl.thread_barrier()  # every warpgroup is done with the step before
            mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES), pred=i > 0)
            step += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        gl.thread_barrier()
        mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES))
        rows_c = off_m + cm
        cols_c = off_n + cn
        gl.store(c_ptr + rows_c[:, None] * stride_cm + cols_c[None, :], acc,
                 mask=(rows_c[:, None] < M) & (cols_c[None, :] < N))


@gluon.jit
def _ws_loader(a_desc, b_ptr, a_ring, b_ring, ready, empty, M, N, K, stride_bk,
               BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr,
               B_STRIDE: gl.constexpr, LOADER_WARPS: gl.constexpr, LOAD_AHEAD: gl.constexpr):
    """The producer warps: A's tile by TMA, B's loaded into registers LOAD_AHEAD (1 or 2)
    steps ahead and stored K-major, then the slot marked ready (its barrier counts the
    TMA's arrival and this one)."""
    STAGES: gl.constexpr = a_ring.type.shape[0]
    WN: gl.constexpr = min(LOADER_WARPS, BN // 32)
    load_layout: gl.constexpr = gl.BlockedLayout([4, 1], [1, 32], [LOADER_WARPS // WN, WN],
                                                 [0, 1])
    if B_STRIDE > 0:
        stride_bk = B_STRIDE
    rk = gl.arange(0, BK, layout=gl.SliceLayout(1, load_layout))
    rn = gl.arange(0, BN, layout=gl.SliceLayout(0, load_layout))
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        b_cols = off_n + rn
        b_ptrs = b_ptr + rk[:, None] * stride_bk + b_cols[None, :]
        n_ok = b_cols[None, :] < N
        b_cur = gl.load(b_ptrs, mask=(rk[:, None] < K) & n_ok, other=0.0)
        b_next = b_cur
        if LOAD_AHEAD == 2:
            b_next = gl.load(b_ptrs + BK * stride_bk, mask=(rk[:, None] + BK < K) & n_ok,
                             other=0.0)
        for i in range(k_steps):
            slot = step % STAGES
            k_load = (i + LOAD_AHEAD) * BK
            b_load = gl.load(b_ptrs + k_load * stride_bk,
                             mask=(rk[:, None] + k_load < K) & n_ok, other=0.0)
            mbarrier.wait(empty.index(slot), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(slot), a_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, i * BK], ready.index(slot),
                                            a_ring.index(slot))
            b_ring.index(slot).store(gl.permute(b_cur, [1, 0]))
            fence_async_shared()
            gl.thread_barrier()  # every loader warp's stores are in before the arrival
            mbarrier.arrive(ready.index(slot))
            if LOAD_AHEAD == 2:
                b_cur = b_next
                b_next = b_load
            else:
                b_cur = b_load
            step += 1


@gluon.jit
def _ws_kernel(
    a_desc, b_ptr, c_ptr, M, N, K, stride_bk, stride_cm,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP_M: gl.constexpr, B_STRIDE: gl.constexpr, LOADER_WARPS: gl.constexpr,
    LOADER_REGS: gl.constexpr, LOAD_AHEAD: gl.constexpr,
):
    """_smem_transpose_kernel's product with the B loads and stores in LOADER_WARPS warps
    of their own (LOADER_REGS registers each) and the wgmmas in the kernel's num_warps,
    handing ring slots over by mbarriers (warp specialisation)."""
    a_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BM, BK], a_desc.layout)
    b_ring = gl.allocate_shared_memory(
        gl.float32, [STAGES, BN, BK],
        gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=2)
        mbarrier.init(empty.index(s), count=1)
    gl.warp_specialize([
        (_ws_mma, (a_ring, b_ring, ready, empty, c_ptr, M, N, K, stride_cm, BM, BN, BK,
                   GROUP_M)),
        (_ws_loader, (a_desc, b_ptr, a_ring, b_ring, ready, empty, M, N, K, stride_bk, BM, BN,
                      BK, GROUP_M, B_STRIDE, LOADER_WARPS, LOAD_AHEAD)),
    ], [LOADER_WARPS], [LOADER_REGS])


@gluon.jit
def _rs_refill(a_desc, b_desc, a_ring, b_ring, bars, off_m, off_n, k_step, k_steps, slot,
               BK: gl.constexpr):
    """TMA loads of step k_step's A and B tiles into ring slot `slot`, if it exists."""
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    mbarrier.expect(bars.index(slot), nbytes, pred=k_step < k_steps)
    tma.async_copy_global_to_shared(a_desc, [off_m, k_step * BK], bars.index(slot),
                                    a_ring.index(slot), pred=k_step < k_steps)
    tma.async_copy_global_to_shared(b_desc, [k_step * BK, off_n], bars.index(slot),
                                    b_ring.index(slot), pred=k_step < k_steps)


@gluon.jit
def _rs_kernel(
    a_desc, b_desc, c_ptr, M, N, K, stride_cm,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP_M: gl.constexpr, ASYNC: gl.constexpr,
):
    """C = A @ B computed as C^T = B^T A^T: B^T fed to wgmma from registers (its first
    operand may come in any layout), A^T from shared memory (K-major: A as stored). Both
    tiles arrive by TMA into a ring of STAGES slots, B N-major as stored, and each step's
    B^T fragment is loaded from shared memory into registers. C's tile [BM, BN] is acc^T,
    stored from registers.

    ptxas before CUDA 13.3 may reuse a register-fed wgmma's input registers before it has
    read them (triton-lang/triton#11781): with one wgmma left in flight, ptxas 12.8 loaded
    the next step's fragment into the registers the running one reads. ASYNC=0 waits for
    each wgmma at once, so nothing runs while it reads them. ASYNC=1 leaves one in flight:
    two fragments, X and Y, alternate (the loop runs two steps a turn; K a multiple of
    2 * BK), and each is kept (_keep) until the wait that retires its wgmma."""
    NW: gl.constexpr = gl.num_warps()
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BM, 8])
    bt_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma_layout,
                                                  k_width=1)
    a_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BM, BK], a_desc.layout)
    b_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BK, BN], b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    rn = gl.arange(0, BN, layout=gl.SliceLayout(1, mma_layout))
    rm = gl.arange(0, BM, layout=gl.SliceLayout(0, mma_layout))
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        # Steps 0 .. STAGES - 2 now; step i + STAGES - 1 goes into step i - 1's slot once
        # both warpgroups are done with it.
        for s in gl.static_range(STAGES - 1):
            _rs_refill(a_desc, b_desc, a_ring, b_ring, bars, off_m, off_n, s, k_steps,
                       (step + s) % STAGES, BK)
        mbarrier.wait(bars.index(step % STAGES), (step // STAGES) & 1)
        x = b_ring.index(step % STAGES).permute((1, 0)).load(bt_layout)
        acc = gl.zeros([BN, BM], gl.float32, mma_layout)
        if ASYNC == 1:
            y = x
            for i in range(0, k_steps, 2):
                slot = (step + i) % STAGES
                acc = warpgroup_mma(x, a_ring.index(slot).permute((1, 0)), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires i - 1
                _keep(y)
                gl.thread_barrier()
                _rs_refill(a_desc, b_desc, a_ring, b_ring, bars, off_m, off_n,
                           i + STAGES - 1, k_steps, (slot + STAGES - 1) % STAGES, BK)
                odd = (slot + 1) % STAGES
                mbarrier.wait(bars.index(odd), ((step + i + 1) // STAGES) & 1)
                y = b_ring.index(odd).permute((1, 0)).load(bt_layout)
                acc = warpgroup_mma(y, a_ring.index(odd).permute((1, 0)), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires i
                _keep(x)
                gl.thread_barrier()
                _rs_refill(a_desc, b_desc, a_ring, b_ring, bars, off_m, off_n, i + STAGES,
                           k_steps, slot, BK)
                if i + 2 < k_steps:
                    even = (slot + 2) % STAGES
                    mbarrier.wait(bars.index(even), ((step + i + 2) // STAGES) & 1)
                    x = b_ring.index(even).permute((1, 0)).load(bt_layout)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            _keep(y)
        else:
            for i in range(k_steps):
                slot = (step + i) % STAGES
                x_next = x
                if i + 1 < k_steps:
                    following = (slot + 1) % STAGES
                    mbarrier.wait(bars.index(following), ((step + i + 1) // STAGES) & 1)
                    x_next = b_ring.index(following).permute((1, 0)).load(bt_layout)
                acc = warpgroup_mma(x, a_ring.index(slot).permute((1, 0)), acc)
                gl.thread_barrier()  # both warpgroups are done with this slot
                _rs_refill(a_desc, b_desc, a_ring, b_ring, bars, off_m, off_n,
                           i + STAGES - 1, k_steps, (slot + STAGES - 1) % STAGES, BK)
                x = x_next
        gl.thread_barrier()  # the next tile's loads reuse every slot
        step += k_steps
        rows_n = off_n + rn
        cols_m = off_m + rm
        gl.store(c_ptr + cols_m[None, :] * stride_cm + rows_n[:, None], acc,
                 mask=(cols_m[None, :] < M) & (rows_n[:, None] < N))

    for s in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(s))


def parse_config(text: str) -> dict:
    """A config's text -> the kernel's arguments and its KIND:
    BM,BN,BK,STAGES,AHEAD,WARPS,CONST,INFLIGHT (the in-kernel transpose),
    ws:BM,BN,BK,STAGES,WARPS,CONST,LOADER_WARPS,LOADER_REGS,LOAD_AHEAD (warp-specialised),
    rs:BM,BN,BK,STAGES,WARPS,ASYNC (B^T from registers),
    rsws:BM,BN,BK,STAGES,WARPS,GROUP_M (the same, ASYNC=1, TMA from a warp of its own:
    kernels/register_fed.py on BP = BN, BQ = BM); GROUP_M 8 where the config does not
    name it."""
    kind, _, values = text.rpartition(":")
    names = {"": ("BM", "BN", "BK", "STAGES", "AHEAD", "num_warps", "CONST", "INFLIGHT"),
             "ws": ("BM", "BN", "BK", "STAGES", "num_warps", "CONST", "LOADER_WARPS",
                    "LOADER_REGS", "LOAD_AHEAD"),
             "rs": ("BM", "BN", "BK", "STAGES", "num_warps", "ASYNC"),
             "rsws": ("BM", "BN", "BK", "STAGES", "num_warps", "GROUP_M")}[kind]
    return {"KIND": kind, **dict(zip(names, (int(v) for v in values.split(",")), strict=True))}


_KERNELS = {"": _smem_transpose_kernel, "ws": _ws_kernel, "rs": _rs_kernel,
            "rsws": register_fed._register_fed_kernel}


def _kernel_and_options(config: dict, b_stride: int):
    """(kernel, constexprs, compile options) of a parse_config config."""
    cfg = dict(config)
    kind = cfg.pop("KIND")
    options = {"num_warps": cfg.pop("num_warps")}
    if "CONST" in cfg:
        cfg["B_STRIDE"] = b_stride if cfg.pop("CONST") else 0
    if kind in ("ws", "rsws"):
        # One CTA per SM: every warp's registers within the 64K of the register file (a
        # partition's warps count in whole warpgroups).
        warps = options["num_warps"] + -(-cfg.get("LOADER_WARPS", 1) // 4) * 4
        options["maxnreg"] = min(240, 65536 // (32 * warps) // 8 * 8)
    if kind == "rsws":  # the library's kernel: X = B (P = N), Y = A (Q = M), C^T stored
        cfg = {"BP": cfg.pop("BN"), "BQ": cfg.pop("BM"), **cfg, "OUT_T": True,
               "LOADER_REGS": register_fed.LOADER_REGS}
    return _KERNELS[kind], {"GROUP_M": 8, **cfg}, options


def matmul(a, b, out, config: dict):
    """out = a @ b in tf32 for fp32 a (M, K) row-major, b (K, N) with unit column stride
    and out (M, N) fp32 row-major, on parse_config's config; as many programs as take the
    tiles' waves (persistent.BALANCED_WAVES). Returns out."""
    m, k = a.shape
    n = b.shape[1]
    kernel, constexprs, options = _kernel_and_options(config, b.stride(0))
    bm, bn = constexprs.get("BM", constexprs.get("BQ")), constexprs.get("BN", constexprs.get("BP"))
    bk = constexprs["BK"]
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    grid = programs(bm, bn, m, n, sms, half_tail=False)
    a_desc = _descriptor(a, [bm, bk])
    if config["KIND"] in ("rs", "rsws") and constexprs.get("ASYNC", 1) and k % (2 * bk):
        raise ValueError(f"rs: with ASYNC=1 runs two K steps a turn: K = {k} must be a "
                         f"multiple of {2 * bk}")
    if config["KIND"] == "rsws":
        kernel[(grid, )](_descriptor(b, [bk, bn]), a_desc, out, n, m, k, out.stride(0),
                         **constexprs, **options)
    elif config["KIND"] == "rs":
        kernel[(grid, )](a_desc, _descriptor(b, [bk, bn]), out, m, n, k, out.stride(0),
                         **constexprs, **options)
    else:
        kernel[(grid, )](a_desc, b, out, m, n, k, b.stride(0), out.stride(0), **constexprs,
                         **options)
    return out


def offline_sass(config: dict, b_stride: int = 4096) -> dict:
    """Compile the kernel for sm_90a without a GPU: its shared memory, registers and spill
    bytes (ptxas -v) and the SASS opcodes it issues, counted."""
    from perf import sass_audit

    kernel_fn, constexprs, options = _kernel_and_options(config, b_stride)
    bm, bn = constexprs.get("BM", constexprs.get("BQ")), constexprs.get("BN", constexprs.get("BP"))
    bk = constexprs["BK"]
    a_layout = gl.NVMMASharedLayout.get_default_for([bm, bk], gl.float32)
    b_layout = gl.NVMMASharedLayout.get_default_for([bk, bn], gl.float32)
    a_desc = f"tensordesc<fp32[{bm}, {bk}],{a_layout!r}>"
    b_desc = f"tensordesc<fp32[{bk}, {bn}],{b_layout!r}>"
    signature = {"a_desc": a_desc, "b_desc": b_desc, "x_desc": b_desc, "y_desc": a_desc,
                 "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
                 "P": "i32", "Q": "i32", "stride_bk": "i32", "stride_cm": "i32",
                 "stride_c0": "i32"}
    kernel = sass_audit.compile_gluon(kernel_fn, signature, constexprs, options)
    with tempfile.TemporaryDirectory() as tmp:
        report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a",
                                         options.get("maxnreg"))
        sass = sass_audit.sass_text(kernel.asm["cubin"], Path(tmp))
    opcodes = {}
    for op in re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)", sass,
                         re.MULTILINE):
        opcodes[op] = opcodes.get(op, 0) + 1
    return {"shared": kernel.metadata.shared, "registers": report["registers"],
            "spill_bytes": report["spill_stores"], "opcodes": opcodes,
            "hazards": sass_audit.wgmma_register_hazards(sass)}


def _probe(size: int, configs: list, rounds: int) -> None:
    """Check, then time, every candidate on one size^3 product; print a line each."""
    a = torch.randn(size, size, device="cuda")
    b = torch.randn(size, size, device="cuda")
    b_kmajor = b.t().contiguous().t()
    ref = a.double() @ b.double()

    def err(c):
        return float((c.double() - ref).norm() / ref.norm())

    def cublas():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.matmul(a, b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    candidates = {"cublas nn": cublas,
                  "library nn": lambda: triton_gemm.matmul(a, b, precision="tf32"),
                  "library nt": lambda: triton_gemm.matmul(a, b_kmajor, precision="tf32")}
    for text in configs:
        cfg = parse_config(text)
        out = torch.full((size, size), float("nan"), device="cuda")
        try:
            matmul(a, b, out, cfg)
        except Exception as exc:  # a config that does not compile or launch: say so, go on
            print(f"{size}^3 {text}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        print(f"{size}^3 {text}: error {err(out):.2e}", flush=True)
        candidates[f"in-kernel {text}"] = functools.partial(matmul, a, b, out, cfg)
    for name in ("cublas nn", "library nn", "library nt"):
        print(f"{size}^3 {name}: error {err(candidates[name]()):.2e}", flush=True)
    times = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            times[name].append(bench.gpu_median_ms(fn, rep_ms=60))
    base = statistics.median(times["cublas nn"])
    flops = 2.0 * size ** 3
    for name, ts in times.items():
        ms = statistics.median(ts)
        print(f"{size}^3 {name:32s} {ms * 1e3:8.1f} us {flops / ms / 1e9:7.1f} TFLOPS "
              f"{base / ms:5.3f}x cuBLAS  rounds {' '.join(f'{t * 1e3:.1f}' for t in ts)}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="4096,8192")
    parser.add_argument("--configs", nargs="*", default=DEFAULT_CONFIGS)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    for size in (int(s) for s in args.size.split(",")):
        _probe(size, args.configs, args.rounds)


if __name__ == "__main__":
    main()
