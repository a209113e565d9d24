"""tf32 products with one MN-major operand, fed to wgmma from registers: the nn layout (a
row-major B, as `a @ b` gives it) and tt (a transposed A), without a K-major copy.

wgmma reads 32-bit operands from shared memory only K-major, but its first operand may
come from registers in any layout. So the MN-major operand X, stored (K, P) P-contiguous
(nn: B, P = N; tt: A^T, P = M), is that first operand, loaded from shared memory into
registers; the K-major one Y, stored (Q, K) K-contiguous (nn: A, Q = M; tt: B^T, Q = N),
is read by wgmma from shared memory. The accumulator is X^T Y^T: C^T for nn (stored
transposed), C for tt. A warp of its own issues both tiles' TMA loads into a ring of
STAGES slots (warp specialisation); the two wgmma warpgroups never stop for them, and
hand each finished tile to TMA through shared memory (_store_tile). From CLUSTER_MIN_MNK
on, CTAs run in clusters of two that share Y's tiles (TMA multicast). nt (both operands
K-major) runs here too with X_SMEM, both read by wgmma from the ring; not dispatched. So
do fp16 and bf16 nt products (K steps 64 deep: the same 48 KB a slot), the cuBLAS recipe
for them (nvjet_sm90_hsh_128x256_64x4_2x1: this tile, 4 stages, clusters of two), also
not dispatched: no faster than the persistent kernel's p_128x256x64_sub (forty-first
session; wave_probe.py --kernels --dtype float16, H100, fp16 nt, TFLOPS sustained, one CTA
/ clusters of two / the library / cuBLAS): 8192^3 652.8 / 668.1 / 672.0 / 654.8,
2048x11008x4096 595.1 / 598.0 / 617.4 / 622.7, 8192x4096x11008 659.3 / 666.2 / 672.4 /
669.5, 4096^3 642.6 / 638.5 / 647.6 / 646.7; eager after the flush, us, 4096^3 190.1 /
191.5 / 192.3 / 187.0, 2048x11008x4096 280.4 / 281.4 / 271.0 / 262.4.

ptxas before CUDA 13.3 may reuse a register-fed wgmma's input registers before it has read
them (triton-lang/triton#11781; triton 3.6 ships ptxas 12.8). Left to itself, ptxas 12.8
loaded the next K step's fragment into the registers the running wgmma reads. So two
fragments alternate (the loop runs two K steps a turn) and each is kept (_keep) until the
wait that retires its wgmma: the SASS then loads each fragment only after that wait
(perf/sass_audit.wgmma_register_hazards checks). With each wgmma waited for at once
instead, nothing is in flight to overwrite, but the tensor cores drain every step: 528.7
against 395.0 us at 4096^3 (perf/transpose_probe.py, H200, one run, before the TMA warp).

Written in Gluon (triton's explicit-layout dialect): triton's tl.dot on an N-major fp32
operand re-lays it in shared memory (686-888 us at 4096^3), and its pipeliner has its own
register-operand hazard (triton-lang/triton#9433). Hopper only; no interpreter.

rows_2d runs a few rows against a K-major weight W (a linear layer's, nt) as C^T = W A^T
in the shared-memory mode: W's rows are X, A's rows one Y tile of ROWS_BQ, C stored
transposed; dispatch.FED_ROWS has the shapes it takes and its figures.

bmm runs batches of products in one persistent launch (no clusters), its descriptors 3-D
(product, rows, columns) with boxes one product deep, so TMA clips every box inside its
product; the ring keeps its 2-D layout, seen as a box at each copy (_load, _store). tf32
nn and tt batches go there (dispatch.REGISTER_FED_BATCHED has the figures).
"""

from __future__ import annotations

import functools
import re
import warnings

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier,
                                                              tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime.jit import constexpr_function

from .batched import _tma_ok as _batched_tma_ok
from .common import INTERPRETER, cdiv, hopper, record, run_kernel
from .persistent import _tma_ok, programs, tile_origin

# The tile: BP accumulator rows from X (two warpgroups of 64), BQ columns from Y, BK deep,
# STAGES ring slots (48 KB each). perf/transpose_probe.py (rsws: configs), H200, 4096^3 /
# 8192^3 nn, us, one run (cuBLAS tf32; the library's K-major copy plan): BQ 256 x BP 128
# GROUP_M 8 382.7 / 3209 (365.4 / 3188; 398.4 / 3321); GROUP_M 4 384.6 / 3252, 16 393.6 /
# 3300; BQ 128 x BP 256 486.3 / 3925. Another run: 3 stages 399.2 / 3324 against 4 386.0 /
# 3342. With the TMA epilogue (H100, one CTA, eager after a flush, us, thirty-seventh
# session): BK 16 in 8 stages 3110.2 / 382.5 against BK 32 in 4 2994.2 / 364.9 at 8192^3 /
# 4096^3 nn (cuBLAS 2960.4 / 373.9); tried because at BK 32 ncu's stall sampling puts the
# wgmma warps' wait for a slot's loads among their largest stalls (8192^3 nn).
# X's ring keeps TMA's 128-byte swizzle, under which each fragment load (lanes 4 K rows x 8
# P columns apart) hits 16 banks, two lanes each. 32-byte swizzling puts them on 32 banks
# but cuts each X tile into 16 TMA boxes of 1 KB (128-byte: 4 of 4 KB), and ran slower
# (a probe, thirty-ninth session, H100, sustained TFLOPS, 128-byte against 32-byte; cuBLAS):
# 8192^3 nn one CTA 344.3 vs 266.5, clusters 353.1 vs 338.3 (356.3); 4096^3 nn 338.1 vs
# 304.5, 340.4 vs 331.1 (344.8); 8192^3 tt 345.9 vs 266.6, 351.2 vs 338.2 (346.0).
# Nor do the conflicts cost time at 128 bytes: loading each fragment with the P rows' bits 2
# and 4 exchanged (lanes then read rows 0-3 and 16-19, four chunks apart: gluon's
# bank_conflicts 1 -> 0), the accumulator's rows swapped back before the store (a relabelling
# of lanes and warps, no data moved), ran no faster (forty-first session, not kept;
# wave_probe.py --kernels --sustain 1.5, H100, TFLOPS swapped vs not, one CTA / clusters):
# 8192^3 nn 344.4 / 356.9 vs 345.0 / 354.5, 4096^3 nn 342.4 / 344.3 vs 343.2 / 343.0, 8192^3
# tt 344.8 / 355.0 vs 345.6 / 353.2, each at the same clock and ~698 W. split_fed's fragments
# (BK 16, the same conflicts) neither: 8192^3 nn 10568 vs 10796 us, tt 10984 vs 10335 us
# (interleaved rounds, spreads of 2-8%), 4096^3 within 0.5%.
BP, BQ, BK, STAGES, GROUP_M, WARPS = 128, 256, 32, 4, 8, 8
# The TMA partition (one warp, four with clusters) counts a warpgroup of registers: 24 a
# thread hands the rest to the wgmma warps (240 each; they need ~215).
LOADER_REGS = 24
# CTAs a cluster of matmul_2d's launch holds from CLUSTER_MIN_MNK (M * N * K) on, sharing
# Y's tiles by TMA multicast (_multicast_y). At the H100's 700 W limit the clock follows
# energy per product, and L2 reads are part of it: cuBLAS's tf32 kernel (same 128x256x32
# tile, two wgmma warpgroups) runs in clusters of two (docs/design.md, "tf32 at the power limit").
# perf/wave_probe.py --kernels, H100, two runs, 1 / 2 / 4 CTAs (cuBLAS): sustained TFLOPS
# 8192^3 nn 344.5-345.7 / 351.6-354.9 / 222.9 (358.9-363.2), tt 343.8-347.5 / 349.4-353.5
# (347.1-354.2), 4096^3 nn 331.3-339.8 / 338.5-343.5 (342.9-350.0); eager after an L2
# flush, us, 8192^3 nn 3015.9-3037.6 / 2941.1-3078.2 (2874.8-2990.9), 6144^3 1303.1 /
# 1295.2 (1260.9), 4096^3 368.0-373.3 / 368.5-374.8 (365.2-376.5), 3072^3 190.5 / 191.6
# (193.6). Four CTAs run at 1979 MHz and 620 W: fewer clusters of four fit at once than
# the grid asks for.
CLUSTER_CTAS = 2
CLUSTER_MIN_MNK = 2 ** 38


def max_registers(warps: int) -> int:
    """The compile's register cap for `warps` compute warps and a TMA warpgroup: an SM's
    registers over all of them, a multiple of 8 (setmaxnreg moves them at run time)."""
    return 65536 // (32 * (warps + 4)) // 8 * 8


MAX_REGISTERS = max_registers(WARPS)


@gluon.jit
def ring_barriers(STAGES: gl.constexpr):
    """(ready, empty): a ring's STAGES mbarriers each way, every one counting one arrival
    (a TMA expect on ready; one thread's release on empty)."""
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    return ready, empty


@gluon.jit
def claim_slot(ready, empty, step, nbytes: gl.constexpr):
    """The TMA warp's slot for its step-th load of the ring (a count over every tile),
    once the consumers have handed it back, its ready barrier set to expect nbytes."""
    STAGES: gl.constexpr = ready.type.shape[0]
    slot = step % STAGES
    mbarrier.wait(empty.index(slot), ((step // STAGES) & 1) ^ 1)
    mbarrier.expect(ready.index(slot), nbytes)
    return slot


@gluon.jit
def _keep(x):
    """A use of x's registers the compiler can neither drop nor move: ptxas 12.x takes a
    register-fed wgmma's inputs as dead once it is issued, not once it retires."""
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=gl.float32,
                                     is_pure=False, pack=1)


# CTAS > 1: the CTAs of a cluster take CTAS tiles side by side along P, which share Y's
# tile: each loads a 1/CTAS part of it and TMA multicasts that into every CTA's ring, so
# each Y byte leaves L2 once per cluster. Gluon (triton 3.6) has neither multicast nor
# remote mbarriers, so those are PTX here, on shared memory offsets fixed by triton's
# allocator for this kernel (checked against the compiled PTX before the first launch:
# _check_offsets) and on the Y descriptor's kernel parameter.
Y_RING_OFFSET = gl.constexpr(0)
# Bytes triton's warp_specialize keeps between the epilogue buffers and the barriers.
WS_SCRATCH = 80


def barrier_offsets(out_elem: int, bq: int = BQ, stages: int = STAGES) -> tuple:
    """(ready, empty): where triton's allocator puts the ring's barriers for an output of
    out_elem bytes an element, Y tiles of bq rows in rings of `stages` slots: after the
    rings (Y's at Y_RING_OFFSET, X's after it; a K step 128 bytes a row, BK fp32 or 2 BK
    16-bit elements), the two epilogue buffers and WS_SCRATCH (_check_offsets checks the
    compiled PTX)."""
    ready = (Y_RING_OFFSET.value + stages * (BP + bq) * BK * 4 + 2 * bq // 8 * BP * out_elem
             + WS_SCRATCH)
    return ready, ready + 8 * stages


_MULTICAST_Y = gl.constexpr(
    "{ .reg .pred p; .reg .b64 d; .reg .b32 base, dst, bar; .reg .b16 mask;"
    " setp.eq.s32 p, $1, 0; mov.b64 d, _register_fed_kernel_param_5; cvta.param.u64 d, d;"
    " mov.u32 base, global_smem; add.u32 dst, base, $2; add.u32 bar, base, $3;"
    " cvt.u16.u32 mask, $6;"
    " @p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    ".multicast::cluster [dst], [d, {$4, $5}], [bar], mask; mov.b32 $0, 0; }")
_RELEASE_PEER = gl.constexpr(
    "{ .reg .pred p; .reg .b32 base, a, r; setp.ne.s32 p, $1, 0;"
    " mov.u32 base, global_smem; add.u32 a, base, $2; mapa.shared::cluster.u32 r, a, $3;"
    " @p mbarrier.arrive.shared::cluster.b64 _, [r]; mov.b32 $0, 0; }")
_CLUSTER_SYNC = gl.constexpr(
    "fence.mbarrier_init.release.cluster; barrier.cluster.arrive.aligned; "
    "barrier.cluster.wait.aligned; mov.b32 $0, $1;")


@gluon.jit
def _one_per_thread(value, THREADS: gl.constexpr):
    """value as a [THREADS] int32 tensor, one element a thread (an inline asm operand)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [THREADS // 32], [0])
    return gl.full([THREADS], 0, gl.int32, layout) + value


@gluon.jit
def _cluster_sync(THREADS: gl.constexpr):
    """barrier.cluster across the cluster's CTAs, every thread of the calling partition
    taking part: the peers' barriers are initialised before anything lands in them, and no
    CTA exits while another may still signal its barriers."""
    gl.inline_asm_elementwise(_CLUSTER_SYNC, "=r,r", [_one_per_thread(0, THREADS)],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _multicast_y(q, k, slot, rank, THREADS: gl.constexpr, BQ: gl.constexpr,
                 BK: gl.constexpr, CTAS: gl.constexpr, ELEM: gl.constexpr,
                 READY_AT: gl.constexpr):
    """Rows q .. q + BQ / CTAS of Y at column k into every CTA's Y ring slot `slot` (the
    part this CTA loads: rank), completing on each CTA's ready[slot] barrier; one thread
    issues it. ELEM: bytes an element; READY_AT: the ready barriers' shared memory offset."""
    lane = gl.arange(0, THREADS, layout=gl.BlockedLayout([1], [32], [THREADS // 32], [0]))
    dst = Y_RING_OFFSET + slot * (BQ * BK * ELEM) + rank * (BQ // CTAS * BK * ELEM)
    gl.inline_asm_elementwise(
        _MULTICAST_Y, "=r,r,r,r,r,r,r",
        [lane, _one_per_thread(dst, THREADS), _one_per_thread(READY_AT + slot * 8, THREADS),
         _one_per_thread(k, THREADS), _one_per_thread(q, THREADS),
         _one_per_thread((1 << CTAS) - 1, THREADS)],
        dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _release_to(slot, cta, pred, THREADS: gl.constexpr, EMPTY_AT: gl.constexpr):
    """Arrive on CTA `cta`'s empty[slot] barrier, once a warpgroup (its first thread):
    this warpgroup's wgmmas are done with its CTA's copy of the slot, into which every CTA
    of the cluster multicasts its part of Y."""
    lane = gl.arange(0, THREADS, layout=gl.BlockedLayout([1], [32], [THREADS // 32], [0]))
    gl.inline_asm_elementwise(
        _RELEASE_PEER, "=r,r,r,r",
        [((lane % 128 == 0) & pred).to(gl.int32),
         _one_per_thread(EMPTY_AT + slot * 8, THREADS), _one_per_thread(cta, THREADS)],
        dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _walk(P, Q, K, BATCH, CTAS: gl.constexpr, BP: gl.constexpr, BQ: gl.constexpr,
          BK: gl.constexpr):
    """(first tile, tile step, tiles, tile columns, rank, K steps) of this program's walk,
    the same in both partitions: groups of CTAS tiles of BP x BQ side by side along P, one
    group per cluster (CTA programs i * CTAS .. i * CTAS + CTAS - 1), rank this CTA's tile
    in it, the BATCH products' tiles one product after another; K steps rounded up to
    pairs (the register-fed loop runs two a turn)."""
    columns = gl.cdiv(gl.cdiv(P, BP), CTAS)
    return (gl.program_id(0) // CTAS, gl.num_programs(0) // CTAS,
            BATCH * columns * gl.cdiv(Q, BQ), columns, gl.program_id(0) % CTAS,
            gl.cdiv(gl.cdiv(K, BK), 2) * 2)


@gluon.jit
def _tile_origin(tile, Q, columns, rank, CTAS: gl.constexpr, BP: gl.constexpr,
                 BQ: gl.constexpr, GROUP_M: gl.constexpr):
    """(product, off_q, off_p) of this CTA's tile in group `tile` of the walk (_walk), the
    groups of each product in persistent.tile_origin's grouped order."""
    rows = gl.cdiv(Q, BQ)
    product = tile // (rows * columns)
    off_q, off_c = tile_origin(tile - product * (rows * columns), rows, columns, BQ,
                               BP * CTAS, GROUP_M)
    return product, off_q, off_c + rank * BP


@gluon.jit
def _load(desc, at, barrier, view, product, BATCHED: gl.constexpr):
    """TMA-load desc's block `at` into the shared memory view, completing on barrier; with
    BATCHED (desc 3-D, its boxes one product deep) product `product`'s, the view seen as
    one such box (the same bytes: the 2-D layout's swizzle over the box's rows)."""
    if BATCHED:
        tma.async_copy_global_to_shared(
            desc, [product] + at, barrier,
            view._reinterpret(view.dtype, [1] + view.type.shape, desc.layout))
    else:
        tma.async_copy_global_to_shared(desc, at, barrier, view)


@gluon.jit
def _store(desc, at, view, product, BATCHED: gl.constexpr):
    """TMA-store the shared memory view to desc's block `at` (of product `product` with
    BATCHED, as _load)."""
    if BATCHED:
        tma.async_copy_shared_to_global(
            desc, [product] + at,
            view._reinterpret(view.dtype, [1] + view.type.shape, desc.layout))
    else:
        tma.async_copy_shared_to_global(desc, at, view)


@gluon.jit
def _loader(x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, BATCH, c_desc, epi,
            BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr,
            OUT_T: gl.constexpr, CTAS: gl.constexpr, LOADER_WARPS: gl.constexpr,
            X_SMEM: gl.constexpr, READY_AT: gl.constexpr, BATCHED: gl.constexpr):
    """The TMA warps: each K step's X and Y tiles into the ring once the wgmma warps (with
    CTAS > 1, all the cluster's CTAs') have handed the slot back. K steps are issued in
    pairs; past K, TMA fills zeros."""
    THREADS: gl.constexpr = 32 * LOADER_WARPS
    ELEM: gl.constexpr = y_desc.dtype.primitive_bitwidth // 8
    nbytes: gl.constexpr = x_desc.block_type.nbytes + BQ * BK * ELEM
    if CTAS > 1:
        _cluster_sync(THREADS)
    first, walkers, tiles, columns, rank, k_steps = _walk(P, Q, K, BATCH, CTAS, BP, BQ, BK)
    step = 0
    for tile in range(first, tiles, walkers):
        product, off_q, off_p = _tile_origin(tile, Q, columns, rank, CTAS, BP, BQ, GROUP_M)
        for i in range(k_steps):
            slot = claim_slot(ready, empty, step, nbytes)
            if X_SMEM:
                x_at = [off_p, i * BK]
            else:
                x_at = [i * BK, off_p]
            _load(x_desc, x_at, ready.index(slot), x_ring.index(slot), product, BATCHED)
            if CTAS > 1:
                _multicast_y(off_q + rank * (BQ // CTAS), i * BK, slot, rank, THREADS, BQ, BK,
                             CTAS, ELEM, READY_AT)
            else:
                _load(y_desc, [off_q, i * BK], ready.index(slot), y_ring.index(slot), product,
                      BATCHED)
            step += 1
    if CTAS > 1:
        _cluster_sync(THREADS)


@gluon.jit
def _release(empty, slot, rank, pred, CTAS: gl.constexpr, THREADS: gl.constexpr,
             EMPTY_AT: gl.constexpr = 0):
    """Hand ring slot `slot` back to the TMA warps: without clusters once both warpgroups
    are past it (a CTA barrier, then one arrival); in a cluster each warpgroup arrives on
    every CTA's barrier itself (its count: warpgroups x CTAs; EMPTY_AT: the barriers'
    shared memory offset), with no CTA barrier."""
    if CTAS == 1:
        gl.thread_barrier()  # both warpgroups
        mbarrier.arrive(empty.index(slot), pred=pred)
    else:
        for j in gl.static_range(CTAS):
            _release_to(slot, (rank + j) % CTAS, pred, THREADS, EMPTY_AT)


@gluon.jit
def _store_chunk(chunk, j, c_desc, epi, product, off_p, off_q, OUT_T: gl.constexpr,
                 BATCHED: gl.constexpr):
    """Chunk j ([BP, EPI] of the accumulator, columns off_q + EPI j ..) to C through
    buffer j % 2 of epi: C[q, p] with OUT_T, else C[p, q] (of product `product` with
    BATCHED). The buffer's previous TMA store
    (two chunks back) must have read it first; TMA clips the chunk at C's edges."""
    EPI: gl.constexpr = chunk.type.shape[1]
    buf = epi.index(j % 2)
    tma.store_wait(1)
    gl.thread_barrier()  # every thread past the wait before the buffer is rewritten
    chunk = chunk.to(buf.dtype)
    if OUT_T:
        buf.store(gl.permute(chunk, (1, 0)))
        at = [off_q + EPI * j, off_p]
    else:
        buf.store(chunk)
        at = [off_p, off_q + EPI * j]
    fence_async_shared()
    gl.thread_barrier()  # both warpgroups' parts written before one thread issues the store
    _store(c_desc, at, buf, product, BATCHED)


@gluon.jit
def _store_tile(acc, c_desc, epi, product, off_p, off_q, OUT_T: gl.constexpr,
                BP: gl.constexpr, BQ: gl.constexpr, BATCHED: gl.constexpr):
    """The [BP, BQ] accumulator to C in eight chunks of BQ / 8 columns, each staged in
    shared memory and stored by TMA, which runs on while the next tile's K loop starts.
    The chunks are split out of the accumulator's own registers (its column bits above
    the chunk width are register bits of the wgmma layout): no data moves to cut them."""
    EPI: gl.constexpr = BQ // 8
    t = gl.permute(acc.reshape([BP, 8, EPI]), (0, 2, 1))  # [BP, EPI, chunk c]
    even, odd = gl.split(t.reshape([BP, EPI, 4, 2]))  # c = 2a + b: b = 0 / 1
    e0, e1 = gl.split(even.reshape([BP, EPI, 2, 2]))  # c in (0, 4) / (2, 6)
    o0, o1 = gl.split(odd.reshape([BP, EPI, 2, 2]))  # c in (1, 5) / (3, 7)
    c0, c4 = gl.split(e0)
    c2, c6 = gl.split(e1)
    c1, c5 = gl.split(o0)
    c3, c7 = gl.split(o1)
    _store_chunk(c0, 0, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)
    _store_chunk(c1, 1, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)
    _store_chunk(c2, 2, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)
    _store_chunk(c3, 3, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)
    _store_chunk(c4, 4, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)
    _store_chunk(c5, 5, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)
    _store_chunk(c6, 6, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)
    _store_chunk(c7, 7, c_desc, epi, product, off_p, off_q, OUT_T, BATCHED)


@gluon.jit
def _k_loop_smem(x_ring, y_ring, ready, empty, step, k_steps, rank, mma_layout: gl.constexpr,
                 BP: gl.constexpr, BQ: gl.constexpr, CTAS: gl.constexpr,
                 THREADS: gl.constexpr, EMPTY_AT: gl.constexpr):
    """One tile's K loop with X K-major in shared memory too (X_SMEM): both wgmma operands
    read from the ring, one wgmma left in flight; returns the accumulator."""
    STAGES: gl.constexpr = x_ring.type.shape[0]
    acc = gl.zeros([BP, BQ], gl.float32, mma_layout)
    for i in range(k_steps):
        slot = (step + i) % STAGES
        mbarrier.wait(ready.index(slot), ((step + i) // STAGES) & 1)
        acc = warpgroup_mma(x_ring.index(slot), y_ring.index(slot).permute((1, 0)), acc,
                            is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires step i - 1
        _release(empty, (slot + STAGES - 1) % STAGES, rank, i > 0, CTAS, THREADS, EMPTY_AT)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    _release(empty, (step + k_steps + STAGES - 1) % STAGES, rank, True, CTAS, THREADS,
             EMPTY_AT)
    return acc


@gluon.jit
def _mma(x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, BATCH, c_desc, epi,
         BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr,
         OUT_T: gl.constexpr, CTAS: gl.constexpr, LOADER_WARPS: gl.constexpr,
         X_SMEM: gl.constexpr, EMPTY_AT: gl.constexpr, BATCHED: gl.constexpr):
    """The wgmma warpgroups: one wgmma left in flight, its X fragment kept until the wait
    that retires it; a slot goes back to the TMA warp once both warpgroups' wgmmas on it
    have retired. The tile goes out through shared memory by TMA (_store_tile)."""
    STAGES: gl.constexpr = x_ring.type.shape[0]
    NW: gl.constexpr = gl.num_warps()
    THREADS: gl.constexpr = 32 * NW
    # wgmma's K: 32 bytes of the operand type (tf32 8, 16-bit 16).
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NW, 1],
        instr_shape=[16, BQ, 256 // x_desc.dtype.primitive_bitwidth])
    x_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma_layout,
                                                 k_width=1)
    if CTAS > 1:
        _cluster_sync(THREADS)
    first, walkers, tiles, columns, rank, k_steps = _walk(P, Q, K, BATCH, CTAS, BP, BQ, BK)
    step = 0
    for tile in range(first, tiles, walkers):
        product, off_q, off_p = _tile_origin(tile, Q, columns, rank, CTAS, BP, BQ, GROUP_M)
        if X_SMEM:
            acc = _k_loop_smem(x_ring, y_ring, ready, empty, step, k_steps, rank, mma_layout,
                               BP, BQ, CTAS, THREADS, EMPTY_AT)
            step += k_steps
        else:
            mbarrier.wait(ready.index(step % STAGES), (step // STAGES) & 1)
            x = x_ring.index(step % STAGES).permute((1, 0)).load(x_layout)
            y = x
            acc = gl.zeros([BP, BQ], gl.float32, mma_layout)
            for i in range(0, k_steps, 2):
                slot = (step + i) % STAGES
                acc = warpgroup_mma(x, y_ring.index(slot).permute((1, 0)), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires step i - 1
                _keep(y)
                _release(empty, (slot + STAGES - 1) % STAGES, rank, i > 0, CTAS, THREADS,
                         EMPTY_AT)
                odd = (slot + 1) % STAGES
                mbarrier.wait(ready.index(odd), ((step + i + 1) // STAGES) & 1)
                y = x_ring.index(odd).permute((1, 0)).load(x_layout)
                acc = warpgroup_mma(y, y_ring.index(odd).permute((1, 0)), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires step i
                _keep(x)
                _release(empty, slot, rank, True, CTAS, THREADS, EMPTY_AT)
                if i + 2 < k_steps:
                    even = (slot + 2) % STAGES
                    mbarrier.wait(ready.index(even), ((step + i + 2) // STAGES) & 1)
                    x = x_ring.index(even).permute((1, 0)).load(x_layout)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            _keep(y)
            step += k_steps
            _release(empty, (step + STAGES - 1) % STAGES, rank, True, CTAS, THREADS, EMPTY_AT)
        _store_tile(acc, c_desc, epi, product, off_p, off_q, OUT_T, BP, BQ, BATCHED)
    tma.store_wait(0)
    if CTAS > 1:
        _cluster_sync(THREADS)


@constexpr_function
def _ring_layout(desc):
    """The shared layout of a 2-D view of desc's box: desc's own, or a 3-D (BATCHED) box's
    without its product dimension of 1 (the same swizzle over the same rows)."""
    block = [int(getattr(d, "value", d)) for d in desc.block_type.shape]
    if len(block) == 2:
        return desc.layout
    return gl.NVMMASharedLayout.get_default_for(block[1:], desc.dtype)


@gluon.jit
def _register_fed_kernel(
    x_desc, y_desc, c_desc, P, Q, K, BATCH,
    BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP_M: gl.constexpr, OUT_T: gl.constexpr, LOADER_REGS: gl.constexpr,
    CTAS: gl.constexpr = 1, LOADER_WARPS: gl.constexpr = 1, X_SMEM: gl.constexpr = False,
    READY_AT: gl.constexpr = 0, EMPTY_AT: gl.constexpr = 0, BATCHED: gl.constexpr = False,
):
    """acc = X^T Y^T in tf32 over K for X (K, P) P-contiguous through x_desc ([BK, BP]
    boxes; with X_SMEM (P, K) K-contiguous, [BP, BK] boxes, acc = X Y^T) and Y (Q, K)
    K-contiguous through y_desc ([BQ / CTAS, BK]); C fp32 through c_desc ([BQ / 8, BP]
    boxes of C (Q, P) = acc^T with OUT_T, else [BP, BQ / 8] of C (P, Q) = acc).
    Persistent: program i walks tiles i, i + grid, ... in grouped order; with CTAS > 1
    (launched in clusters of CTAS, LOADER_WARPS 4) cluster i walks groups of CTAS tiles
    so. BATCHED (CTAS 1): BATCH products, each descriptor 3-D (product, rows, columns) with
    boxes one product deep; the products' tiles are walked one product after another."""
    # Y's ring first: triton's allocator places the larger ring at offset 0, and of rings
    # the same size (BQ = BP) the one allocated first (Y_RING_OFFSET).
    y_ring = gl.allocate_shared_memory(y_desc.dtype, [STAGES, BQ, BK], _ring_layout(y_desc))
    x_layout: gl.constexpr = _ring_layout(x_desc)
    if X_SMEM:
        x_ring = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BP, BK], x_layout)
    else:
        x_ring = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BK, BP], x_layout)
    # Two buffers of one epilogue chunk (_store_tile): one fills while TMA reads the other.
    if OUT_T:
        epi = gl.allocate_shared_memory(c_desc.dtype, [2, BQ // 8, BP], _ring_layout(c_desc))
    else:
        epi = gl.allocate_shared_memory(c_desc.dtype, [2, BP, BQ // 8], _ring_layout(c_desc))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        # Without clusters one arrival (both warpgroups behind a CTA barrier); in a
        # cluster one per warpgroup of every CTA (_release).
        mbarrier.init(empty.index(s), count=1 if CTAS == 1 else gl.num_warps() // 4 * CTAS)
    gl.warp_specialize([
        (_mma, (x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, BATCH, c_desc, epi,
                BP, BQ, BK, GROUP_M, OUT_T, CTAS, LOADER_WARPS, X_SMEM, EMPTY_AT, BATCHED)),
        (_loader, (x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, BATCH, c_desc, epi,
                   BP, BQ, BK, GROUP_M, OUT_T, CTAS, LOADER_WARPS, X_SMEM, READY_AT,
                   BATCHED)),
    ], [LOADER_WARPS], [LOADER_REGS])


def _operands(a: torch.Tensor, b: torch.Tensor):
    """(X, Y, OUT_T, X_SMEM) for a (..., M, K), b (..., K, N) in the nn, tt or nt layout,
    else None. X is (..., K, P) P-contiguous, fed from registers, or with X_SMEM (..., P,
    K) K-contiguous, read by wgmma from shared memory."""
    rows_a, cols_a, rows_b, cols_b = a.stride(-2), a.stride(-1), b.stride(-2), b.stride(-1)
    if cols_a == 1 and cols_b == 1 and rows_b != 1:  # nn: C^T = B^T A^T
        return b, a, True, False
    if rows_a == 1 and cols_a != 1 and rows_b == 1:  # tt: C = A B
        return a.mT, b.mT, False, False
    if cols_a == 1 and rows_b == 1 and cols_b != 1:  # nt: C = A B
        return a, b.mT, False, True
    return None


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether a (M, K) and b (K, N), fp32 in the nn, tt or nt layout or fp16 / bf16 in
    the nt layout (both operands K-major, read by wgmma from shared memory), and an out
    (M, N) of their dtype with unit column stride, all three as TMA reads and writes them
    (16-byte aligned base and row stride), can run here: on a Hopper GPU, outside the
    interpreter."""
    if INTERPRETER or not (a.dtype == b.dtype == out.dtype and a.dtype in _GL_DTYPES):
        return False
    if a.dim() != 2 or b.dim() != 2 or out.stride(1) != 1 or not hopper(a.device):
        return False
    ops = _operands(a, b)
    if ops is not None and a.dtype != torch.float32 and not ops[3]:
        return False  # 16-bit: nt only
    return (ops is not None and _tma_ok(ops[0], ops[0].stride(0))
            and _tma_ok(ops[1], ops[1].stride(0)) and _tma_ok(out, out.stride(0))
            and min(a.shape + b.shape) > 0)


def supports_batched(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether a batch of products, (batch, M, K) a and (batch, K, N) b, fp32 in the nn,
    tt or nt layout or fp16 / bf16 in the nt layout (as supports()), and a row-major
    (batch, M, N) out of their dtype, runs on bmm: on a Hopper GPU, outside the
    interpreter, each operand as 3-D TMA takes it (batched._tma_ok: no broadcast batch)."""
    if INTERPRETER or not (a.dtype == b.dtype == out.dtype and a.dtype in _GL_DTYPES):
        return False
    if a.dim() != 3 or b.dim() != 3 or out.dim() != 3 or not hopper(a.device):
        return False
    ops = _operands(a, b)
    return (ops is not None and (a.dtype == torch.float32 or ops[3])
            and min(a.shape + b.shape) > 0
            and all(_batched_tma_ok(t, 2) for t in (ops[0], ops[1], out)))


_GL_DTYPES = {torch.float32: gl.float32, torch.float16: gl.float16,
              torch.bfloat16: gl.bfloat16}


def _descriptor(t: torch.Tensor, block: list) -> TensorDescriptor:
    """A descriptor of t (2-D, or 3-D with a product dimension before the block's)."""
    block = [1] * (t.dim() - len(block)) + block
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[t.dtype])
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


_MBARRIER_INIT = re.compile(r"add\.s32\s+%r\d+, %r\d+, (\d+);\s*// begin inline asm\s*"
                            r"@%p\d+ mbarrier\.init\.shared::cta\.b64 \[%r\d+\], (\d+);")


def _check_offsets(ptx: str, ctas: int, out_elem: int = 4, bq: int = BQ,
                   stages: int = STAGES) -> None:
    """Raise unless the kernel's shared memory (CTAS = ctas > 1, an output of out_elem
    bytes an element, Y tiles of bq rows, rings of `stages` slots) lies where its PTX
    strings address it: Y's ring at Y_RING_OFFSET (X's right after it), the ready (count
    1) and empty (count: warpgroups x ctas) barriers from barrier_offsets."""
    inits = [(int(offset), int(count)) for offset, count in _MBARRIER_INIT.findall(ptx)]
    ready = sorted(offset for offset, count in inits if count == 1)
    empty = sorted(offset for offset, count in inits if count == WARPS // 4 * ctas)
    x_ring = Y_RING_OFFSET.value + stages * bq * BK * 4
    found = (ready[:1], empty[:1],
             re.search(rf"add\.s32\s+%r\d+, %r\d+, {x_ring};", ptx) is not None)
    ready_at, empty_at = barrier_offsets(out_elem, bq, stages)
    if found != ([ready_at], [empty_at], True):
        raise ClusterUnavailable(
            f"register_fed: the {ctas}-CTA cluster kernel's shared memory moved (ready, empty "
            f"barriers, X ring at {x_ring}: {found}, expected {ready_at}, {empty_at}); set "
            "WS_SCRATCH / Y_RING_OFFSET from its PTX, or run without clusters "
            "(CLUSTER_CTAS = 1)")


class ClusterUnavailable(RuntimeError):
    """The cluster variant cannot run as compiled (its PTX strings would address the wrong
    shared memory); matmul_2d then runs without clusters."""


_clustered: set = set()
_clusters_unavailable: list = []  # the first ClusterUnavailable, once seen


def _as_cluster(compiled, ctas: int, out_elem: int = 4, bq: int = BQ,
                stages: int = STAGES) -> None:
    """Make triton's launcher start `compiled` (its output out_elem bytes an element) in
    clusters of ctas CTAs: its metadata says num_ctas = ctas (the launcher then launches
    ctas times the grid, clustered), which the kernel, compiled for one CTA a program, does
    not otherwise know."""
    if id(compiled) in _clustered:
        return
    _check_offsets(compiled.asm["ptx"], ctas, out_elem, bq, stages)
    warps, one, *rest = compiled.packed_metadata
    if one != 1:
        raise RuntimeError(f"register_fed: expected a one-CTA compile, got num_ctas {one}")
    compiled.packed_metadata = (warps, ctas, *rest)
    _clustered.add(id(compiled))


def matmul_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, sms: int,
              ctas: int | None = None) -> torch.Tensor:
    """out = a @ b (fp32 operands in tf32) for operands supports() accepts; sms: the GPU's
    SM count (the grid as the persistent kernel's: persistent.programs); ctas: CTAs a
    cluster, sharing Y's tiles by TMA multicast (1, 2 or 4; default CLUSTER_CTAS from
    CLUSTER_MIN_MNK on, else 1; 1 once the cluster kernel turned out unable to run,
    ClusterUnavailable). Returns out."""
    x, y, out_t, x_smem = _operands(a, b)
    p, q = x.shape[0 if x_smem else 1], y.shape[0]
    if ctas is None:
        ctas = CLUSTER_CTAS if p * q * a.shape[1] >= CLUSTER_MIN_MNK else 1
    if ctas not in (1, 2, 4):
        raise ValueError(f"register_fed: ctas must be 1, 2 or 4, got {ctas}")
    if _clusters_unavailable:
        ctas = 1
    if ctas > 1:
        try:
            return _launch(a, b, out, sms, x, y, out_t, x_smem, p, q, ctas)
        except ClusterUnavailable as exc:  # nothing launched: run without clusters
            if not _clusters_unavailable:
                warnings.warn(f"{exc}; running without clusters from here on",
                              RuntimeWarning, stacklevel=2)
                _clusters_unavailable.append(exc)
            ctas = 1
    return _launch(a, b, out, sms, x, y, out_t, x_smem, p, q, ctas)


def bmm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, sms: int) -> torch.Tensor:
    """out = a @ b, product by product (fp32 operands in tf32), for operands
    supports_batched() accepts, in one persistent launch of one-CTA programs (the grid as
    kernels/batched.py's). dispatch sends it tf32 nn and tt batches, and nt ones whose
    copies would pad; other nt ones (both operands read from shared memory) and 16-bit
    ones only perf/batched_probe.py. Returns out."""
    x, y, out_t, x_smem = _operands(a, b)
    return _launch(a, b, out, sms, x, y, out_t, x_smem, x.shape[1 if x_smem else 2],
                   y.shape[1], 1)


# rows_2d's tile: a linear layer's few rows (M <= ROWS_BQ) against its K-major weight W
# (N, K), as C^T = W A^T: W's rows are X (BP of N a tile, read by wgmma from shared memory,
# X_SMEM), A's rows the one Y tile of ROWS_BQ, C stored transposed (OUT_T), ROWS_STAGES
# slots of 32 KB (16-bit or tf32). One CTA a tile: in clusters, which share A's tile by
# multicast, it ran no faster. perf/fed_rows_probe.py (fifty-seventh session), H200, nt,
# CUDA-graph us after the flush, three interleaved rounds, 1 CTA 6 stages / 1 CTA 4 stages
# / 2 CTAs 6 stages / 4 CTAs 6 stages (cuBLAS): fp16 128x11008x4096 29.9 / 34.0 / 30.6 /
# 30.7 (28.4), 128x28672x8192 126.6 / 136.8 / 126.0 / 124.4 (131.2); tf32 128x11008x4096
# 52.4 / 60.9 / 53.7 / 54.0 (55.6). Clusters of four took 46-50% longer at 128 tiles of
# 16384 columns (fp16 59.8 against 41.0 at K 4096; tf32 110.5 against 73.7), probably as
# not all of them fit at once (not checked).
ROWS_BQ, ROWS_STAGES = 128, 6


def supports_rows(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether rows_2d takes a (M, K) row-major and b (K, N) K-major (the transpose of a
    row-major weight (N, K)), fp16, bf16 or fp32 (tf32), M <= ROWS_BQ, into a row-major out
    (M, N) of their dtype, all three as TMA reads and writes them, on a Hopper GPU outside
    the interpreter: supports()'s nt layout (the same operands TMA reads) of few rows."""
    return supports(a, b, out) and _operands(a, b)[3] and a.shape[0] <= ROWS_BQ


def rows_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, sms: int) -> torch.Tensor:
    """out = a @ b (fp32 operands in tf32) for operands supports_rows() accepts, as C^T =
    B^T A^T on ROWS_BQ x ROWS_STAGES tiles (above), one CTA a tile. Returns out."""
    w = b.T
    return _launch(a, b, out, sms, w, a, True, True, w.shape[0], a.shape[0], 1,
                   ROWS_BQ, ROWS_STAGES)


def kernel_constexprs(out_t: bool, ctas: int, x_smem: bool, elem: int = 4, bq: int = BQ,
                      stages: int = STAGES) -> dict:
    """_register_fed_kernel's constexpr arguments for a launch (and the offline compiles of
    perf/sass_audit.py): C^T stored with out_t, ctas CTAs a cluster, X K-major in shared
    memory with x_smem, operands and output of elem bytes an element (4: tf32; 2: 16-bit,
    K steps twice as deep, x_smem only), Y tiles of bq rows, rings of `stages` slots."""
    ready_at, empty_at = barrier_offsets(elem, bq, stages)
    return {"BP": BP, "BQ": bq, "BK": BK * 4 // elem, "STAGES": stages, "GROUP_M": GROUP_M,
            "READY_AT": ready_at, "EMPTY_AT": empty_at,
            "OUT_T": out_t, "LOADER_REGS": LOADER_REGS, "CTAS": ctas,
            # Four TMA warps with clusters: the cluster barriers count every thread,
            # and a one-warp partition leaves three idle warps that never arrive. Nor
            # can one of the four run the loop alone: Gluon splits each TMA copy over
            # the partition's warps (a quarter of X's box each) between 128-thread
            # named barriers (PTX, sm_90a), so that hangs (thirty-eighth session).
            # A one-warp TMA partition beside idle partitions of two and one warps
            # that join only the cluster syncs ran (each X box then four copies from
            # one thread, as without clusters: TMA's 128-byte swizzle spans 32 fp32)
            # and gained nothing (thirty-ninth session, not kept; wave_probe.py
            # --kernels --sustain 2, H200, TFLOPS one warp vs four): 8192^3 nn 341.2
            # vs 341.8, 4096^3 nn 337.5 vs 336.7, 8192^3 tt 341.8 vs 339.9 (cuBLAS
            # 347.4, 342.5, 349.4, at 50-160 MHz higher clocks at the same ~692 W).
            "LOADER_WARPS": 4 if ctas > 1 else 1, "X_SMEM": x_smem}


def _launch(a, b, out, sms, x, y, out_t, x_smem, p, q, ctas, bq=BQ, stages=STAGES):
    """matmul_2d's, bmm's and rows_2d's launch on their operands (X, Y; 3-D: a batch),
    ctas CTAs a cluster, Y tiles of bq rows, rings of `stages` slots. Returns out."""
    elem = a.element_size()
    batch = x.shape[0] if x.dim() == 3 else 1
    constexprs = {**kernel_constexprs(out_t, ctas, x_smem, elem, bq, stages),
                  "num_warps": WARPS, "maxnreg": MAX_REGISTERS, "BATCHED": x.dim() == 3}
    bk = constexprs["BK"]
    args = (_descriptor(x, [BP, bk] if x_smem else [bk, BP]), _descriptor(y, [bq // ctas, bk]),
            _descriptor(out, [bq // 8, BP] if out_t else [BP, bq // 8]), p, q, a.shape[-1],
            batch)
    # A launch per cluster, each group of ctas tiles along P one tile of the wave rule.
    grid = programs(ctas * BP, bq, batch * cdiv(p, ctas * BP) * ctas * BP, q, sms // ctas,
                    half_tail=False)
    run_kernel(_register_fed_kernel, (grid, ), args, constexprs,
               prepare=(functools.partial(_as_cluster, ctas=ctas, out_elem=elem, bq=bq,
                                          stages=stages) if ctas > 1 else None))
    record(triton.Config({"REGISTER_FED": True, "BM": BP, "BN": bq, "BK": bk, "CTAS": ctas,
                          "X_SMEM": x_smem, "PRODUCTS": x.dim() == 3,
                          "OUT_T": out_t and x_smem},
                         num_warps=WARPS, num_stages=stages),
           "tf32" if elem == 4 else "half")
    return out
