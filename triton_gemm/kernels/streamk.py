"""Stream-K GEMM for Hopper: the persistent TMA kernel's tiles, with the tiles that do not
fill a whole wave of programs shared out by K steps so every SM gets the same work.

One program per SM. The tiles that make whole waves run as in kernels/persistent.py (data
parallel); the remaining tiles' K steps, laid end to end, are cut into one contiguous
range per program. A tile whose steps span several programs is finished by the program
holding its last step: the others each write their fp32 partial tile to a workspace slot
of their own and raise a flag; the finisher waits for the flags, adds the partials in
order of K (a fixed order: bitwise reproducible results) and runs the epilogue. Each
program first works on the last tile its range touches (the partial it hands on, where the
range ends inside a tile), then on the others from the start of its range, so the
partials it waits for were the first work of programs with lower ids: no program
waits on one that is itself waiting, and the Triton interpreter, which runs programs one
after another in id order, never waits at all. Waiting needs every program resident at
once: the grid is at most one program per SM, as for the persistent kernel. Flags are left
zero by the finisher (reset as it reads them), so one zeroed buffer serves every launch on
a stream (common.flags).

Why: a product with fewer tiles than SMs, or a last wave of few tiles, leaves SMs idle:
1000^3 fp16 makes 64 tiles of 128x128 on the H100's 132 SMs, and runs at 0.92x cuBLAS
eager, 0.84x GPU time on the persistent kernel (perf/report.py, nineteenth session).

Not dispatched: measured slower than the persistent kernel where it was meant to help. H100,
both kernels still building their TMA descriptors in the kernel (not re-timed since), us,
L2 flushed by a read (graph replay in brackets), the same tile on both kernels,
persistent against stream-K: 1000^3 fp16 128x128x64 16.5 [12.4] against 23.8 [18.8] (cuBLAS
11.2); 4096^3 fp16 128x256x64 188.6 against 200.0 (cuBLAS 179.7); 128x4096x11008 nt fp16
64x64x128 44.5 against 50.5. Faster only with tiles too large for the shape or at 8192^3:
fp16 128x256x64 1617 [1625] against 1506 [1689] (cuBLAS 1604), tf32 4096^3 nt 128x256x32
366 against 363. The shared (stream-K) steps run slower per step than whole tiles (a first
version walking them in a while loop and this one, a flattened loop, ran 1000^3 alike); why
is not settled. Not the pipelining: the TTGIR (sm_90a, offline) has both K loops fed by TMA
stages ahead of their dots. The 4-warp 128x128 tile spills (255 registers, 404 bytes: its
partial sum in another layout beside acc; ptxas -v), the 8-warp one does not (227) and is
slower too. Re-timed with host descriptors (eighteenth session, graph replay after the
flush, us, persistent against stream-K, cuBLAS 11.9): 1000^3 fp16 128x128x64 4 warps 13.9
against 26.7, 8 warps 14.4 against 20.6, 128x64x64 s6 14.7 against 20.2, 64x128x64 s6 14.8
against 19.7; 1536^3 fp16 (144 tiles of 128x128, a wave and 12), five tiles, 22.1-23.3
against 32.6-51.4 (cuBLAS 15.7). Nor did a plainer split help (a probe, not kept): each
128x128 tile of 1000^3 in two programs of half the K steps each, one adding the other's fp32
partial (spinning on a flag, or whichever came second), nt, graph time: fp16 15.5-20.2 us
over four configs (the library's line of that run was lost), bf16 15.7-20.5 against the
library's 15.0, 1024^3 fp16 13.5-16.2 against 11.4. Halving each program's K steps did not
halve its time.

Where the time goes, timed over K (a probe, not kept, nineteenth session; fp16, CUDA-graph
us after the flush, 1000 x 1000 x K for K = 64 / 1000 / 2000 / 4000, three interleaved
rounds): cuBLAS 7.4 / 12.3 / 16.9 / 24.4, pinned persistent 128x128x64 w4 7.8 / 14.0 / 19.3
/ 30.6, 128x64 s6 7.7 / 14.8 / 20.3 / 32.5, 64x128 s6 7.7 / 15.4 / 21.2 / 34.4. The fixed
part matches cuBLAS; the part per K does not: 5.5-6.3 us per 1000 of K against 4.0
(1536 x 1536 x K: 9.5 against 5.5). The 128x64 and 64x128 tiles keep 128 SMs busy but then
load ~8 TB/s of tiles from L2 (128 programs x 15.6 K steps x 24 KB per 1000 of K); the
128x128 tiles load a third less per product but run on 64 SMs, at ~75% of their wgmma peak.
cuBLAS's kernel (nvjet_sm90_hsh_64x128_64x8_2x1: 64x128 tiles in clusters of two) loads as
little from L2 as 128x128 tiles on all 128 SMs, by TMA multicast of the shared B tile to
both SMs of a cluster: consistent with ~8 TB/s of L2 reads bounding all four kernels.
Triton 3.6 has no TMA multicast (its backend: "NYI: Support multicast").

Nor is it register spills (twenty-seventh session, H100, CUDA-graph us after the flush,
persistent against stream-K; cuBLAS 36 and 78): 2208^3 fp16 128x256x64 49.3 against
64.5-69.6, 3008^3 92.5 against 107-109. The finisher's partial loads spill the 128x256
tile (255 registers, 344 bytes stored, sm_90a ptxas -v: a 64-bit address per element
beside acc); with those loads replaced by a constant (171 registers, no spills; wrong sums,
timed only) it took 49.9 and 90.3, no better than the persistent kernel.
dispatch._wave_rows runs such products in two launches instead.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import configs
from .common import (AUTOTUNE, INTERPRETER, dot_precision, epilogue_input, flags, launch,
                     make_tuners, needs_int64, tuning_args, workspace)
from .persistent import (_a_m_major, _b_k_major, _d_row, _num_sms, _tma_ok, k_steps,
                         set_block_shapes, store_tile, tile_origin, tma_descriptors)

# Config families: the persistent kernel's 16-bit and tf32 tiles (configs.streamk_configs).
STREAMK_FAMILIES = ("half", "half_mid", "tf32", "tf32_mid")


@triton.jit
def _owner(step, per, extra):
    """The program whose range holds stream-K step `step` (ranges: per + 1 steps for the
    first `extra` programs, per for the rest)."""
    long_steps = extra * (per + 1)
    if step < long_steps:
        q = step // (per + 1)
    else:
        q = extra + (step - long_steps) // tl.maximum(per, 1)
    return q


@triton.jit
def streamk_kernel(
    a_desc, b_desc, c_desc, c_ptr, d_ptr, part_ptr, flag_ptr,
    M, N, K,
    stride_cm, stride_dm, stride_dn,
    alpha, beta,
    M_BUCKET, N_BUCKET, K_BUCKET, LAYOUT,
    PRECISION: tl.constexpr, HAS_D: tl.constexpr, D_ROW: tl.constexpr, A_M_MAJOR: tl.constexpr,
    B_K_MAJOR: tl.constexpr,
    UPCAST: tl.constexpr, NUM_SMS: tl.constexpr, ACTIVATION: tl.constexpr, C_TMA: tl.constexpr,
    INT64: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
):
    """C = act(alpha * A @ B + beta * D), operands as kernels/persistent.py takes them (host
    TMA descriptors of A, B and, when C_TMA, C; c_ptr is C either way). part_ptr: fp32
    workspace of NUM_SMS BM x BN tiles; flag_ptr: NUM_SMS int32 zeros, left zero. Grid:
    (NUM_SMS,). WARP_SPECIALIZE must be off (the configs share persistent's keys). INT64:
    as persistent.store_tile."""
    tl.static_assert(not WARP_SPECIALIZE)
    pid = tl.program_id(0)

    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    sk_tiles = num_tiles % NUM_SMS
    dp_tiles = num_tiles - sk_tiles

    # Whole waves: one tile after another, as the persistent kernel.
    for tile in tl.range(pid, dp_tiles, NUM_SMS, flatten=True):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        acc = k_steps(a_desc, b_desc, off_m, off_n, 0, k_tiles, PRECISION, A_M_MAJOR,
                      B_K_MAJOR, UPCAST, BM, BN, BK)
        store_tile(acc, c_ptr, c_desc, d_ptr, off_m, off_n, M, N, stride_cm, stride_dm,
                    stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA, EPILOGUE_SUBTILE,
                    BM, BN, 0, 1, INT64)

    # The rest: this program's share of the remaining tiles' K steps.
    steps = sk_tiles * k_tiles
    per = steps // NUM_SMS
    extra = steps % NUM_SMS
    first = pid * per + tl.minimum(pid, extra)
    end = first + per + (pid < extra).to(tl.int32)
    slot = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    # Segment 0 is the range's last tile (the partial this program hands on, if the range
    # ends inside a tile), then the tiles from the range's first onwards.
    last_tile = (end - 1) // k_tiles
    first_tile = first // k_tiles
    segments = tl.where(end > first, last_tile - first_tile + 1, 0)
    for segment in tl.range(0, segments, flatten=True):
        sk_tile = tl.where(segment == 0, last_tile, first_tile + segment - 1)
        tile_first = sk_tile * k_tiles
        begin = tl.maximum(first, tile_first)
        stop = tl.minimum(end, tile_first + k_tiles)
        off_m, off_n = tile_origin(dp_tiles + sk_tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        acc = k_steps(a_desc, b_desc, off_m, off_n, begin - tile_first, stop - tile_first,
                      PRECISION, A_M_MAJOR, B_K_MAJOR, UPCAST, BM, BN, BK)
        if stop == tile_first + k_tiles:
            # This program finishes the tile: the partials of the programs before it (lower
            # K) come first, in program order, then its own steps.
            if begin > tile_first:
                total = tl.zeros((BM, BN), dtype=tl.float32)
                for q in range(_owner(tile_first, per, extra), pid):
                    while tl.atomic_cas(flag_ptr + q, 1, 0, sem="acquire") != 1:
                        pass
                    total += tl.load(part_ptr + q * BM * BN + slot, cache_modifier=".cg")
                acc = total + acc
            store_tile(acc, c_ptr, c_desc, d_ptr, off_m, off_n, M, N, stride_cm, stride_dm,
                        stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA, EPILOGUE_SUBTILE,
                        BM, BN, 0, 1, INT64)
        else:
            tl.store(part_ptr + pid * BM * BN + slot, acc, cache_modifier=".cg")
            tl.debug_barrier()  # every thread's part is written before the flag rises
            tl.atomic_xchg(flag_ptr + pid, 1, sem="release")


_TUNED = make_tuners(streamk_kernel, "streamk",
                     {family: configs.streamk_configs(family) for family in STREAMK_FAMILIES},
                     configs.persistent_prune, prepare=set_block_shapes)


def matmul_2d(a, b, out, d=None, *, alpha=1.0, beta=0.0, precision="tf32", activation=0,
              config=None):
    """out = act(alpha * a @ b + beta * d) on 2-D operands that persistent.supports()
    accepts (not 3xTF32 halves). d: None or broadcastable to out by strides. config pins a
    triton.Config of configs.streamk_configs (tests). Returns out."""
    m, k = a.shape
    n = b.shape[1]
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    num_sms = _num_sms(a.device.index or 0)
    tuning = tuning_args(m, n, k, a, b)
    family = configs.persistent_family(a.dtype, False, m, n, num_sms)
    if config is None and (INTERPRETER or not AUTOTUNE):
        config = configs.persistent_default_config(family)
    biggest = max(c.kwargs["BM"] * c.kwargs["BN"] for c in
                  ([config] if config is not None else _TUNED[family].configs))
    parts = workspace((num_sms * biggest,), torch.float32, a.device)
    c_tma = _tma_ok(out, out.stride(0))
    args = (*tma_descriptors(a, b, out, c_tma)[:3], out, d, parts, flags(num_sms, a.device),
            m, n, k, out.stride(0), d.stride(0), d.stride(1), float(alpha), float(beta),
            *tuning)
    meta = dict(PRECISION=dot_precision(a.dtype, precision), HAS_D=has_d,
                D_ROW=_d_row(has_d, d), A_M_MAJOR=_a_m_major(a), B_K_MAJOR=_b_k_major(b),
                UPCAST=INTERPRETER and a.dtype == torch.bfloat16, NUM_SMS=num_sms,
                ACTIVATION=activation, C_TMA=c_tma, INT64=needs_int64(out, d))
    key = (*tuning, meta["PRECISION"], has_d, meta["D_ROW"], meta["C_TMA"], meta["INT64"],
           a.dtype, b.dtype, out.dtype, d.dtype)
    launch(streamk_kernel, _TUNED[family], (num_sms,), args, meta, config,
           configs.STREAMK_PREFIX + family, key, prepare=set_block_shapes)
    return out
