"""Strided copy with zero fill, as a Triton kernel: the dispatcher's staged operands (padded
and K-major copies, and the tf32 halves of a 3xTF32 operand).

Why a kernel of our own rather than torch's copy_ and fill: its launches go through
common.run_kernel, so the launch cache records and replays a padded call whole; with
torch's ops (an allocation, a copy and one or two fills per operand) every padded call paid
planning and ~200 us of host time on the H100 machine (1000^3 fp16: 204 us eager against
18 us of GPU time, perf/results)."""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .common import INTERPRETER, cdiv, dependent_meta, run_kernel, workspace
from .splitk import run_elements

# Tile per program: 64 x 64 elements (16 KB of fp32) with 4 warps, a tile transposed
# through shared memory when source and destination are contiguous along different axes.
# perf/copy_probe.py, H100, L2 flushed, eight tiles from 16x256 to 128x128, 4 or 8 warps:
# 4097 x 4097 into padded rows (rows off 16 bytes: one element at a time; eager, when the
# probe timed with do_bench) fp16 30.2-31.7 us (64x64: 31.7), fp32 51.5-52.5 (52.3), fp32
# transposed 53.7-55.6 (54.5); 4104 x 4104 (16-byte runs, source_runs' hints), CUDA-graph
# time, fp16 23.3-24.3 (24.3, 2.8 TB/s), fp32 45.5-46.6 (46.6), fp32 transposed 48.4-52.3
# (49.9; twenty-sixth session). The tile hardly matters.
TILE = 64


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, lo_ptr, strip_ptr, part_ptr, src2_ptr, dst2_ptr, lo2_ptr,
                 ROWS, COLS, DST_ROWS, DST_COLS, STRIP_N, s_b, s_r, s_c, d_b, d_r, d_c, s_sk,
                 s_sn, FIRST_PROGRAMS, ROWS2, COLS2, DST_ROWS2, DST_COLS2, s2_b, s2_r, s2_c,
                 d2_b, d2_r, d2_c,
                 SPLIT_TF32: tl.constexpr, REMAINDER: tl.constexpr, STRIP: tl.constexpr,
                 STRIP_NP: tl.constexpr,
                 STRIP_FMA: tl.constexpr, STRIP_COLS: tl.constexpr, UPCAST: tl.constexpr,
                 SECOND: tl.constexpr, SPLIT_TF32_2: tl.constexpr, REMAINDER_2: tl.constexpr,
                 SRC_VEC: tl.constexpr, SRC_ROW_RUNS: tl.constexpr, SRC2_VEC: tl.constexpr,
                 SRC2_ROW_RUNS: tl.constexpr,
                 BR: tl.constexpr, BC: tl.constexpr, DEPENDENT: tl.constexpr):
    """One or two copies in one launch: programs 0 .. FIRST_PROGRAMS - 1 run the first
    (_copy_tile with src_ptr ... d_c), and with SECOND the rest run the second (src2_ptr,
    dst2_ptr, lo2_ptr, ROWS2 ... d2_c; SPLIT_TF32_2, REMAINDER_2, SRC2_VEC, SRC2_ROW_RUNS;
    no strip). SRC_VEC, SRC_ROW_RUNS: see source_runs. Why one launch:
    a product that stages both operands then waits on one launch less, host and GPU alike.
    perf/copy_probe.py --pair, H100, A padded and B K-major (fp32), us eager, two launches
    against one: 127x8191x509 16.9 -> 13.6, 4097^3 97.5 -> 93.9. DEPENDENT: see
    common.dependent_launch."""
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    pid = tl.program_id(0).to(tl.int64)
    in_second = False  # a compile-time False without SECOND: no second copy compiled
    if SECOND:
        in_second = pid >= FIRST_PROGRAMS
    if in_second:
        _copy_tile(pid - FIRST_PROGRAMS, src2_ptr, dst2_ptr, lo2_ptr, dst2_ptr, dst2_ptr,
                   ROWS2, COLS2, DST_ROWS2, DST_COLS2, 0, s2_b, s2_r, s2_c, d2_b, d2_r, d2_c,
                   0, 0, SPLIT_TF32_2, REMAINDER_2, False, 2, False, 0, UPCAST, SRC2_VEC,
                   SRC2_ROW_RUNS, BR, BC)
    else:
        _copy_tile(pid, src_ptr, dst_ptr, lo_ptr, strip_ptr, part_ptr, ROWS, COLS, DST_ROWS,
                   DST_COLS, STRIP_N, s_b, s_r, s_c, d_b, d_r, d_c, s_sk, s_sn, SPLIT_TF32,
                   REMAINDER, STRIP, STRIP_NP, STRIP_FMA, STRIP_COLS, UPCAST, SRC_VEC,
                   SRC_ROW_RUNS, BR, BC)


@triton.jit
def _copy_tile(pid, src_ptr, dst_ptr, lo_ptr, strip_ptr, part_ptr, ROWS, COLS, DST_ROWS,
               DST_COLS, STRIP_N, s_b, s_r, s_c, d_b, d_r, d_c, s_sk, s_sn,
               SPLIT_TF32: tl.constexpr, REMAINDER: tl.constexpr, STRIP: tl.constexpr,
               STRIP_NP: tl.constexpr, STRIP_FMA: tl.constexpr, STRIP_COLS: tl.constexpr,
               UPCAST: tl.constexpr, SRC_VEC: tl.constexpr, SRC_ROW_RUNS: tl.constexpr,
               BR: tl.constexpr, BC: tl.constexpr):
    """Tile pid (int64) of one copy: dst[b, r, c] = src[b, r, c] for r < ROWS, c < COLS,
    else 0, over dst's DST_ROWS x DST_COLS; any strides, 64-bit offsets. One grid axis walks
    (batch, row tile, column tile): the y and z axes would cap batch and tiles at 65535.

    SPLIT_TF32 (float32): dst gets x rounded to tf32 (10 mantissa bits, nearest, ties away
    from zero like cvt.rna.tf32.f32) and lo_ptr (dst's strides) the remainder x - dst,
    exact in fp32: 3xTF32 operands. A non-finite x leaves a zero remainder, so inf stays inf
    in the product instead of becoming inf - inf = NaN.

    REMAINDER (float32): dst gets only the remainder of an operand that wgmma reads as
    given, dropping its low 13 bits: x - trunc(x) (exact, of x's sign), rounded to tf32 as
    above; zero for a non-finite x.

    STRIP (batch 1): src is the A of a product and strip_ptr (COLS, STRIP_N; strides s_sk,
    s_sn) the last STRIP_N columns of its B. Each program also writes its tile's share of
    A @ strip, in fp32, to part_ptr (column tiles, ROWS, STRIP_N; contiguous), for
    splitk.reduce to sum: the product's column fringe from the one read of A that the
    copy makes anyway. STRIP_FMA (float32 A): the strip's STRIP_COLS (= STRIP_N) columns
    one at a time in fp32 FMA, ieee accuracy; otherwise a 16-bit tensor-core dot. STRIP_NP:
    STRIP_N rounded up to a power of two, at least 16 for the dot, 2 for FMA.

    SRC_VEC > 0 promises that src runs in SRC_VEC-element (16-byte) vectors along its
    columns, or along its rows where SRC_ROW_RUNS (source_runs), which triton cannot see
    where a stride is not a multiple of 16 elements (fp16 rows of 4104)."""
    col_tiles = tl.cdiv(DST_COLS, BC)
    tiles = tl.cdiv(DST_ROWS, BR) * col_tiles
    batch = pid // tiles
    col_tile = (pid % tiles) % col_tiles
    rows = ((pid % tiles) // col_tiles) * BR + tl.arange(0, BR)
    cols = col_tile * BC + tl.arange(0, BC)
    inside = (rows[:, None] < ROWS) & (cols[None, :] < COLS)
    src_batch = batch * s_b
    src_rows = rows * s_r
    src_cols = cols * s_c
    if SRC_VEC > 0:
        src_batch = tl.multiple_of(src_batch, SRC_VEC)
        if SRC_ROW_RUNS:  # the extent along the runs is whole runs: masks hold in them
            src_cols = tl.multiple_of(src_cols, SRC_VEC)
            inside = tl.max_constancy(inside, [SRC_VEC, 1])
        else:
            src_rows = tl.multiple_of(src_rows, SRC_VEC)
            inside = tl.max_constancy(inside, [1, SRC_VEC])
    x = tl.load(src_ptr + src_batch + src_rows[:, None] + src_cols[None, :], mask=inside,
                other=0.0)
    dst_offsets = batch * d_b + rows[:, None] * d_r + cols[None, :] * d_c
    dst_inside = (rows[:, None] < DST_ROWS) & (cols[None, :] < DST_COLS)
    if STRIP:
        n = tl.arange(0, STRIP_NP)
        if STRIP_FMA:
            # fp32 FMA (ieee: as accurate as any precision the product asked for), column by
            # column: a dot pads the strip to 16 columns, 16x the work for a 1-column strip
            # (perf/timeline.py, 4097^3 tf32: the copy of A with the strip 70.9 us through an
            # ieee dot, 49.0 this way).
            part = tl.zeros((BR, STRIP_NP), dtype=tl.float32)
            for j in tl.static_range(STRIP_COLS):
                column = tl.load(strip_ptr + cols * s_sk + j * s_sn, mask=cols < COLS,
                                 other=0.0)
                part = tl.where(n[None, :] == j, tl.sum(x * column[None, :], axis=1)[:, None],
                                part)
        else:
            strip = tl.load(strip_ptr + cols[:, None] * s_sk + n[None, :] * s_sn,
                            mask=(cols[:, None] < COLS) & (n[None, :] < STRIP_N), other=0.0)
            if UPCAST:  # the interpreter's dot takes no bf16
                part = tl.dot(x.to(tl.float32), strip.to(tl.float32), input_precision="ieee")
            else:
                part = tl.dot(x, strip)  # 16-bit tensor cores, fp32 accumulation
        tl.store(part_ptr + (col_tile * ROWS + rows[:, None]) * STRIP_N + n[None, :], part,
                 mask=(rows[:, None] < ROWS) & (n[None, :] < STRIP_N))
    if REMAINDER:
        finite = (x.to(tl.uint32, bitcast=True) & 0x7F800000) != 0x7F800000
        x = tl.where(finite, _tf32_round(x - _tf32_truncate(x)), 0.0)
    if SPLIT_TF32:
        finite = (x.to(tl.uint32, bitcast=True) & 0x7F800000) != 0x7F800000
        hi = tl.where(finite, _tf32_round(x), x)
        tl.store(lo_ptr + dst_offsets, tl.where(finite, x - hi, 0.0), mask=dst_inside)
        x = hi
    tl.store(dst_ptr + dst_offsets, x, mask=dst_inside)


@triton.jit
def _tf32_truncate(x):
    """x (float32) with the 13 mantissa bits tf32 drops cleared, as wgmma reads it."""
    return (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def _tf32_round(x):
    """Finite x (float32) rounded to tf32, half away from zero: half an ulp of tf32 added
    to the magnitude bits, then the 13 bits tf32 drops cleared."""
    return _tf32_truncate((x.to(tl.uint32, bitcast=True) + 0x1000).to(tl.float32,
                                                                      bitcast=True))


class Job(NamedTuple):
    """One staged copy (_copy_tile): dst (batch, R', C') <- src (batch, R, C), R <= R' and
    C <= C', the rest of dst zero. With lo (float32, dst's shape and strides): dst gets src
    rounded to tf32 and lo the remainder; with remainder, dst gets the remainder of src
    truncated to tf32."""
    src: torch.Tensor
    dst: torch.Tensor
    lo: torch.Tensor | None = None
    remainder: bool = False


def _check(job: Job) -> None:
    src, dst, lo = job.src, job.dst, job.lo
    if lo is not None and not (src.dtype == dst.dtype == lo.dtype == torch.float32
                               and lo.shape == dst.shape and lo.stride() == dst.stride()):
        raise ValueError("a tf32 split needs float32 src, dst and lo, lo shaped and strided "
                         "like dst")
    if job.remainder and not (lo is None and src.dtype == dst.dtype == torch.float32):
        raise ValueError("a truncation remainder needs float32 src and dst, and no lo")


def copy_jobs(*jobs: Job, strip: torch.Tensor | None = None) -> torch.Tensor | None:
    """Run one or two copies in one launch. strip (K, F): the first job copies the A
    (1, M, K) of a product whose column fringe is strip, and also computes A @ strip as
    partials (column tiles, M, F) float32 scratch, returned, whose sum over the first axis
    kernels/splitk.reduce takes; None without a strip."""
    if not 1 <= len(jobs) <= 2:
        raise ValueError(f"one launch copies one or two operands, got {len(jobs)}")
    for job in jobs:
        _check(job)
    partials = None
    if strip is not None:
        batch, rows, cols = jobs[0].src.shape
        if batch != 1 or strip.shape[0] != cols or jobs[0].dst.shape[0] != 1:
            raise ValueError(f"a copy with a strip takes one (1, M, K) A and a (K, F) strip, "
                             f"got {tuple(jobs[0].src.shape)} and {tuple(strip.shape)}")
        partials = workspace((cdiv(jobs[0].dst.shape[2], TILE), rows, strip.shape[1]),
                             torch.float32, jobs[0].src.device)
    # An empty first copy (M or K zero) leaves partials with nothing to sum.
    with_strip = partials is not None and jobs[0].dst.numel() > 0
    live = [job for job in jobs if job.dst.numel()]
    if live:
        launch(*live, strip=strip if with_strip else None,
               partials=partials if with_strip else None)
    return partials


def source_runs(src: torch.Tensor) -> tuple[int, bool]:
    """(SRC_VEC, SRC_ROW_RUNS) of a copy from (batch, R, C) src: the elements per run in
    which it loads as vectors (splitk.run_elements, the batch stride a whole run too) along
    C, or along R where that is the contiguous axis (True); 0 where triton sees the runs by
    itself (strides and extent multiples of 16 elements) or there are none.

    Why: triton proves 16-byte runs only from integers it specialises on multiples of 16,
    so it loaded a source of 4104-element fp16 rows one element at a time (32 two-byte
    loads per thread, sm_90a PTX; 4 of 16 bytes with the hint). perf/timeline.py, H100,
    4104^3 fp16 (A copied with its column strip and B in one launch): the copy 56.3 -> 46.8
    us, the whole call 250.8 -> 241.4 (cuBLAS 203.9; twenty-sixth session)."""
    if src.shape[0] == 0 or not (src.stride(2) == 1 or src.stride(1) == 1):
        return 0, False
    run_dim = 1 if src.stride(2) == 1 else 0  # of the 2-D (R, C) matrix
    vec = run_elements(src[0], run_dim)
    if src.shape[0] > 1 and vec and src.stride(0) % vec:
        vec = 0
    seen = all(x % 16 == 0 for x in (src.stride(2 - run_dim), src.shape[1 + run_dim],
                                     src.stride(0)))
    return (0 if seen else vec), run_dim == 0


def _programs(dst: torch.Tensor, br: int, bc: int) -> int:
    return dst.shape[0] * cdiv(dst.shape[1], br) * cdiv(dst.shape[2], bc)


def launch(first: Job, second: Job | None = None, strip=None, partials=None,
           tile=(TILE, TILE, 4)) -> None:
    """_copy_kernel over the jobs' dst tiles in (rows, columns, warps) = tile programs
    (perf/copy_probe.py times others); strip, partials as the kernel takes them for the
    first job, None for none."""
    src, dst, lo, remainder = first
    rows, cols = src.shape[1], src.shape[2]
    dst_rows, dst_cols = dst.shape[1], dst.shape[2]
    strip_n = 0 if strip is None else strip.shape[1]
    fma = strip is not None and src.dtype == torch.float32
    br, bc, warps = tile
    first_programs = _programs(dst, br, bc)
    two = second if second is not None else Job(src, dst)  # the unused slot: any tensors
    runs = source_runs(src)
    runs2 = source_runs(second.src) if second is not None else (0, False)
    grid = (first_programs + (0 if second is None else _programs(second.dst, br, bc)),)
    run_kernel(_copy_kernel, grid,
               (src, dst, dst if lo is None else lo, dst if strip is None else strip,
                dst if partials is None else partials, two.src, two.dst,
                two.dst if two.lo is None else two.lo, rows, cols, dst_rows, dst_cols, strip_n,
                *src.stride(), *dst.stride(), *(strip.stride() if strip is not None else (0, 0)),
                first_programs, *two.src.shape[1:], *two.dst.shape[1:], *two.src.stride(),
                *two.dst.stride()),
               {"SPLIT_TF32": lo is not None, "REMAINDER": remainder,
                "STRIP": strip is not None, "STRIP_FMA": fma,
                "STRIP_COLS": strip_n if fma else 0,
                "STRIP_NP": max(2 if fma else 16, triton.next_power_of_2(strip_n)),
                # The interpreter's dot takes no bf16.
                "UPCAST": INTERPRETER and src.dtype == torch.bfloat16,
                "SECOND": second is not None, "SPLIT_TF32_2": two.lo is not None,
                "REMAINDER_2": two.remainder, "SRC_VEC": runs[0], "SRC_ROW_RUNS": runs[1],
                "SRC2_VEC": runs2[0], "SRC2_ROW_RUNS": runs2[1],
                "BR": br, "BC": bc, "num_warps": warps,
                **dependent_meta(src.device)})


def padded_job(src: torch.Tensor, shape: tuple) -> Job:
    """Job for a new contiguous (batch, R', C') tensor (scratch: common.workspace) holding
    src (batch, R, C) in its top-left corner and zeros elsewhere."""
    return Job(src, workspace(shape, src.dtype, src.device))


def split_job(src: torch.Tensor, shape: tuple) -> Job:
    """Job for new contiguous (batch, R', C') float32 tensors (scratch) dst and lo with src
    (batch, R, C) rounded to tf32 and its remainder in their top-left corners, zeros
    elsewhere: the operand halves of a 3xTF32 product, hi + lo == src."""
    return Job(src, workspace(shape, torch.float32, src.device),
               workspace(shape, torch.float32, src.device))


def remainder_job(src: torch.Tensor, shape: tuple) -> Job:
    """Job for a new contiguous (batch, R', C') float32 tensor (scratch) with the remainder
    of src (batch, R, C) truncated to tf32, rounded to tf32, in its top-left corner and
    zeros elsewhere: the lo half of a 3xTF32 operand that wgmma reads as given (hi = src
    with its low 13 bits dropped, as wgmma reads fp32); hi + lo is src to within 2^-21 of
    it."""
    return Job(src, workspace(shape, torch.float32, src.device), remainder=True)
