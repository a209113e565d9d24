"""Persistent TMA GEMM in tiles 80, 96, 144, 160 or 192 rows tall for 16-bit products on
Hopper (fp16, bf16): a height that is not a power of two, as two accumulators stacked (64 or
128 rows, and 16, 32 or 64) over one B tile, A read as two TMA boxes a K step.
kernels/wide.py's two-part tile, turned on its side, and each part computed transposed
(C^T = B^T A^T) so its rows are wgmma's N, which takes 16 and 32 rows without padding them
to a warpgroup's 64.

Why: 65-96 and 129-192 rows (a short prefill against a transformer's weight) pad 64- and
128-row tiles, and the tiles that ran them either computed the padding (128x256: 1.8x the
work at 144 rows) or read the weight from L2 once per 64-row tile (the mid tiles: three
times at 144 rows). Here every program holds all the rows for 128 columns of the weight:
the weight is read once and at most 15 rows are padding (31 past 160).
Outputs of fewer tiles than SMs run in K slices (slices()). cuBLAS does the same with
wgmma N of any multiple of 8 (perf/cublas_kernels.py: nvjet_sm90_hsh_128x144_64x6_2x1 at
144x16384x4096 nt, 128x160 at 160x11008x4096, 128x192 at 192x28672x8192, 128x96 at
96x11008x4096). The dispatch rule and the probe's figures: dispatch.TALL.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .common import (INTERPRETER, cdiv, dependent_meta, epilogue_input, needs_int64, record,
                     run_kernel, workspace)
from .persistent import (_a_m_major, _b_k_major, _d_row, _tma_ok, load_step, programs,
                         set_block_shapes, store_tile, tile_origin, tma_descriptors)
from . import wide as _wide
from .splitk import reduce

# The tile: (BM + BH) x BN, BK deep; GROUP_M as configs.GROUP_M. 4 warps issue both parts'
# wgmmas (at BH = 64, 192 x 128 fp32: 192 registers a thread, as wide.py's tile).
# perf/tall_probe.py, H200, fp16 nt, CUDA-graph time after the L2 flush, us, 128 columns
# (BK 64) on 4 warps in 5 / 4 / 3 stages: 144x16384x4096 41.4 / 43.7 / 50.5, 160x11008x4096 36.2 /
# 37.5 / 46.0, 192x28672x8192 (5 stages do not fit) 162.5 / 187.8; on 8 warps in 4 stages
# 44.5, 40.2 and 173.1; 64 columns in 6 stages 49.0, 47.5, 189.1; 256 on 8 warps in 3
# stages 65.4 at 144x16384x4096 (64 tiles), 142.7 at 136x28672x8192 (144.4 on 128x64x5).
# BK 128 (fifty-sixth session, same probe, us, against BK 64 as above): 3 stages 33.3 against
# 30.5 at 96x11008x4096 (at 144 rows 3 stages do not fit), 2 stages 55.1-261.0 (1.6-1.8x);
# 64 columns by 128 deep in 4 stages 42.0 against 37.0 at 144x11008x4096, 170.0 / 151.2 at
# 144x28672x8192.
BN, BK, WARPS, GROUP_M = 128, 64, 4, 8
# The parts' heights: upper (a warpgroup's 64 or two) and lower (wgmma's N in the powers of
# two triton's blocks take, shorter than the upper part: 64 + 64 is a plain 128-row tile).
UPPER_HEIGHTS = (64, 128)
LOWER_HEIGHTS = (16, 32, 64)
# Stages that fit shared memory beside the C tiles' buffers, by tile height (80 and 96: same
# probe, 7 / 6 / 5 stages, 96x11008x4096 29.4 / 30.1 / 31.8, 96x28672x8192 130.0 / 127.7 /
# 126.9, 96x16384x4096 40.9 / 41.0 / 40.6).
STAGES = {80: 6, 96: 6, 144: 5, 160: 5, 192: 4}
# Outputs of fewer tiles than SMs run in K slices no shallower than this. perf/tall_probe.py,
# H200, fp16 nt, graph us, the library's mid tiles / tall tiles in K slices (cuBLAS):
# 144x4096x11008 in 4 slices of 2752 43.2 / 33.8 (34.8), 144x8192x28672 in 2 203.0 / 137.4
# (132.0); 144x4096x4096 in 3 of 1365 19.6 / 21.6 (17.7), where 2048 leaves it in 2 slices
# (64 tiles, under half a wave: dispatch.TALL keeps the mid tiles).
# Outputs of 86 tiles (11008 columns) stay in one slice though 132 SMs hold more: each
# program reads its 1 MB of the weight and all of A (1.2 MB at 144 rows), about 55-60 GB/s
# of operands an SM, and K slices spread the same total of A reads over more programs, each
# paying its pipeline's fill and its fp32 partial (fifty-sixth session, H200, fp16 nt, graph
# us (cuBLAS): 144x11008x4096 in 1 slice 37.2, in 3 44.4, their kernel alone 38.7 and
# splitk.reduce alone 9.8 (31.2); 96x11008x4096 30.4 / 39.7 (27.6); 144x28672x8192 in 4
# slices 187.6 against 158.6 (128.3)). cuBLAS runs these in 2-CTA clusters (nvjet_..._2x1),
# where TMA multicast can read A once for both tiles. triton 3.6's tl and Gluon do not
# expose multicast, but kernels/register_fed.py issues it from Gluon as PTX on triton's
# shared-memory offsets (register_fed.CLUSTER_CTAS). At 128 rows that multicast did not
# pay: register_fed.rows_2d (A's 128 rows one tile, W's 128-row tiles) in 2-CTA clusters
# sharing A's tile ran 128x11008x4096 fp16 30.6 us against 29.9 in one CTA a tile (tf32
# 53.7 / 52.4; cuBLAS 28.4 / 55.6; perf/fed_rows_probe.py, fifty-seventh session), so
# re-reading A is not what holds these rows; a clustered form of this tile is not tried.
# Nor did rows_2d with this tile's two parts pay (fifty-eighth session, not kept): a second
# accumulator of 32 or 64 rows below its 128 against the same weight tile, its own ring
# slots, warp-specialised as rows_2d, ran 160x28672x8192 fp16 155.8 us against 155.1 here
# (cuBLAS 135.0), 160x11008x4096 36.4 / 36.1 (32.3), 192x28672x8192 166.6 / 169.5
# (161.6); each K step's weight fragment loaded into registers once for both wgmmas (so
# shared memory serves it once, not once a part) ran slower, 169.6 and 41.0 us at 160 rows;
# 96 rows as 64 + 32 123.2 / 123.4 (122.1) and 30.9 / 30.3 (27.5) (perf/fed_rows_probe.py,
# H200, CUDA-graph us after the flush, three interleaved rounds).
MIN_SLICE_K = 2048
MAX_M = UPPER_HEIGHTS[-1] + LOWER_HEIGHTS[-1]


def parts(m: int) -> tuple[int, int] | None:
    """(upper, lower) rows of the tile for an output of m rows, the fewest that cover them:
    65-96 rows as 64 + 16 or 32, 129-192 as 128 + 16, 32 or 64; None for other counts
    (97-128 rows fill a plain 128-row tile)."""
    for upper in UPPER_HEIGHTS:
        for lower in LOWER_HEIGHTS:
            if lower < upper and upper < m <= upper + lower:
                return upper, lower
    return None


@triton.jit
def _tall_kernel(a_desc, b_desc, c_desc, ah_desc, ch_desc, c_ptr, d_ptr, part_ptr,
                 M, N, K, stride_cm, stride_dm, stride_dn, alpha, beta, K_SLICE_STEPS,
                 HAS_D: tl.constexpr, D_ROW: tl.constexpr, A_M_MAJOR: tl.constexpr,
                 B_K_MAJOR: tl.constexpr, UPCAST: tl.constexpr, ACTIVATION: tl.constexpr,
                 C_TMA: tl.constexpr, INT64: tl.constexpr, BM: tl.constexpr, BH: tl.constexpr,
                 BN: tl.constexpr,
                 BK: tl.constexpr, GROUP_M: tl.constexpr, SLICES: tl.constexpr,
                 DEPENDENT: tl.constexpr):
    """C (M, N) = act(alpha * A @ B + beta * D) in (BM + BH) x BN tiles, each program
    walking tiles pid, pid + grid, ... in grouped order. A, B and C as
    persistent._persistent_kernel takes them (INT64 as persistent.store_tile); ah_desc and ch_desc: A and C with blocks BH
    rows tall (the tile's lower part). Each part is computed transposed, C^T = B^T A^T:
    its rows are then wgmma's N, which takes 16 and 32 as well as 64 (as M it would be
    padded to a warpgroup's 64). SLICES > 1: work items (slice, tile), K_SLICE_STEPS K
    steps a slice, each writing its fp32 tile to slice s of the (SLICES, M, N) workspace at
    part_ptr (summed by splitk.reduce with the epilogue)."""
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    num_pid_m = tl.cdiv(M, BM + BH)
    num_pid_n = tl.cdiv(N, BN)
    tiles = num_pid_m * num_pid_n
    if SLICES == 1:
        k_steps = tl.cdiv(K, BK)
    else:
        k_steps = K_SLICE_STEPS
    for item in tl.range(tl.program_id(0), tiles * SLICES, tl.num_programs(0),
                         flatten=False):
        s = item // tiles
        off_m, off_n = tile_origin(item % tiles, num_pid_m, num_pid_n, BM + BH, BN, GROUP_M)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
        acc_h = tl.zeros((BN, BH), dtype=tl.float32)
        for step in range(k_steps):
            ki = s * k_steps + step  # past K, TMA reads zeros
            a, b = load_step(a_desc, b_desc, off_m, off_n, ki, A_M_MAJOR, B_K_MAJOR, UPCAST,
                             BK)
            # The upper part's wgmmas go before the lower part's A is loaded, as in wide.py.
            acc = tl.dot(b.T, a.T, acc)
            if A_M_MAJOR:
                a_h = ah_desc.load([ki * BK, off_m + BM]).T
            else:
                a_h = ah_desc.load([off_m + BM, ki * BK])
            if UPCAST:
                a_h = a_h.to(tl.float32)
            acc_h = tl.dot(b.T, a_h.T, acc_h)
        if SLICES == 1:
            store_tile(acc.T, c_ptr, c_desc, d_ptr, off_m, off_n, M, N, stride_cm, stride_dm,
                       stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA, False, BM, BN,
                       0, 1, INT64)
            store_tile(acc_h.T, c_ptr, ch_desc, d_ptr, off_m + BM, off_n, M, N, stride_cm,
                       stride_dm, stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA,
                       False, BH, BN, 0, 1, INT64)
        else:
            _store_part(part_ptr + s * M * N, acc, off_m, off_n, M, N, BM, BN)
            _store_part(part_ptr + s * M * N, acc_h, off_m + BM, off_n, M, N, BH, BN)


@triton.jit
def _store_part(part_ptr, acc_t, off_m, off_n, M, N, ROWS: tl.constexpr, BN: tl.constexpr):
    """The fp32 (BN, ROWS) transposed tile acc_t into the (M, N) partial at part_ptr (int32
    offsets: slices x M x N is at most a wave of tiles, slices())."""
    rows = off_m + tl.arange(0, ROWS)
    cols = off_n + tl.arange(0, BN)
    tl.store(part_ptr + rows[:, None] * N + cols[None, :], acc_t.T,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
             d: torch.Tensor | None = None) -> bool:
    """Whether 2-D a (M, K), b (K, N) and out (M, N) can run here with epilogue input d:
    rows parts() gives a tile, and the operands kernels/wide.py takes (16-bit, Hopper or
    the interpreter, TMA-readable, A's rows on 32-byte sectors, no matrix D)."""
    return parts(a.shape[0]) is not None and _wide.supports(a, b, out, d)


def slices(m: int, n: int, k: int, sms: int) -> int:
    """The K slices an (m, n, k) product runs in: as many as one wave of sms programs holds
    beside its tiles, none shallower than MIN_SLICE_K; 1 where it has a wave of tiles."""
    t = tiles(m, n)
    return max(min(sms // t, k // MIN_SLICE_K), 1) if t else 1


def tiles(m: int, n: int, bn: int = BN) -> int:
    """The tiles of an m x n output (rows parts() takes: one row of them)."""
    return cdiv(n, bn)


def matmul_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
              d: torch.Tensor | None = None, *, alpha: float = 1.0, beta: float = 0.0,
              activation: int = 0, sms: int, tile: tuple | None = None) -> torch.Tensor:
    """out = act(alpha * a @ b + beta * d) for operands supports() accepts, d None or
    broadcastable to out by strides, in as few programs as take as many waves of sms
    programs as the tiles need (persistent.programs); in slices(...) K slices where those
    are more than one, summed by splitk.reduce. tile: (BN, BK, warps, stages[, slices]) for
    probes (default the module's). Returns out."""
    m, k = a.shape
    n = b.shape[1]
    tile_parts = parts(m)
    if tile_parts is None:
        raise ValueError(f"tall.matmul_2d: a has {m} rows; the kernel takes 65-96 or "
                         f"129-{MAX_M} (check supports() first)")
    if out.numel() == 0:
        return out
    bm, bh = tile_parts
    bn, bk, warps, stages = (tile or (BN, BK, WARPS, STAGES[bm + bh]))[:4]
    has_d, d = epilogue_input(d, beta, out)
    c_tma = _tma_ok(out, out.stride(0))
    a_m_major, b_k_major = _a_m_major(a), _b_k_major(b)
    shapes = {"BN": bn, "BK": bk, "A_M_MAJOR": a_m_major, "B_K_MAJOR": b_k_major,
              "EPILOGUE_SUBTILE": False}
    # Two sets of descriptors: the upper part's boxes bm rows tall, the lower part's bh.
    descs = tma_descriptors(a, b, out, c_tma)
    set_block_shapes(descs, {"BM": bm, **shapes})
    lower = tma_descriptors(a, b, out, c_tma)
    set_block_shapes(lower, {"BM": bh, **shapes})
    split = slices(m, n, k, sms) if tile is None else tile[4] if len(tile) > 4 else 1
    steps = cdiv(cdiv(k, split), bk)
    split = cdiv(k, steps * bk)  # every slice non-empty
    if split == 1:
        grid, work, steps = programs(bm + bh, bn, m, n, sms, half_tail=False), None, 0
    else:
        grid, work = tiles(m, n, bn) * split, workspace((split, m, n), torch.float32, a.device)
    run_kernel(_tall_kernel, (grid,),
               (descs[0], descs[1], descs[2], lower[0], lower[2], out, d, work, m, n, k,
                out.stride(0), d.stride(0), d.stride(1), float(alpha), float(beta), steps),
               {"HAS_D": has_d, "D_ROW": _d_row(has_d, d), "A_M_MAJOR": a_m_major,
                "B_K_MAJOR": b_k_major, "UPCAST": INTERPRETER and a.dtype == torch.bfloat16,
                "ACTIVATION": activation, "C_TMA": c_tma, "INT64": needs_int64(out, d),
                "BM": bm, "BH": bh, "BN": bn,
                "BK": bk, "GROUP_M": GROUP_M, "SLICES": split, "num_warps": warps,
                "num_stages": stages, **dependent_meta(a.device)})
    if split > 1:
        reduce(work, split, out, d, alpha=alpha, beta=beta, activation=activation)
    record(triton.Config({"TALL": True, "BM": bm + bh, "BN": bn, "BK": bk, "SPLIT": split},
                         num_warps=warps, num_stages=stages), "tall")
    return out
