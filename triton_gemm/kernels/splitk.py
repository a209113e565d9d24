"""Split-K GEMM for products with too few output tiles to fill the GPU: skinny (M = 1..64,
large N and K, memory-bound) and huge-K (small M and N).

The K range is cut into SPLIT slices; program (slice, tile) writes its fp32 partial tile to
a workspace (SPLIT, M, N), then a second kernel sums the slices and applies alpha, beta * D
and the activation. The sum runs one fixed reduction tree, so results are bitwise
reproducible run to run (no atomics). The workspace costs SPLIT * M * N * 4 bytes written
and read, small next to the operands on the shapes this path takes.

Two launches cost a host gap where the partials take less time than the host needs to issue
the second launch: at 128x128x16384 fp16 the reduce kernel started 10.2 us after the partial
kernel ended (perf/timeline.py, H100, replayed calls: partials 5.3 us, reduce 2.0; cuBLAS's
pair 6.1 + 2.0 back to back). One launch whose last-arriving program per tile sums that
tile's partials in slice order (a tile counter; reproducible too) was tried and not kept:
one program reading SPLIT partial tiles from L2 is slower than a reduce kernel spread over
the GPU. perf/timeline.py, tuned configs, us, one launch against the two (separate runs of
one session): 128x128x16384 fp16 11.5 against 5.3 + 2.0 (and the gap), 128x128x65536 fp16
22.9 against 13.6 + 2.0, 256x256x32768 fp16 20.5 against 16.5 + 3.6. On Hopper the reduce
now launches dependent on the partials (common.dependent_launch) and starts as they end.
Retried for skinny products, where SPLIT is 4-16 and a tile's partials 8-32 KB (twenty-fifth
session, not kept: per-stream counters, kept zero by the summing program; perf/timeline.py's
timing, pinned configs, us, the one kernel against partials + reduce): 8x4104x4104 fp16
16x128x128 s4 17.3 against 14.8 + 1.7 (cuBLAS's one kernel 14.5), 16x64x256 s4 17.7 against
16.6 + 1.7, bf16 16x128x128 s4 17.5 against 14.8 + 1.7; 8x4097x4097 fp16 16x128x32 s8 25.5
against 22.8 + 1.4; 64x4104x4104 fp16 64x64x128 s8 30.1 against 24.1 + 2.8; tf32 8x4104x4104
16x128x64 s4 25.8 against 24.7 + 1.7; 128x128x16384 fp16 64x64x128 s16 11.5 against 6.0 +
1.7. The last program's tail (its counter's round trip, then SPLIT loads, then the store,
after every program's release fence) costs more than the reduce kernel it saves. Nor did
skipping the split on those rows pay: the plain kernel's 16-row tiles over all of K
(perf/tile_probe.py --graph, 8x4104x4104 fp16) took 22.2-33.7 us against 20.2 on split-K
(cuBLAS 18.2).

Nor did clusters finish the tiles (thirty-eighth session, not kept): the SPLIT slices of a
tile launched as one thread-block cluster (consecutive programs, the compiled kernel's
num_ctas set as register_fed sets it), each storing its partial, then barrier.cluster
(arrive.release, wait.acquire) and each CTA summing BN / SPLIT of the tile's columns over
all slices from L2: one launch, no counters, reproducible. Clusters of four or eight must
share a GPC, so fewer of them fit at once than a one-wave grid needs. perf/tile_probe.py
--graph (cold L2), H200, fp16, us, pinned configs, clusters against two launches (cuBLAS
17.3-17.9): 8x4104x4104 16x128x128 s4 25.6 vs 17.9, 16x128x64 s8 21.9 vs 17.4, 16x64x128
s2 18.8 vs 19.5; 64x4104x4104 64x128x64 s8 39.0 vs 22.0, 64x64x128 s2 26.2 vs 24.0;
16x8192x8192 16x128x128 s4 45.4 vs 38.5. Only clusters of two kept pace, on tiles slower
than the best two-launch one.

The tuner times the partials alone. Timing each config with its reduce behind it (a
post-hook of the autotuner, inside the timing; thirty-eighth session, not kept) left
8x4104x4104's choice as it was (k_16x128x128_s4; H100 report 0.90x fp16, 0.91x bf16, as
before) and moved 128x128x16384's between tiles of the same slice count (10.7 -> 11.9 us
fp16: tuning noise at ~10 us). Nor does a 16x128x64 tile in 8 slices pay on the H100
(perf/tile_probe.py --graph, us, against 16x128x128 in 4; cuBLAS): fp16 19.8 vs 20.1
(18.0), bf16 19.6 vs 19.7 (17.7), 16x8192x8192 52.8 vs 52.4 (49.0); on the H200 it did
(fp16 17.2 vs 18.0, cuBLAS 17.5).

Nor are the operands read through TMA descriptors: a probe kernel (not kept) of the same
configs with descriptor loads (H100, fp16, CUDA-graph time, L2 flushed, us, TMA against
pointers) ran 128x128x65536 64x64x128 s32 18.9 vs 19.7, 256x256x32768 128x128x64 s32 23.3 vs
24.0 and 128x128x16384 64x64x128 s16 11.9 vs 12.3: within run-to-run noise. Nor does the
persistent TMA kernel take K slices: a probe of it (not kept) writing each slice's partial
for this reduce matched these kernels config for config (fifteenth session, H100, CUDA-graph
time after an L2 flush, us, sliced persistent against pointers: 256x256x32768 fp16 128x64x64
s16 21.1 vs 21.0, 64x128x128 s16 20.5 vs 21.0; 128x128x65536 64x64x128 s32 19.4 vs 19.6),
won only at 512x512x16384 fp16 (64x128x128 s8 24.8 against the pointer kernel's best 26.0;
cuBLAS 22.4), and slowed products with too few tiles (1000^3 fp16 128x128x64: 14.0 unsliced,
17.1 in two slices, 20.0 in three; cuBLAS 10.7).

Nor is a row-major B whose rows sit 16 bytes off a sector read as planes of rows (a probe,
not kept, thirty-first session): slices taking rows k mod P only, each plane's column
windows shifted onto 16P-byte boundaries, partials stored where their columns fall. A's K
runs then become strided, loaded one element at a time, which cost more than B's sectors
saved. H100, CUDA-graph time after an L2 flush, us, pinned configs, P = 1 -> 2 -> 4
(cuBLAS): 8x4104x4104 fp16 16x128x128 s4 20.3 -> 24.2 -> 23.7 (18.2), 16x256x64 s4 20.1
-> 36.8 -> 37.5; 64x4104x4104 64x128x64 s8 23.6 -> 36.3 -> 44.0 (22.9); 16x8200x8200
16x128x128 s4 58.4 -> 60.1 -> 65.2 (53.9). Rows on sectors bound what it could gain:
8x4096x4096 16x128x128 s4 18.7 (cuBLAS 17.1), 8x4112x4112 19.1 (18.1). Rows off 16-byte
runs (odd N) are read in planes (col_planes, fifty-third session): there the planes stand
against loads one element at a time, not against 16-byte loads off a sector, and A strided
by element costs a skinny product little (8x4097x4097 fp16, H200: 19.7 us against 25.9).
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .. import configs
from .common import (AUTOTUNE, INTERPRETER, VECTOR_BYTES, cdiv, dependent_meta, dot_precision,
                     epilogue_input, launch, make_tuners, needs_int64, run_kernel,
                     tuning_args, workspace)
from .epilogue import finish


@triton.jit
def _splitk_partial_kernel(
    a_ptr, b_ptr, w_ptr,
    M, N, K, MA, NB,
    stride_am, stride_ak, stride_bk, stride_bn,
    M_BUCKET, N_BUCKET, K_BUCKET, LAYOUT,
    PRECISION: tl.constexpr, HAS_D: tl.constexpr, UPCAST: tl.constexpr,
    A_VEC: tl.constexpr, A_M_RUNS: tl.constexpr,
    B_VEC: tl.constexpr, B_N_RUNS: tl.constexpr, A_PLANES: tl.constexpr,
    B_PLANES: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr,
    DEPENDENT: tl.constexpr,
):
    """W[s] = A[:M, Ks] @ B[Ks, :N] for K slice s (a multiple of BK long). A (MA, K), B (K,
    NB) with any strides, MA >= M, NB >= N (more when a padded copy: edge tiles then read
    its padding, not wrapped rows or columns, so runs along M or N keep their alignment);
    W (SPLIT, M, N) contiguous fp32. Grid: (SPLIT * tiles,), tiles
    fastest, so the programs of one slice run together and share its A and B in L2.
    HAS_D is only read by the autotuner's key (the partial kernel has no epilogue).
    A_VEC > 0 promises runs of A_VEC elements (16 or 8 bytes) that triton's own
    specialisation (multiples of 16 elements) cannot see (vector_hints): A contiguous
    along M (A_M_RUNS) or K, its other stride and its extent along the runs multiples of
    A_VEC elements; B_VEC and B_N_RUNS the same for B. A_PLANES > 0: A is K-contiguous
    and its rows are not whole runs of A_VEC elements (row_planes): a tile takes rows
    plane + A_PLANES * j, whose starts all sit the same distance past a run boundary, and
    steps through K from that boundary (a shift of up to A_VEC - 1 elements before k = 0),
    so A loads whole runs; elements outside [0, K) are zeroed after the load. B_PLANES > 0:
    B is row-major and its rows are not whole runs of B_VEC elements (col_planes): each K
    slice is cut again into B_PLANES planes of B's rows, k = plane + B_PLANES * j, whose
    rows all start the same distance past a run boundary; a plane's column tiles start
    that far back (up to B_VEC - 1 columns before n = 0), so B loads whole runs, and its
    partial is W[slice * B_PLANES + plane] (W then holds SPLIT * B_PLANES partials). A is
    read one element at a time then (A_VEC 0). DEPENDENT: see common.dependent_launch."""
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    pid = tl.program_id(0)
    planes: tl.constexpr = A_PLANES if A_PLANES > 0 else 1
    b_planes: tl.constexpr = B_PLANES if B_PLANES > 0 else 1
    # Column planes: tiles start up to B_VEC - 1 columns early, so one more may be needed.
    num_pid_n = tl.cdiv(N + (B_VEC - 1 if B_PLANES > 0 else 0), BN)
    blocks_m = tl.cdiv(tl.cdiv(M, planes), BM)  # row blocks per plane
    tiles = planes * blocks_m * num_pid_n
    part = pid // tiles  # the partial this program adds to
    split = part // b_planes
    b_plane = part % b_planes
    tile = pid % tiles
    pid_m = tile // num_pid_n
    pid_n = tile % num_pid_n
    plane = pid_m // blocks_m
    offs_m = plane + planes * ((pid_m % blocks_m) * BM + tl.arange(0, BM))
    # Planes: k = kk + shift for the tile's K index kk, shift in (-A_VEC, 0] puts kk = 0 on
    # a run boundary of every row of the plane (rows plane + A_PLANES * j lie A_PLANES
    # strides apart, a whole number of runs).
    shift = -((plane * stride_am) % A_VEC) if A_PLANES > 0 else 0
    k_end = K - shift  # kk past the last element
    if B_PLANES > 0:
        # Column planes: kk counts the plane's rows of B, k = b_plane + B_PLANES * kk; the
        # plane's columns start n_shift in (-B_VEC, 0] before the tile's run-aligned ones.
        n_shift = -((b_plane * stride_bk) % B_VEC)
        k_end = tl.cdiv(K - b_plane, B_PLANES)
        k_slice = tl.cdiv(tl.cdiv(tl.cdiv(K, B_PLANES), SPLIT), BK) * BK
    else:
        n_shift = 0
        k_slice = tl.cdiv(tl.cdiv(K + (A_VEC - 1 if A_PLANES > 0 else 0), SPLIT), BK) * BK
    k_start = split * k_slice
    k_steps = tl.cdiv(tl.minimum(k_slice, tl.maximum(k_end - k_start, 0)), BK)

    cols = pid_n * BN + tl.arange(0, BN)  # run-aligned under column planes
    offs_n = cols + n_shift
    if B_PLANES > 0:
        offs_k = b_plane + B_PLANES * (k_start + tl.arange(0, BK))
    else:
        offs_k = k_start + tl.arange(0, BK)
    # Rows/columns past the edge read a valid one (wrapped; to the plane's first row,
    # which keeps the plane's alignment) and are never stored.
    if A_PLANES > 0:
        rows_a = tl.where(offs_m < MA, offs_m, plane)
    else:
        rows_a = offs_m % MA
    if A_M_RUNS:  # rows in order but for the wrap, as B's columns
        rows_a = tl.max_contiguous(rows_a, 16)
    # Columns in order but for the wrap: lanes along N where N is unaligned (matmul.py).
    cols_b = tl.max_contiguous(offs_n % NB, 16)
    a_m = rows_a * stride_am
    a_k = offs_k * stride_ak
    b_k = (offs_k + shift) * stride_bk
    b_n = cols_b * stride_bn
    # The hints: wrapping at MA or NB, which are multiples of the run, keeps each run whole.
    if A_VEC > 0 and A_M_RUNS:
        a_m = tl.max_contiguous(tl.multiple_of(rows_a, A_VEC), A_VEC) * stride_am
        a_k = tl.multiple_of(a_k, A_VEC)
    elif A_PLANES > 0:  # stride_ak is 1
        a_m = tl.multiple_of(a_m + shift, A_VEC)
        a_k = tl.max_contiguous(tl.multiple_of(offs_k, A_VEC), A_VEC)
    elif A_VEC > 0:
        a_m = tl.multiple_of(a_m, A_VEC)
    if B_PLANES > 0:  # stride_bn is 1; every row of the plane starts n_shift past a run
        b_k = tl.multiple_of(b_k + n_shift, B_VEC)
        b_n = tl.max_contiguous(tl.multiple_of(cols, B_VEC), B_VEC)
    elif B_VEC > 0 and B_N_RUNS:
        b_k = tl.multiple_of(b_k, B_VEC)
        b_n = tl.max_contiguous(tl.multiple_of(cols_b, B_VEC), B_VEC) * stride_bn
    elif B_VEC > 0:
        b_n = tl.multiple_of(b_n, B_VEC)
    a_ptrs = a_ptr + a_m[:, None] + a_k[None, :]
    b_ptrs = b_ptr + b_k[:, None] + b_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(k_steps):
        # Slices are whole BK steps, so only K's end needs a mask; K - k stays a multiple
        # of 16 when K is, which lets triton keep 16-byte loads along a K-contiguous
        # operand (a mask against the slice end, min(k_start + k_slice, K), does not:
        # 56 us of GPU time against cuBLAS's 12 at 128x128x65536 fp16).
        k_left = k_end - k_start - i * BK
        a_mask = tl.arange(0, BK)[None, :] < k_left
        b_mask = tl.arange(0, BK)[:, None] < k_left
        if A_PLANES > 0:
            # Whole runs up to the one holding K's end (inside A's memory: the run holds an
            # element of it and the base is run-aligned), then the elements outside [0, K)
            # zeroed: another row's, which may hold an inf (inf * 0 is nan).
            a_mask = tl.max_constancy(
                tl.arange(0, BK)[None, :] < tl.cdiv(k_left, A_VEC) * A_VEC, [1, A_VEC])
            kk = k_start + i * BK + tl.arange(0, BK)
            b_mask = b_mask & (kk[:, None] >= -shift)
        elif A_VEC > 0 and not A_M_RUNS:  # K is a multiple of A_VEC: masks hold in its runs
            a_mask = tl.max_constancy(a_mask, [1, A_VEC])
        if B_PLANES > 0:
            # Whole runs up to the one holding N's end (inside B's memory, as A's planes'
            # runs are); the columns outside [0, N) are never stored, and rows past K are
            # not loaded, so the products that are stored see none of another row.
            col_runs = tl.max_constancy(cols < tl.cdiv(N - n_shift, B_VEC) * B_VEC, [B_VEC])
            b_mask = b_mask & col_runs[None, :]
        elif B_VEC > 0 and not B_N_RUNS:
            b_mask = tl.max_constancy(b_mask, [B_VEC, 1])
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        if A_PLANES > 0:
            a = tl.where((kk[None, :] >= -shift) & (kk[None, :] < k_end), a, 0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * b_planes * stride_ak
        b_ptrs += BK * b_planes * stride_bk

    w_ptrs = w_ptr + part * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(w_ptrs, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] >= 0) & (offs_n[None, :] < N))


@triton.jit
def _splitk_reduce_kernel(
    w_ptr, c_ptr, d_ptr,
    M, N, SPLIT,
    stride_cm, stride_cn, stride_dm, stride_dn,
    alpha, beta,
    HAS_D: tl.constexpr, ACTIVATION: tl.constexpr, SPLIT_P2: tl.constexpr,
    BLOCK: tl.constexpr, INT64: tl.constexpr, DEPENDENT: tl.constexpr,
):
    """C = act(alpha * sum_s W[s] + beta * D) over BLOCK consecutive elements of the
    row-major (M, N) index space per program. All SPLIT slices are loaded at once as one
    (SPLIT_P2, BLOCK) tile (SPLIT_P2: SPLIT rounded up to a power of two) and summed by
    tl.sum, whose fixed reduction tree keeps results bitwise reproducible; a loop over
    slices would serialise SPLIT dependent loads (40 us of 56 at 128x128x65536, 32 slices,
    4 programs). INT64: offsets in int64 (W, C or D of 2^31 elements or more).
    DEPENDENT: see common.dependent_launch."""
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    pid = tl.program_id(0)
    slices = tl.arange(0, SPLIT_P2)
    if INT64:
        pid = pid.to(tl.int64)
        slices = slices.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if INT64:
        inside = offs // N < M  # M * N, a product of two int32 scalars, would wrap
    else:
        inside = offs < M * N
    w = tl.load(w_ptr + slices[:, None] * M * N + offs[None, :],
                mask=(slices[:, None] < SPLIT) & inside[None, :], other=0.0)
    acc = tl.sum(w, axis=0) * alpha
    rows = offs // N
    cols = offs % N
    acc = finish(acc, d_ptr + rows * stride_dm + cols * stride_dn, inside, beta, HAS_D,
                 ACTIVATION)
    tl.store(c_ptr + rows * stride_cm + cols * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=inside)


_TUNED = make_tuners(_splitk_partial_kernel, "splitk",
                     {family: configs.splitk_configs(family) for family in configs.FAMILIES},
                     configs.splitk_prune)


@functools.lru_cache(maxsize=None)
def _max_split(family: str, m_bucket: int, n_bucket: int, k_bucket: int, elem_bytes: int,
               b_planes: int = 0) -> int:
    """The most partials the tuner may write for a tuning key (SPLIT, times B_PLANES
    under B's planes: on configs.col_planes_tiles then): the tuned config decides SPLIT
    after the workspace is allocated, so it is sized for this."""
    pool = configs.col_planes_tiles(_TUNED[family].configs, b_planes)
    return max(c.kwargs["SPLIT"] for c in configs.splitk_affordable(
        pool, m_bucket, n_bucket, k_bucket, elem_bytes, b_planes)) * max(b_planes, 1)


# Read a 16-bit A in planes of rows where its rows are not whole 16-byte runs (row_planes):
# loaded by element otherwise, not pipelined (LDG.E.U16 in the SASS of sm_90a). The probe is
# at configs._SPLITK_PLANES_TILES (fp16 128x128x65535 25.6 us against 30.4), and why fp32 is
# not read so (4-byte cp.async pipelines) at configs._SPLITK_NARROW_MMA_TILES.
ROW_PLANES = True
# A plane holds a tile of the smallest BM at least: each plane's tiles read B's K slice
# again (from L2 when the planes' programs run together).
ROW_PLANES_MIN_ROWS = 16
# Read a 16-bit row-major B in planes of its rows where they are not whole 16-byte runs
# (col_planes): by element otherwise (LDG.E.U16, not pipelined); in planes B's loads are
# 16-byte cp.async and only A's stay by element (sm_90a SASS, 16x128x64: 72 LDG.E.U16 a K
# step against 32 LDGSTS.E.BYPASS.128 and 8 LDG.E.U16). The probe is at
# configs._SPLITK_COL_PLANES_TILES (8x4097x4097 fp16 19.7 us against 25.9).
COL_PLANES = True


# Elements the reduce kernel holds per program (SPLIT_P2 x BLOCK fp32 values: 32 per thread
# of 4 warps), so a 128x128 output split 32 ways still spreads over 128 programs.
_REDUCE_TILE = 4096


def run_elements(t: torch.Tensor, run_dim: int) -> int:
    """Elements per run in which the kernel can load 2-D t along run_dim as vectors: the
    widest of 16 and 8 bytes (cp.async moves either) such that t is contiguous there and
    its other stride and its extent along run_dim are whole runs; 0 for none (one element
    at a time). The base must be 16-byte aligned either way: triton specialises pointers
    on that alone, and a run hint on offsets from an unknown base does nothing."""
    if t.stride(run_dim) != 1 or t.data_ptr() % VECTOR_BYTES:
        return 0
    for nbytes in (VECTOR_BYTES, VECTOR_BYTES // 2):
        vec = nbytes // t.element_size()
        if vec and t.stride(1 - run_dim) % vec == 0 and t.shape[run_dim] % vec == 0:
            return vec
    return 0


def whole_runs(t: torch.Tensor, run_dim: int) -> bool:
    """2-D t is contiguous along run_dim with its base, its other stride and its extent
    along run_dim all whole 16-byte runs: what the kernel loads 16 bytes wide (by triton's
    own specialisation or by vector_hints)."""
    return run_elements(t, run_dim) * t.element_size() == VECTOR_BYTES


def _runs(t: torch.Tensor, run_dim: int) -> int:
    """run_elements of 2-D t along run_dim where its other stride and extent are not both
    multiples of 16 elements (which triton specialises on by itself); else 0."""
    seen = t.stride(1 - run_dim) % 16 == 0 and t.shape[run_dim] % 16 == 0
    return 0 if seen else run_elements(t, run_dim)


def _run_dims(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int]:
    """The dimension each of 2-D a (M, K) and b (K, N) runs along: K unless it is not
    contiguous there (A_M_RUNS, B_N_RUNS)."""
    return (0 if a.stride(1) != 1 else 1), (1 if b.stride(0) != 1 else 0)


def row_planes(a: torch.Tensor, b: torch.Tensor) -> int:
    """The partial kernel's A_PLANES for 2-D a (M, K), b (K, N): where a 16-bit A is
    K-contiguous and its rows are not whole 16-byte runs (K or the row stride off a run:
    fp16 K = 65535), the planes of rows whose starts share an offset within a run (the run
    over gcd(stride, run), in elements: 8 at an odd stride; 1 where only K's end is off),
    so that the kernel loads A 16 bytes wide (see the kernel and ROW_PLANES); 0 where A is
    whole runs or is not read that way. Only for a row-major B (shifting its K rows keeps
    its N runs) and at least ROW_PLANES_MIN_ROWS rows per plane."""
    if (not ROW_PLANES or a.element_size() != 2 or a.stride(1) != 1 or a.data_ptr() % VECTOR_BYTES
            or b.stride(0) == 1 or whole_runs(a, 1)):
        return 0
    planes = _plane_count(a)
    return planes if a.shape[0] >= planes * ROW_PLANES_MIN_ROWS else 0


def _plane_count(t: torch.Tensor) -> int:
    """Planes of 2-D t's rows whose starts share an offset within a 16-byte run: the run
    over gcd(row stride, run), in elements (1 for one row or a stride of whole runs)."""
    vec = VECTOR_BYTES // t.element_size()
    gap = t.stride(0) % vec if t.shape[0] > 1 else 0
    return vec // math.gcd(gap, vec) if gap else 1


def col_planes(a: torch.Tensor, b: torch.Tensor) -> int:
    """The partial kernel's B_PLANES for 2-D a (M, K), b (K, N): where a 16-bit B is
    row-major and its rows are not whole 16-byte runs (N or the row stride off a run: fp16
    N = 4097), the planes of B's rows whose starts share an offset within a run (as
    row_planes counts them), so that the kernel loads B 16 bytes wide; 0 where B is whole
    runs or is not read that way. Only for a K-contiguous A, which the kernel then loads
    one element at a time (its K steps stride by the planes); never beside A's planes
    (operand_planes)."""
    if (not COL_PLANES or b.element_size() != 2 or b.stride(1) != 1 or b.shape[1] < 2
            or b.data_ptr() % VECTOR_BYTES or whole_runs(b, 1) or a.stride(1) != 1):
        return 0
    return _plane_count(b)


def operand_planes(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int]:
    """(A_PLANES, B_PLANES) for 2-D a (M, K), b (K, N): A's planes of rows where it has
    them (row_planes), else B's (col_planes); the kernel reads one operand in planes."""
    planes = row_planes(a, b)
    return (planes, 0) if planes else (0, col_planes(a, b))


def narrow_loads(a: torch.Tensor, b: torch.Tensor, planes: int = 0) -> bool:
    """Whether the kernel loads 2-D a (M, K) or b (K, N) less than 16 bytes wide (8 bytes
    or one element at a time): its runs along its contiguous dimension (K where both
    are) are not whole 16-byte runs, A's not read in planes (row_planes)."""
    a_dim, b_dim = _run_dims(a, b)
    return not ((planes or whole_runs(a, a_dim)) and whole_runs(b, b_dim))


def vector_hints(a: torch.Tensor, b: torch.Tensor, planes: int = 0,
                 b_planes: int = 0) -> dict:
    """The partial kernel's A_VEC, A_M_RUNS, B_VEC, B_N_RUNS, A_PLANES, B_PLANES for 2-D
    a (M, K), b (K, N) read in planes of A's rows (row_planes) or of B's (col_planes):
    each operand's runs along its contiguous dimension (K where both are), 16 or 8 bytes
    (_runs), 16 bytes in planes; none for A under B's planes."""
    a_dim, b_dim = _run_dims(a, b)
    a_vec = VECTOR_BYTES // a.element_size() if planes else 0 if b_planes else _runs(a, a_dim)
    b_vec = VECTOR_BYTES // b.element_size() if b_planes else _runs(b, b_dim)
    return {"A_VEC": a_vec, "A_M_RUNS": a_dim == 0, "A_PLANES": planes,
            "B_VEC": b_vec, "B_N_RUNS": b_dim == 1,
            "B_PLANES": b_planes}


def tile_set_bits(narrow: bool, hints: dict, n: int) -> int:
    """The LAYOUT key bits that tune operands into an output n columns wide on their own
    tiles (configs.splitk_prune), from their narrow_loads and vector_hints: NARROW_LOADS
    where an operand loads less than 16 bytes wide, else M_RUNS for an M-major A in hinted
    16-byte runs and n at most SPLITK_RUNS_MAX_N; 0 for the other tiles."""
    if narrow:
        return configs.NARROW_LOADS
    if hints["A_VEC"] and hints["A_M_RUNS"] and n <= configs.SPLITK_RUNS_MAX_N:
        return configs.M_RUNS
    return 0


def supports(a, b, out, d=None) -> bool:
    """Whether operands can run here: element offsets below 2^31 (the kernels compute them
    in int32; the workspace stays small on the shapes dispatch sends)."""
    return not needs_int64(a, b, out, *(() if d is None else (d,)))


def matmul_2d(a, b, out, d=None, *, alpha=1.0, beta=0.0, precision="ieee", activation=0,
              config=None):
    """out = act(alpha * a[:M] @ b[:, :N] + beta * d) for 2-D a (MA, K), b (K, NB), out
    (M, N), MA >= M and NB >= N (zero-padded copies: the kernel reads their padding), any
    strides, that supports() accepts; d None or broadcastable to out by strides. config
    pins a triton.Config of configs.splitk_configs (tests). Returns out."""
    ma, k = a.shape
    nb = b.shape[1]
    m, n = out.shape
    if ma < m or nb < n or b.shape[0] != k:
        raise ValueError(f"split-K operands {tuple(a.shape)} and {tuple(b.shape)} cannot "
                         f"make an output of {tuple(out.shape)}: B needs K = {k} rows, A "
                         f"at least {m} rows, B at least {n} columns")
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    dot_prec = dot_precision(a.dtype, precision)
    family = configs.family_for(a.dtype, precision)
    planes, b_planes = operand_planes(a, b)
    narrow = narrow_loads(a, b, planes)
    hints = vector_hints(a, b, planes, b_planes)
    if config is None and (INTERPRETER or not AUTOTUNE):
        config = (configs.col_planes_default_config() if b_planes
                  else configs.splitk_default_config(family, m, n, k, narrow))
    tuning = tuning_args(m, n, k, a, b)
    tuning = (*tuning[:3], tuning[3] | tile_set_bits(narrow, hints, n))
    max_split = (config.kwargs["SPLIT"] * max(b_planes, 1) if config
                 else _max_split(family, *tuning[:3], a.element_size(), b_planes))
    work = workspace((max_split, m, n), torch.float32, a.device)
    args = (a, b, work, m, n, k, ma, nb, *a.stride(), *b.stride(), *tuning)
    meta = dict(PRECISION=dot_prec, HAS_D=has_d,
                UPCAST=INTERPRETER and a.dtype == torch.bfloat16, **hints,
                **dependent_meta(a.device))

    parts = max(b_planes, 1)  # partials per K slice
    # Column planes' tiles start up to a run early: one more column tile may be needed.
    cols = n + (hints["B_VEC"] - 1 if b_planes else 0)

    def grid(meta_):
        rows = max(planes, 1)
        tiles = rows * cdiv(cdiv(m, rows), meta_["BM"]) * cdiv(cols, meta_["BN"])
        return (meta_["SPLIT"] * parts * tiles,)

    key = (*tuning, planes, b_planes, dot_prec, has_d, a.dtype, b.dtype)
    ran = launch(_splitk_partial_kernel, _TUNED[family], grid, args, meta, config, family,
                 key)
    return reduce(work, ran.kwargs["SPLIT"] * parts, out, d if has_d else None, alpha=alpha,
                  beta=beta, activation=activation)


def reduce(work, split: int, out, d=None, *, alpha=1.0, beta=0.0, activation=0):
    """out = act(alpha * sum(work[:split]) + beta * d) for contiguous fp32 partials work
    (split or more, M, N), out (M, N) and d None or broadcastable to it, any strides; the
    sum in one fixed order (bitwise reproducible). Returns out."""
    m, n = out.shape
    has_d, d = epilogue_input(d, beta, out)
    split_p2 = triton.next_power_of_2(split)
    block = max(_REDUCE_TILE // split_p2, 32)
    run_kernel(_splitk_reduce_kernel, (cdiv(m * n, block),),
               (work, out, d, m, n, split, *out.stride(), *d.stride(),
                float(alpha), float(beta)),
               {"HAS_D": has_d, "ACTIVATION": activation, "SPLIT_P2": split_p2,
                "BLOCK": block, "INT64": needs_int64(work, out, d), "num_warps": 4,
                **dependent_meta(out.device)})
    return out

